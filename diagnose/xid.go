package diagnose

import (
	"slices"
	"strconv"
	"strings"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// An XID is an event, not a state. DCGM_FI_DEV_XID_ERRORS holds a GPU's
// last XID until the exporter restarts, so the diagnosis grades what the
// source stamped on each XID (engine.StampXIDs): when it last occurred,
// and whether it was already there at llmdiag's first read.
//
// An XID's grade is its severity in NVIDIA's XID catalogue (xidCatalog,
// docs/gpu-xid.md): CRIT for one that needs a GPU reset or a reboot, WARN
// for one the application causes or one the catalogue does not list, OK
// for an informational one. It is graded down one level (CRIT to WARN,
// WARN to OK) when it last occurred more than gpu_xid_window ago, or
// when it was already there at the first read, or when nothing says when
// it occurred (unstamped): it may be old. Only a CRIT XID makes the node
// not routable (xidDrains).

// xidKind is why an XID has its grade, which the conclusion names.
type xidKind int

const (
	xidFault     xidKind = iota // CRIT: current, needs a reset or a reboot
	xidOfApp                    // the application's, current
	xidNotListed                // not in the catalogue, current
	xidOld                      // older than gpu_xid_window
	xidFirstRead                // there at the first read, or unstamped
	xidInformational
)

// xidGrade is one reported XID as the diagnosis reads it.
type xidGrade struct {
	x      *llmdiagv1.GPUXid
	entry  xidEntry
	listed bool
	age    time.Duration // since it occurred, as of the metrics' observed_at
	status llmdiagv1.Status
	kind   xidKind
}

// severityStatus is the grade of an XID of each severity, before it is
// graded down.
var severityStatus = map[xidSeverity]llmdiagv1.Status{
	xidHardware: statusCrit, xidApp: statusWarn, xidUnlisted: statusWarn, xidInfo: statusOK,
}

// gradeXIDs grades m's XIDs under window (gpu_xid_window), in the order
// m lists them.
func gradeXIDs(m *llmdiagv1.NodeMetrics, window time.Duration) []xidGrade {
	xs := m.GetGpu().GetXidErrors()
	if len(xs) == 0 {
		return nil
	}
	at := m.GetObservedAt().AsTime()
	out := make([]xidGrade, 0, len(xs))
	for _, x := range xs {
		e, listed := xidCatalog[x.GetXid()]
		g := xidGrade{x: x, entry: e, listed: listed}
		sev := e.severity
		if !listed {
			sev = xidUnlisted
		}
		g.status = severityStatus[sev]
		if x.GetOccurredAt() != nil {
			g.age = max(at.Sub(x.GetOccurredAt().AsTime()), 0)
		}
		switch {
		case sev == xidInfo:
			g.kind = xidInformational
		case x.GetOccurredAt() == nil || x.GetAtFirstRead():
			g.kind, g.status = xidFirstRead, gradeDown(g.status)
		case g.age > window:
			g.kind, g.status = xidOld, gradeDown(g.status)
		case sev == xidHardware:
			g.kind = xidFault
		case sev == xidApp:
			g.kind = xidOfApp
		default:
			g.kind = xidNotListed
		}
		out = append(out, g)
	}
	return out
}

// gradeDown is one level less severe: CRIT to WARN, WARN to OK.
func gradeDown(s llmdiagv1.Status) llmdiagv1.Status {
	switch s {
	case statusCrit:
		return statusWarn
	case statusWarn:
		return statusOK
	}
	return s
}

// xidDrains reports whether some GPU of m reports a current XID that
// needs a GPU reset or a reboot: the node is then not routable.
func xidDrains(m *llmdiagv1.NodeMetrics, window time.Duration) bool {
	for _, g := range gradeXIDs(m, window) {
		if g.status == statusCrit {
			return true
		}
	}
	return false
}

// worstXID is the grade the XID finding concludes from: the most severe,
// and of those the one that occurred last.
func worstXID(gs []xidGrade) xidGrade {
	w := gs[0]
	for _, g := range gs[1:] {
		if g.status > w.status || g.status == w.status && g.kind < w.kind ||
			g.status == w.status && g.kind == w.kind && g.age < w.age {
			w = g
		}
	}
	return w
}

// xidCodes are the XIDs of gs of w's status and kind, once each, in
// order.
func xidCodes(gs []xidGrade, w xidGrade) string {
	var codes []string
	for _, g := range gs {
		c := strconv.FormatUint(uint64(g.x.GetXid()), 10)
		if g.status == w.status && g.kind == w.kind && !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	return strings.Join(codes, ", ")
}

func (f *facts) gpuXIDFinding(p printer) *llmdiagv1.Finding {
	gs := gradeXIDs(f.m, f.t.GPUXIDWindow)
	if len(gs) == 0 {
		return finding(p, llmdiagv1.Indicator_INDICATOR_GPU_XID, nameGPUXID, p.f(valueNone), statusOK, p.f(conGPUNoXID))
	}
	var vals, ev []string
	for _, g := range gs {
		x := g.x
		switch {
		case g.kind == xidFirstRead:
			vals = append(vals, p.f(valueGPUXIDFirstRead, x.GetGpu(), int(x.GetXid())))
		case g.age < time.Second:
			vals = append(vals, p.f(valueGPUXIDNew, x.GetGpu(), int(x.GetXid())))
		default:
			vals = append(vals, p.f(valueGPUXIDAgo, x.GetGpu(), int(x.GetXid()), p.seconds(g.age.Seconds())))
		}
		what := g.entry.mnemonic
		if m, ok := xidMeanings[x.GetXid()]; ok {
			what = p.f(m)
		}
		if g.listed {
			ev = append(ev, p.f(evGPUXIDEntry, int(x.GetXid()), x.GetGpu(), what, g.entry.action))
		}
		if x.Count != nil {
			ev = append(ev, p.f(evGPUXIDCount, int(x.GetXid()), x.GetGpu(), strconv.FormatUint(x.GetCount(), 10)))
		}
	}
	ev = append(ev, p.f(evGPUXIDWindow, p.seconds(f.t.GPUXIDWindow.Seconds())))
	w := worstXID(gs)
	codes := xidCodes(gs, w)
	var con string
	switch {
	case w.status == statusOK:
		con = p.f(conGPUXIDQuiet, codes)
	case w.kind == xidFault:
		con = p.f(conGPUXID, codes)
	case w.kind == xidOfApp:
		con = p.f(conGPUXIDApp, codes)
	case w.kind == xidNotListed:
		con = p.f(conGPUXIDUnlisted, codes)
	case w.kind == xidOld:
		con = p.f(conGPUXIDAged, codes, p.seconds(w.age.Seconds()))
	default:
		con = p.f(conGPUXIDFirstRead, codes)
	}
	return finding(p, llmdiagv1.Indicator_INDICATOR_GPU_XID, nameGPUXID, p.join(vals), w.status, con, ev...)
}

// xidRec is what to do about an XID finding that is WARN or CRIT: drain
// and reset for a current fault, read the engine's log for the
// application's, read the kernel log for an old or unlisted one.
func (f *facts) xidRec() msg {
	gs := gradeXIDs(f.m, f.t.GPUXIDWindow)
	if len(gs) == 0 {
		return recGPUXIDCheck
	}
	switch w := worstXID(gs); {
	case w.status == statusCrit:
		return recGPUXID
	case w.kind == xidOfApp:
		return recGPUXIDApp
	}
	return recGPUXIDCheck
}

// XIDCodes lists, ascending, the XIDs of NVIDIA's catalogue
// (xidCatalog, docs/gpu-xid.md) that a current occurrence grades s: CRIT
// those that need a GPU reset or a reboot, WARN the application's, OK
// the informational ones. An XID the catalogue does not list is WARN too,
// and in none of the lists.
func XIDCodes(s llmdiagv1.Status) []uint32 {
	var out []uint32
	for code, e := range xidCatalog {
		if severityStatus[e.severity] == s {
			out = append(out, code)
		}
	}
	slices.Sort(out)
	return out
}
