package cli_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/servertest"
	"github.com/llmdiag/llmdiag/server"
	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/memory"
)

// benchServer serves two nodes, b-node listed before z-node, behind
// limits when given.
func benchServer(t *testing.T, limits ...server.Limits) string {
	t.Helper()
	st := memory.New(memory.Options{}, "bench")
	now := time.Now()
	for _, id := range []string{"z-node", "b-node"} {
		rec := &store.Record{
			Node:    &llmdiagv1.Node{Id: id, Model: "m", Status: llmdiagv1.Status_STATUS_OK, Routable: true, LastSeen: timestamppb.New(now)},
			Metrics: &llmdiagv1.NodeMetrics{Node: id, Model: "m", Window: "5m", ObservedAt: timestamppb.New(now), Up: true},
		}
		if err := st.Put(context.Background(), rec, diagnose.Point{At: now}); err != nil {
			t.Fatal(err)
		}
	}
	o := servertest.Options{Store: st, Config: server.Config{StaleAfter: time.Hour}}
	for _, l := range limits {
		o.Limits = &l
	}
	return servertest.Start(t, o).URL
}

// benchRow is one parsed row of bench's table.
type benchRow struct {
	call  string
	conc  int
	ratio float64
}

// parseBench reads the table's rows: a name, a concurrency, three latencies
// of "N ms", calls a second and a ratio "N×".
func parseBench(t *testing.T, out string) []benchRow {
	t.Helper()
	var rows []benchRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 10 || f[0] == "CALL" {
			continue
		}
		conc, err1 := strconv.Atoi(f[1])
		ratio, err2 := strconv.ParseFloat(strings.TrimSuffix(f[9], "×"), 64)
		rate, err3 := strconv.ParseFloat(f[8], 64)
		if err1 != nil || err2 != nil || err3 != nil || f[3] != "ms" || f[5] != "ms" || f[7] != "ms" || rate <= 0 {
			t.Fatalf("row %q: not name, concurrency, 3 latencies in ms, calls/s, ratio", line)
		}
		rows = append(rows, benchRow{f[0], conc, ratio})
	}
	return rows
}

// bench prints one row per kind and concurrency, with a positive ratio to
// the health check (1.00 for itself), for the first listed node by default.
func TestBenchPrintsEveryRow(t *testing.T) {
	url := benchServer(t)
	tests := []struct {
		name  string
		args  []string
		conc  []int
		about string
		calls []string // each concurrency's rows; default the health check, GetNodeMetrics and DiagnoseNode
	}{
		{"defaults but small", []string{"--calls", "20", "--rounds", "2", "--warmup", "5"}, []int{1, 8}, "node b-node, DiagnoseNode in en, text", nil},
		{"chosen", []string{"--node", "z-node,b-node", "--concurrency", "2,3,1", "--calls", "9", "--rounds", "1", "--connections", "3", "--lang", "zh", "--format", "markdown", "--protocol", "connect"}, []int{2, 3, 1}, "over connect, 3 connection(s); node z-node,b-node, DiagnoseNode in zh, markdown", nil},
		{"read masks", []string{"--concurrency", "1,8", "--calls", "9", "--rounds", "2", "--read-mask", "routable,load_score,status,root_cause", "--metrics-read-mask", "queue,kv_pressure"}, []int{1, 8},
			"DiagnoseNode/masked: read_mask routable,load_score,status,root_cause", []string{"Health/Check", "GetNodeMetrics", "GetNodeMetrics/masked", "DiagnoseNode", "DiagnoseNode/masked"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := clitest.Run(t, nil, append([]string{"bench", "--addr", url}, tt.args...)...)
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, errOut)
			}
			if !strings.Contains(out, tt.about) {
				t.Errorf("header does not say %q:\n%s", tt.about, out)
			}
			rows := parseBench(t, out)
			calls := tt.calls
			if calls == nil {
				calls = []string{"Health/Check", "GetNodeMetrics", "DiagnoseNode"}
			}
			if len(rows) != len(calls)*len(tt.conc) {
				t.Fatalf("%d rows, want %d:\n%s", len(rows), len(calls)*len(tt.conc), out)
			}
			for i, r := range rows {
				wantCall, wantConc := calls[i%len(calls)], tt.conc[i/len(calls)]
				if r.call != wantCall || r.conc != wantConc || r.ratio <= 0 || (wantCall == "Health/Check" && r.ratio != 1) {
					t.Errorf("row %d = %+v, want %s at concurrency %d with a positive ratio (1 for the health check)", i, r, wantCall, wantConc)
				}
			}
		})
	}
}

// Bad flags are usage errors naming the flag; an unknown node is NotFound,
// said so before any load.
func TestBenchErrors(t *testing.T) {
	url := benchServer(t)
	tests := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--concurrency", "1,0"}, 2, "--concurrency"},
		{[]string{"--concurrency", "one"}, 2, "--concurrency"},
		{[]string{"--calls", "0"}, 2, "--calls 0"},
		{[]string{"--rounds", "-1"}, 2, "--rounds -1"},
		{[]string{"--connections", "0"}, 2, "--connections 0"},
		{[]string{"--lang", "fr"}, 2, `--lang "fr"`},
		{[]string{"--format", "json"}, 2, `--format "json"`},
		{[]string{"--duration", "0s"}, 2, "--duration"},
		{[]string{"--bogus"}, 2, "bogus"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"--node", "no-such-node"}, 1, `--node "no-such-node": the service does not know this node`},
		{[]string{"--read-mask", "routable,nope"}, 2, `--read-mask: read_mask: path "nope" is not a field of llmdiag.v1.Diagnosis`},
		{[]string{"--metrics-read-mask", "routable"}, 2, `--metrics-read-mask: read_mask: path "routable" is not a field of llmdiag.v1.NodeMetrics`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, _, err := clitest.Run(t, nil, append([]string{"bench", "--addr", url}, tt.args...)...)
			if cli.ExitCode(err) != tt.code || err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err %v (exit %d), want exit %d saying %q", err, cli.ExitCode(err), tt.code, tt.says)
			}
			if strings.Contains(out, "CALL") {
				t.Errorf("a table despite the error:\n%s", out)
			}
		})
	}
	for _, protocol := range []string{"grpc", "connect"} {
		_, _, err := clitest.Run(t, nil, "bench", "--addr", url, "--protocol", protocol, "--node", "no-such-node")
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("unknown node over %s: code %v, want NotFound", protocol, connect.CodeOf(err))
		}
		_, _, err = clitest.Run(t, nil, "bench", "--addr", url, "--protocol", protocol, "--read-mask", "nope")
		if want := `--read-mask: read_mask: path "nope" is not a field of llmdiag.v1.Diagnosis`; cli.ExitCode(err) != 2 || err.Error() != want {
			t.Errorf("unknown path over %s: %v (exit %d), want %q", protocol, err, cli.ExitCode(err), want)
		}
	}
}

// A server that rate-limits the bench's calls refuses the run, and bench
// says which flag of the server's to change, whatever the protocol.
func TestBenchRateLimited(t *testing.T) {
	url := benchServer(t, server.Limits{RateLimit: 1, RateBurst: 5})
	for _, protocol := range []string{"grpc", "connect"} {
		_, _, err := clitest.Run(t, nil, "bench", "--addr", url, "--protocol", protocol, "--calls", "50", "--rounds", "1", "--warmup", "0")
		if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "--rate-limit") {
			t.Errorf("over %s: err %v, want ResourceExhausted naming --rate-limit", protocol, err)
		}
	}
}
