package chaos

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestClassifyCalls(t *testing.T) {
	kill := Window{Name: "leader killed", Replica: "b", From: at(10), To: at(14)}
	for _, tc := range []struct {
		name              string
		calls             []Call
		windows           []Window
		made, in, outside int
	}{
		{"all succeed", []Call{{Start: at(1)}, {Start: at(11), Replica: "b"}}, []Window{kill}, 2, 0, 0},
		{"failure on the killed replica in its window", []Call{{Start: at(11), Replica: "b", Err: "unavailable"}}, []Window{kill}, 1, 1, 0},
		{"window edges included", []Call{{Start: at(10), Replica: "b", Err: "x"}, {Start: at(14), Replica: "b", Err: "x"}}, []Window{kill}, 2, 2, 0},
		{"failure on another replica in the window breaks the promise", []Call{{Start: at(11), Replica: "a", Err: "unavailable"}}, []Window{kill}, 1, 0, 1},
		{"failure after the window", []Call{{Start: at(14.5), Replica: "b", Err: "unavailable"}}, []Window{kill}, 1, 0, 1},
		{"failure before the window", []Call{{Start: at(9.9), Replica: "b", Err: "unavailable"}}, []Window{kill}, 1, 0, 1},
		{"no windows", []Call{{Start: at(11), Replica: "b", Err: "x"}}, nil, 1, 0, 1},
		{"window for any replica", []Call{{Start: at(11), Replica: "c", Err: "x"}}, []Window{{From: at(10), To: at(12)}}, 1, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ClassifyCalls(tc.calls, tc.windows)
			if s.Made != tc.made || s.FailedInWindow != tc.in || len(s.Outside) != tc.outside {
				t.Errorf("made %d, in window %d, outside %d; want %d, %d, %d", s.Made, s.FailedInWindow, len(s.Outside), tc.made, tc.in, tc.outside)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	var calls []Call
	for i := 1; i <= 100; i++ {
		calls = append(calls, Call{Start: at(float64(i)), Latency: time.Duration(i) * time.Millisecond})
	}
	calls = append(calls, Call{Start: at(1), Latency: time.Hour, Err: "failed"}) // failures do not count
	for _, tc := range []struct {
		name string
		q    float64
		keep func(Call) bool
		want time.Duration
		ok   bool
	}{
		{"p99 of 1..100 ms", 0.99, nil, 99 * time.Millisecond, true},
		{"p50", 0.5, nil, 50 * time.Millisecond, true},
		{"max", 1, nil, 100 * time.Millisecond, true},
		{"kept part only", 0.99, func(c Call) bool { return c.Start.Before(at(11)) }, 10 * time.Millisecond, true},
		{"none kept", 0.99, func(Call) bool { return false }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Quantile(calls, tc.q, tc.keep)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestClassifySeen(t *testing.T) {
	lag := 2 * time.Second
	s := func(client int, replica string, read, asOf float64) Seen {
		return Seen{Client: client, Replica: replica, Node: "n", At: at(read), AsOf: at(asOf)}
	}
	for _, tc := range []struct {
		name                        string
		seen                        []Seen
		same, lagging, beyond, read int
	}{
		{"moving forward", []Seen{s(1, "a", 1, 1), s(1, "b", 2, 2), s(1, "a", 3, 3)}, 0, 0, 0, 3},
		{"equal is not back", []Seen{s(1, "a", 1, 5), s(1, "a", 2, 5), s(1, "b", 3, 5)}, 0, 0, 0, 3},
		{"same replica goes back", []Seen{s(1, "a", 1, 5), s(1, "a", 2, 4)}, 1, 0, 0, 2},
		{"other replica behind within the lag", []Seen{s(1, "a", 1, 5), s(1, "b", 2, 4)}, 0, 1, 0, 2},
		{"other replica behind beyond the lag", []Seen{s(1, "a", 1, 5), s(1, "b", 2, 2)}, 0, 0, 1, 2},
		{"other clients are independent", []Seen{s(1, "a", 1, 5), s(2, "a", 2, 1)}, 0, 0, 0, 2},
		{"unset times are skipped", []Seen{s(1, "a", 1, 5), {Client: 1, Replica: "a", Node: "n", At: at(2)}}, 0, 0, 0, 1},
		{"back on one replica after others moved on", []Seen{s(1, "a", 1, 5), s(1, "b", 2, 9), s(1, "a", 3, 4)}, 1, 0, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ClassifySeen(tc.seen, lag)
			if len(o.SameReplica) != tc.same || o.Lagging != tc.lagging || len(o.BeyondLag) != tc.beyond || o.Reads != tc.read {
				t.Errorf("same %d, lagging %d, beyond %d, reads %d; want %d, %d, %d, %d", len(o.SameReplica), o.Lagging, len(o.BeyondLag), o.Reads, tc.same, tc.lagging, tc.beyond, tc.read)
			}
		})
	}
	o := ClassifySeen([]Seen{s(1, "a", 1, 5), s(1, "b", 2, 3.5)}, lag)
	if o.MaxLag != 1500*time.Millisecond {
		t.Errorf("max lag %v, want 1.5s", o.MaxLag)
	}
	o = ClassifySeen([]Seen{s(1, "a", 1, 5), s(1, "a", 2, 4)}, lag)
	if len(o.SameReplica) != 1 || !strings.Contains(o.SameReplica[0].String(), "1s back") {
		t.Errorf("regression %v, want one, 1s back", o.SameReplica)
	}
}

func TestMaxStaleness(t *testing.T) {
	samples := []Staleness{
		{Node: "a", At: at(1), Age: time.Second},
		{Node: "hung", At: at(2), Age: time.Minute},
		{Node: "b", At: at(3), Age: 3 * time.Second},
		{Node: "hung", At: at(100), Age: 5 * time.Second},
	}
	excuse := func(node string, when time.Time) bool { return node == "hung" && when.Before(at(50)) }
	worst, n := MaxStaleness(samples, excuse)
	if worst.Node != "hung" || worst.Age != 5*time.Second || n != 3 {
		t.Errorf("worst %+v of %d, want hung at 5s of 3 (its excused minute left out)", worst, n)
	}
	worst, n = MaxStaleness(samples, nil)
	if worst.Age != time.Minute || n != 4 {
		t.Errorf("worst %+v of %d, want the minute of 4 with no excuse", worst, n)
	}
}

func TestMissedChanges(t *testing.T) {
	flip := Flip{Node: "n", Down: at(10), Up: at(20)}
	settle := 5 * time.Second
	end := at(60)
	ev := func(s float64, down bool) StreamEvent { return StreamEvent{At: at(s), Node: "n", Down: down} }
	for _, tc := range []struct {
		name      string
		events    []StreamEvent
		flips     []Flip
		published func(Flip) bool
		end       time.Time
		want      []string // "stream/what"
	}{
		{"down then up", []StreamEvent{ev(1, false), ev(12, true), ev(22, false)}, []Flip{flip}, nil, end, nil},
		{"down seen late within settle", []StreamEvent{ev(24, true), ev(26, false)}, []Flip{flip}, nil, end, nil},
		{"down never seen", []StreamEvent{ev(1, false), ev(22, false)}, []Flip{flip}, nil, end, []string{"1/down"}},
		{"down only before the flip", []StreamEvent{ev(5, true), ev(22, false)}, []Flip{flip}, nil, end, []string{"1/down"}},
		{"down too late", []StreamEvent{ev(26, true), ev(30, false)}, []Flip{flip}, nil, end, []string{"1/down"}},
		{"never up again", []StreamEvent{ev(12, true)}, []Flip{flip}, nil, end, []string{"1/up again"}},
		{"another node's events do not count", []StreamEvent{{At: at(12), Node: "m", Down: true}, {At: at(22), Node: "m"}}, []Flip{flip}, nil, end, []string{"1/down"}},
		{"a flip too recent to judge", nil, []Flip{flip}, nil, at(24), nil},
		{"a flip no reader saw need not be delivered", nil, []Flip{flip}, func(Flip) bool { return false }, end, nil},
		{"a flip a reader saw must be", nil, []Flip{flip}, func(Flip) bool { return true }, end, []string{"1/down"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range MissedChanges(map[int][]StreamEvent{1: tc.events}, tc.flips, tc.published, settle, tc.end) {
				got = append(got, strings.Join([]string{string(rune('0' + m.Stream)), m.What}, "/"))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("missed %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPublished(t *testing.T) {
	flip := Flip{Node: "n", Down: at(10), Up: at(20)}
	for _, tc := range []struct {
		name  string
		reads []StreamEvent
		want  bool
	}{
		{"seen down during the flip", []StreamEvent{{At: at(15), Node: "n", Down: true}}, true},
		{"seen down within settle after", []StreamEvent{{At: at(24), Node: "n", Down: true}}, true},
		{"seen down too late", []StreamEvent{{At: at(26), Node: "n", Down: true}}, false},
		{"seen down before", []StreamEvent{{At: at(9), Node: "n", Down: true}}, false},
		{"seen up only", []StreamEvent{{At: at(15), Node: "n"}}, false},
		{"another node down", []StreamEvent{{At: at(15), Node: "m", Down: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Published(tc.reads, flip, 5*time.Second); got != tc.want {
				t.Errorf("published %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGrown(t *testing.T) {
	start := map[string]Usage{"a": {Goroutines: 100, HeapGoalBytes: 1000, RSSBytes: 5000}, "b": {Goroutines: 100, HeapGoalBytes: 1000, RSSBytes: 5000}}
	for _, tc := range []struct {
		name string
		end  map[string]Usage
		want []string
	}{
		{"same", start, nil},
		{"exactly 10% is within", map[string]Usage{"a": {110, 1100, 5500}, "b": {90, 900, 4000}}, nil},
		{"goroutines leak", map[string]Usage{"a": {111, 1000, 5000}, "b": {100, 1000, 5000}}, []string{"a/goroutines"}},
		{"the heap goal grows", map[string]Usage{"a": {100, 1000, 5000}, "b": {100, 1101, 5000}}, []string{"b/heap goal"}},
		{"goroutines and heap goal grow", map[string]Usage{"a": {200, 2000, 5000}, "b": {100, 1000, 5000}}, []string{"a/goroutines", "a/heap goal"}},
		{"resident memory is not held", map[string]Usage{"a": {100, 1000, 9000}, "b": {100, 1000, 5000}}, nil},
		{"a key with no reading at the start fails", map[string]Usage{"a": {100, 1000, 5000}, "c": {1, 1, 1}}, []string{"c/no reading at the start"}},
		{"a key of the start with none at the end is not judged", map[string]Usage{"a": {100, 1000, 5000}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, g := range Grown(start, tc.end, 0.10) {
				got = append(got, g.Replica+"/"+g.Figure)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("grown %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	var tb Table
	tb.Report("calls", "10")
	tb.Check("failed outside windows", "0", "0", true)
	tb.Check("went back | in time", "2", "0", false)
	md := tb.Markdown()
	for _, want := range []string{"| calls | 10 |  |  |", "| failed outside windows | 0 | 0 | ok |", `went back \| in time | 2 | 0 | FAIL |`} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	if f := tb.Failures(); len(f) != 1 || f[0].Value != "2" {
		t.Errorf("failures %v, want the one row", f)
	}
	if m := Settled([]Usage{{3, 10, 300}, {1, 30, 400}, {2, 20, 100}}); m != (Usage{2, 10, 100}) {
		t.Errorf("settled %v, want the median goroutines and the lowest heap goal and RSS", m)
	}
	if m := Settled([]Usage{{298, 10, 300}, {166, 30, 400}, {300, 20, 100}, {298, 20, 100}}); m.Goroutines != 298 {
		t.Errorf("settled goroutines %v, want the median 298", m.Goroutines)
	}
	if m := Settled(nil); m != (Usage{}) {
		t.Errorf("settled of nothing %v", m)
	}
}
