package refusal_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmdiag/llmdiag/internal/refusal"
)

// fixture is a Log on a manual clock, its lines decoded.
type fixture struct {
	now time.Time
	buf bytes.Buffer
	reg *prometheus.Registry
	log *refusal.Log
}

func newFixture(t *testing.T, o refusal.Options) *fixture {
	t.Helper()
	f := &fixture{now: time.Unix(1_700_000_000, 0), reg: prometheus.NewRegistry()}
	o.Log = slog.New(slog.NewJSONHandler(&f.buf, nil))
	o.Registerer = f.reg
	o.Now = func() time.Time { return f.now }
	var err error
	if f.log, err = refusal.New(o); err != nil {
		t.Fatal(err)
	}
	return f
}

// lines are the lines logged so far.
func (f *fixture) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.buf.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func (f *fixture) count(t *testing.T, r refusal.Reason) float64 {
	t.Helper()
	c, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range c {
		if mf.GetName() != refusal.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == string(r) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", refusal.MetricName, r)
	return 0
}

func TestBoundPerReason(t *testing.T) {
	type step struct {
		advance time.Duration
		reason  refusal.Reason
		n       int
	}
	tests := []struct {
		name  string
		steps []step
		// lines is how many lines each reason got; suppressed the
		// "suppressed" of each line logged, in order (0: absent).
		lines      map[refusal.Reason]int
		suppressed []float64
		counts     map[refusal.Reason]float64
	}{
		{
			name:       "within the burst every refusal is logged",
			steps:      []step{{0, refusal.Auth, 5}},
			lines:      map[refusal.Reason]int{refusal.Auth: 5},
			suppressed: []float64{0, 0, 0, 0, 0},
			counts:     map[refusal.Reason]float64{refusal.Auth: 5, refusal.Rate: 0},
		},
		{
			name:       "beyond the burst lines are held back and the next says how many",
			steps:      []step{{0, refusal.Auth, 100}, {500 * time.Millisecond, refusal.Auth, 1}},
			lines:      map[refusal.Reason]int{refusal.Auth: 6},
			suppressed: []float64{0, 0, 0, 0, 0, 95},
			counts:     map[refusal.Reason]float64{refusal.Auth: 101},
		},
		{
			name:       "after a held-back line the count starts again",
			steps:      []step{{0, refusal.Rate, 7}, {500 * time.Millisecond, refusal.Rate, 1}, {500 * time.Millisecond, refusal.Rate, 1}},
			lines:      map[refusal.Reason]int{refusal.Rate: 7},
			suppressed: []float64{0, 0, 0, 0, 0, 2, 0},
			counts:     map[refusal.Reason]float64{refusal.Rate: 9},
		},
		{
			name:       "a flood of one reason holds back no other",
			steps:      []step{{0, refusal.Auth, 50}, {0, refusal.Size, 2}},
			lines:      map[refusal.Reason]int{refusal.Auth: 5, refusal.Size: 2},
			suppressed: []float64{0, 0, 0, 0, 0, 0, 0},
			counts:     map[refusal.Reason]float64{refusal.Auth: 50, refusal.Size: 2, refusal.Handshake: 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, refusal.Options{})
			for _, s := range tt.steps {
				f.now = f.now.Add(s.advance)
				for range s.n {
					f.log.Refuse(s.reason, "request denied", "remote", "127.0.0.1:1")
				}
			}
			got := map[refusal.Reason]int{}
			var sup []float64
			for _, l := range f.lines(t) {
				if l["level"] != "WARN" || l["msg"] != "request denied" || l["remote"] != "127.0.0.1:1" {
					t.Errorf("line %v: want a warning with the caller's attributes", l)
				}
				got[refusal.Reason(l["refused"].(string))]++
				s, _ := l["suppressed"].(float64)
				sup = append(sup, s)
			}
			if len(got) != len(tt.lines) {
				t.Errorf("lines by reason %v, want %v", got, tt.lines)
			}
			for r, n := range tt.lines {
				if got[r] != n {
					t.Errorf("lines of %s: %d, want %d", r, got[r], n)
				}
			}
			if len(sup) != len(tt.suppressed) {
				t.Fatalf("suppressed %v, want %v", sup, tt.suppressed)
			}
			for i := range sup {
				if sup[i] != tt.suppressed[i] {
					t.Errorf("suppressed %v, want %v", sup, tt.suppressed)
					break
				}
			}
			for r, n := range tt.counts {
				if c := f.count(t, r); c != n {
					t.Errorf("%s{reason=%q} = %g, want %g", refusal.MetricName, r, c, n)
				}
			}
		})
	}
}

// TestFloodIsBounded: a thousand refusals a second for a minute write at
// most the burst and PerSecond lines a second, and the lines' counts and
// the held-back ones add up to every refusal.
func TestFloodIsBounded(t *testing.T) {
	f := newFixture(t, refusal.Options{PerSecond: 2, Burst: 5})
	const perSecond, seconds = 1000, 60
	for range perSecond * seconds {
		f.now = f.now.Add(time.Second / perSecond)
		f.log.Refuse(refusal.Auth, "request denied")
	}
	lines := f.lines(t)
	if max := 5 + 2*seconds; len(lines) > max {
		t.Errorf("%d lines, want at most %d", len(lines), max)
	}
	if len(lines) < 2*seconds {
		t.Errorf("%d lines, want about 2 a second (%d)", len(lines), 2*seconds)
	}
	var held float64
	for _, l := range lines {
		s, _ := l["suppressed"].(float64)
		held += s
	}
	// Those held back after the last line are counted, not yet logged.
	if logged := float64(len(lines)) + held; logged > perSecond*seconds || logged < perSecond*seconds-perSecond/2 {
		t.Errorf("lines %d + suppressed %g = %g, want about %d", len(lines), held, logged, perSecond*seconds)
	}
	if c := f.count(t, refusal.Auth); c != perSecond*seconds {
		t.Errorf("counted %g, want %d", c, perSecond*seconds)
	}
}

// TestErrorLogCountedElsewhere: a handshake error of a connection that
// what closed it counted already (as the given func says, by the remote
// address in the line) is not counted again; others are.
func TestErrorLogCountedElsewhere(t *testing.T) {
	f := newFixture(t, refusal.Options{})
	var asked []string
	el := f.log.ErrorLog(func(remote string) bool {
		asked = append(asked, remote)
		return remote == "127.0.0.1:5555"
	})
	el.Printf("http: TLS handshake error from 127.0.0.1:5555: EOF")
	el.Printf("http: TLS handshake error from [::1]:5556: EOF")
	if c := f.count(t, refusal.Handshake); c != 1 {
		t.Errorf("handshake refusals %g, want 1 (the one not counted elsewhere)", c)
	}
	if want := []string{"127.0.0.1:5555", "[::1]:5556"}; !slices.Equal(asked, want) {
		t.Errorf("asked about %q, want %q", asked, want)
	}
}

func TestErrorLog(t *testing.T) {
	f := newFixture(t, refusal.Options{})
	el := f.log.ErrorLog()
	for range 20 {
		el.Printf("http: TLS handshake error from 127.0.0.1:5555: EOF")
	}
	for range 7 {
		// The server closed it (a connection deadline, which counted it).
		el.Printf("http: TLS handshake error from 127.0.0.1:5557: read tcp 127.0.0.1:443->127.0.0.1:5557: use of closed network connection")
	}
	for range 20 {
		el.Printf("http2: server: error reading preface from client 127.0.0.1:5556: bogus greeting")
	}
	if c := f.count(t, refusal.Handshake); c != 20 {
		t.Errorf("handshake refusals %g, want 20", c)
	}
	var handshakes, others int
	for _, l := range f.lines(t) {
		switch {
		case l["refused"] == "handshake":
			handshakes++
			if l["msg"] != "TLS handshake failed" || l["err"] != "http: TLS handshake error from 127.0.0.1:5555: EOF" {
				t.Errorf("handshake line %v", l)
			}
		case l["refused"] == nil:
			others++
			if l["msg"] != "http2: server: error reading preface from client 127.0.0.1:5556: bogus greeting" || l["level"] != "WARN" {
				t.Errorf("other line %v", l)
			}
		}
	}
	if handshakes != refusal.DefaultBurst || others != refusal.DefaultBurst {
		t.Errorf("%d handshake and %d other lines, want %d of each", handshakes, others, refusal.DefaultBurst)
	}
	for _, r := range refusal.Reasons {
		if r != refusal.Handshake && f.count(t, r) != 0 {
			t.Errorf("%s counted %g, want 0", r, f.count(t, r))
		}
	}
}

func TestNilLog(t *testing.T) {
	var l *refusal.Log
	l.Refuse(refusal.Auth, "request denied") // does nothing
	if l.ErrorLog() != nil {
		t.Error("nil Log's ErrorLog is not nil")
	}
}

func TestRegisteredOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := refusal.New(refusal.Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := refusal.New(refusal.Options{Registerer: reg}); err == nil {
		t.Error("second counter on one registry: no error")
	}
	if n := testutil.CollectAndCount(reg, refusal.MetricName); n != len(refusal.Reasons) {
		t.Errorf("%d series at start, want one per reason (%d)", n, len(refusal.Reasons))
	}
}
