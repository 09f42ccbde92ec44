package diagnose

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestXIDCatalogActions: every action a row uses is graded, every graded
// action is used, and a row's severity is its action's unless overridden.
func TestXIDCatalogActions(t *testing.T) {
	used := map[string]bool{}
	for code, e := range xidCatalog {
		if e.mnemonic == "" {
			t.Errorf("XID %d has no mnemonic", code)
		}
		if e.severity == xidUnlisted {
			t.Errorf("XID %d is in the table but graded unlisted", code)
		}
		if o, ok := xidSeverityOverride[code]; ok {
			if e.severity != o {
				t.Errorf("XID %d: severity %d, its override says %d", code, e.severity, o)
			}
			if e.action != "" {
				if s := xidActionSeverity[e.action]; s == o {
					t.Errorf("XID %d: override %d is what %s grades anyway", code, o, e.action)
				}
			}
		}
		if e.action == "" {
			// The catalogue gives no immediate action: only an override
			// can grade the row.
			if _, ok := xidSeverityOverride[code]; !ok {
				t.Errorf("XID %d has no immediate action and no override", code)
			}
			continue
		}
		used[e.action] = true
		s, ok := xidActionSeverity[e.action]
		if !ok {
			t.Errorf("XID %d: action %q is not in xidActionSeverity", code, e.action)
			continue
		}
		if _, over := xidSeverityOverride[code]; !over && e.severity != s {
			t.Errorf("XID %d: severity %d, but %s grades %d and there is no override", code, e.severity, e.action, s)
		}
	}
	for a, s := range xidActionSeverity {
		if !used[a] {
			t.Errorf("xidActionSeverity grades %q, which no row uses", a)
		}
		if s == xidUnlisted {
			t.Errorf("xidActionSeverity grades %q unlisted", a)
		}
	}
	for code := range xidSeverityOverride {
		if _, ok := xidCatalog[code]; !ok {
			t.Errorf("xidSeverityOverride names XID %d, which the table does not hold", code)
		}
	}
}

// TestXIDCatalogGrades holds the codes an inference fleet meets most to the
// grades docs/gpu-xid.md gives them.
func TestXIDCatalogGrades(t *testing.T) {
	for _, tc := range []struct {
		code   uint32
		action string
		want   xidSeverity
	}{
		{13, "RESTART_APP", xidApp},
		{31, "RESTART_APP", xidApp},
		{43, "IGNORE", xidApp}, // overridden: the application died
		{45, "WORKFLOW_XID_45", xidApp},
		{48, "WORKFLOW_XID_48", xidHardware},
		{63, "IGNORE", xidInfo},
		{64, "RESET_GPU", xidHardware},
		{74, "WORKFLOW_NVLINK_ERR", xidHardware},
		{79, "RESTART_BM", xidHardware},
		{92, "IGNORE", xidInfo},
		{94, "RESTART_APP", xidApp},
		{95, "RESET_GPU", xidHardware},
		{119, "RESET_GPU", xidHardware},
		{154, "XID_154", xidHardware},
		{61, "", xidUnlisted},  // "Unused", for none of the four GPUs
		{14, "", xidUnlisted},  // "Unused"
		{167, "", xidUnlisted}, // no immediate action
	} {
		e, ok := xidCatalog[tc.code]
		if got := e.severity; got != tc.want {
			t.Errorf("XID %d: graded %d, want %d", tc.code, got, tc.want)
		}
		if ok != (tc.want != xidUnlisted) {
			t.Errorf("XID %d: in the table %v, want %v", tc.code, ok, tc.want != xidUnlisted)
		}
		if e.action != tc.action {
			t.Errorf("XID %d: action %q, want %q", tc.code, e.action, tc.action)
		}
	}
}

// xidGradeWord is a severity as docs/gpu-xid.md writes it.
var xidGradeWord = map[xidSeverity]string{xidInfo: "info", xidApp: "app", xidHardware: "hardware"}

// TestXIDCatalogPage: docs/gpu-xid.md's table of every code and its table
// of immediate actions say what the code does, row for row.
func TestXIDCatalogPage(t *testing.T) {
	b, err := os.ReadFile("../docs/gpu-xid.md")
	if err != nil {
		t.Fatal(err)
	}
	codeRow := regexp.MustCompile("^\\| (\\d+) \\| `([^`]+)` \\| (?:`([A-Z0-9_]+)`|\\(none\\)) \\| (info|app|hardware)( \\(override\\))? \\|$")
	actionRow := regexp.MustCompile("^\\| `([A-Z0-9_]+)` \\| [^|]+ \\| (info|app|hardware) \\| ")
	seen := map[uint32]bool{}
	actions := map[string]bool{}
	for n, line := range strings.Split(string(b), "\n") {
		if m := actionRow.FindStringSubmatch(line); m != nil {
			actions[m[1]] = true
			s, ok := xidActionSeverity[m[1]]
			if !ok {
				t.Errorf("docs/gpu-xid.md:%d grades action %s, which xidActionSeverity does not", n+1, m[1])
			} else if xidGradeWord[s] != m[2] {
				t.Errorf("docs/gpu-xid.md:%d grades %s %s, the code %s", n+1, m[1], m[2], xidGradeWord[s])
			}
			continue
		}
		if !strings.HasPrefix(line, "| ") || len(line) < 3 || line[2] < '0' || line[2] > '9' {
			continue
		}
		m := codeRow.FindStringSubmatch(line)
		if m == nil {
			if strings.Contains(line, "(override)") || strings.Count(line, "|") == 5 {
				t.Errorf("docs/gpu-xid.md:%d: a code row not in the form the test reads: %q", n+1, line)
			}
			continue
		}
		c, _ := strconv.ParseUint(m[1], 10, 32)
		code := uint32(c)
		if seen[code] {
			t.Errorf("docs/gpu-xid.md:%d: XID %d again", n+1, code)
		}
		seen[code] = true
		e, ok := xidCatalog[code]
		if !ok {
			t.Errorf("docs/gpu-xid.md:%d: XID %d, which xidCatalog does not hold", n+1, code)
			continue
		}
		if e.mnemonic != m[2] || e.action != m[3] || xidGradeWord[e.severity] != m[4] {
			t.Errorf("docs/gpu-xid.md:%d: XID %d %s %q %s, the code %s %q %s",
				n+1, code, m[2], m[3], m[4], e.mnemonic, e.action, xidGradeWord[e.severity])
		}
		if _, over := xidSeverityOverride[code]; over != (m[5] != "") {
			t.Errorf("docs/gpu-xid.md:%d: XID %d marked override %v, the code %v", n+1, code, m[5] != "", over)
		}
	}
	for code := range xidCatalog {
		if !seen[code] {
			t.Errorf("docs/gpu-xid.md has no row for XID %d", code)
		}
	}
	for a := range xidActionSeverity {
		if !actions[a] {
			t.Errorf("docs/gpu-xid.md does not grade action %s", a)
		}
	}
}
