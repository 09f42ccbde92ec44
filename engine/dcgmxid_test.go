package engine

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestXIDCounter: DCGM_EXP_XID_ERRORS_TOTAL's series add to each GPU's
// XIDs, beside its last XID, with their counts; an XID only the counter
// names is not the GPU's last; series with a bad xid label or value are
// left out with a warning; a MIG instance's counts fold into its GPU.
func TestXIDCounter(t *testing.T) {
	const head = "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n" +
		"DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-a\"} 79\n" +
		"DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"GPU-b\"} 0\n" +
		"# TYPE DCGM_EXP_XID_ERRORS_TOTAL counter\n"
	type xid struct {
		gpu   string
		xid   uint32
		last  bool
		count int64 // -1: absent
	}
	for _, tc := range []struct {
		name     string
		counter  string
		want     []xid
		warnings []string
	}{
		{"last only", "", []xid{{"0", 79, true, -1}}, nil},
		{"counted", "DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"0\",UUID=\"GPU-a\",xid=\"79\"} 3\n" +
			"DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"0\",UUID=\"GPU-a\",xid=\"13\"} 2\n" +
			"DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"1\",UUID=\"GPU-b\",xid=\"31\"} 1\n",
			[]xid{{"0", 13, false, 2}, {"0", 79, true, 3}, {"1", 31, false, 1}}, nil},
		{"bad label and value", "DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"1\",UUID=\"GPU-b\",xid=\"abc\"} 1\n" +
			"DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"1\",UUID=\"GPU-b\",xid=\"0\"} 1\n" +
			"DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"1\",UUID=\"GPU-b\",xid=\"31\"} -1\n",
			[]xid{{"0", 79, true, -1}}, []string{`xid label "abc"`, `xid label "0"`, "not a count"}},
		{"MIG instances", "DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"1\",UUID=\"GPU-b\",GPU_I_ID=\"1\",xid=\"31\"} 2\n" +
			"DCGM_EXP_XID_ERRORS_TOTAL{gpu=\"1\",UUID=\"GPU-b\",GPU_I_ID=\"2\",xid=\"31\"} 4\n",
			[]xid{{"0", 79, true, -1}, {"1", 31, false, 4}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := Parse(strings.NewReader(head+tc.counter), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			g, warnings := ExtractGPU(exp.Families)
			var got []xid
			for _, x := range g.GetXidErrors() {
				c := int64(-1)
				if x.Count != nil {
					c = int64(x.GetCount())
				}
				got = append(got, xid{x.GetGpu(), x.GetXid(), x.GetLast(), c})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("XIDs %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("XID %d: %v, want %v", i, got[i], tc.want[i])
				}
			}
			text := strings.Join(warnings, "\n")
			for _, w := range tc.warnings {
				if !strings.Contains(text, w) {
					t.Errorf("warnings %q lack %q", warnings, w)
				}
			}
			if len(tc.warnings) == 0 && len(warnings) > 0 {
				t.Errorf("warnings %q, want none", warnings)
			}
		})
	}
}

// TestStampXIDs: an XID occurs when it is new since the previous read (the
// last XID changed, a counter appeared) or its count rose; otherwise it
// keeps the previous read's stamps; with no previous read of the field,
// it is at its first read.
func TestStampXIDs(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	x := func(gpu string, code uint32, last bool, count int64) *llmdiagv1.GPUXid {
		e := &llmdiagv1.GPUXid{Gpu: gpu, Xid: code, Last: last}
		if count >= 0 {
			e.Count = new(uint64(count))
		}
		return e
	}
	stamped := func(e *llmdiagv1.GPUXid, at time.Time, first bool) *llmdiagv1.GPUXid {
		e.OccurredAt, e.AtFirstRead = timestamppb.New(at), first
		return e
	}
	read := func(xs ...*llmdiagv1.GPUXid) *llmdiagv1.GPUMetrics {
		return &llmdiagv1.GPUMetrics{XidRead: true, XidErrors: xs}
	}
	for _, tc := range []struct {
		name      string
		prev, cur *llmdiagv1.GPUMetrics
		at        time.Time // want occurred_at of cur's XID
		first     bool
	}{
		{"no previous read", nil, read(x("0", 79, true, -1)), t1, true},
		{"previous read without the XID field", &llmdiagv1.GPUMetrics{}, read(x("0", 79, true, -1)), t1, true},
		{"the last XID changed from 0", read(), read(x("0", 79, true, -1)), t1, false},
		{"the last XID changed from 13", read(stamped(x("0", 13, true, -1), t0, false)), read(x("0", 79, true, -1)), t1, false},
		{"unchanged", read(stamped(x("0", 79, true, -1), t0, false)), read(x("0", 79, true, -1)), t0, false},
		{"unchanged since the first read", read(stamped(x("0", 79, true, -1), t0, true)), read(x("0", 79, true, -1)), t0, true},
		{"counted again", read(stamped(x("0", 79, true, 1), t0, true)), read(x("0", 79, true, 2)), t1, false},
		{"the exporter restarted", read(stamped(x("0", 79, true, 5), t0, false)), read(x("0", 79, true, 1)), t0, false},
		{"a counter appeared", read(stamped(x("0", 79, true, -1), t0, false)), read(x("0", 79, true, 1)), t0, false},
		{"an earlier XID became the last again", read(stamped(x("0", 13, false, 1), t0, false)), read(x("0", 13, true, 1)), t1, false},
		{"another GPU's", read(stamped(x("1", 79, true, -1), t0, false)), read(x("0", 79, true, -1)), t1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			StampXIDs(tc.prev, tc.cur, t1)
			got := tc.cur.GetXidErrors()[0]
			if !got.GetOccurredAt().AsTime().Equal(tc.at) || got.GetAtFirstRead() != tc.first {
				t.Errorf("occurred %v (first read %v), want %v (%v)", got.GetOccurredAt().AsTime(), got.GetAtFirstRead(), tc.at, tc.first)
			}
		})
	}
}
