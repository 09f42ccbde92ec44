package prom

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/source"
)

// dcgmFamilies are the metric families of a DCGM exposition file.
func dcgmFamilies(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exp, err := engine.Parse(f, engine.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return exp.Families
}

// dcgmSamples are the series of a DCGM exposition file as Prometheus
// returns them, with extra labels (instance, …) added to each.
func dcgmSamples(t *testing.T, path string, extra ...string) []fakeSample {
	t.Helper()
	families := dcgmFamilies(t, path)
	var out []fakeSample
	for _, name := range engine.DCGMFamilyNames() {
		for _, m := range families[name].GetMetric() {
			ls := []string{"__name__", name}
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName(), l.GetValue())
			}
			out = append(out, fakeSample{append(ls, extra...), strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64)})
		}
	}
	return out
}

// TestDCGMJoin: DCGM series in Prometheus join the node they name by the
// configured labels, and give the figures the exporter scraped directly
// gives (engine.ExtractGPU of the same exposition).
func TestDCGMJoin(t *testing.T) {
	const fixture = "../../engine/testdata/dcgm-h100-decode.prom"
	direct, _ := engine.ExtractGPU(dcgmFamilies(t, fixture))

	for _, tc := range []struct {
		name    string
		join    []string
		extra   []string // labels added to the fixture's series
		want    string   // the node that gets the GPUs; "" none
		failing bool     // the DCGM query fails
	}{
		// The fixture's Hostname is gpu-node-07: not a node's host.
		{"by instance host", []string{"instance"}, []string{"instance", "vllm-a:9400"}, "vllm-a:8000", false},
		{"pod, Hostname, instance: none names a node", []string{"pod", "Hostname", "instance"}, []string{"instance", "10.0.0.9:9400"}, "", false},
		{"by the second label", []string{"Hostname", "exported_instance"}, []string{"exported_instance", "vllm-b:8000"}, "vllm-b:8000", false},
		{"no label names a node", []string{"instance"}, []string{"instance", "elsewhere:9400"}, "", false},
		{"query fails", []string{"instance"}, nil, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{DCGMJoin: tc.join}
			cfg.defaults()
			bodies := fixtureBodies(t, "testdata/fleet", plan(t, defaultBuilder("5m"), engine.Engines()...))
			q := dcgmQuery(cfg)
			if tc.failing {
				bodies[q.expr] = canned{Status: http.StatusUnprocessableEntity, Body: []byte(`{"status":"error","errorType":"execution","error":"query timed out"}`)}
			} else {
				bodies[q.expr] = canned{Status: http.StatusOK, Body: vectorBody(testNow, dcgmSamples(t, fixture, tc.extra...))}
			}
			fake := newFakeProm(t, bodies)
			src := newTestSource(t, fake.URL, func(c *Config) { c.DCGMJoin = tc.join })
			obs, err := src.Refresh(context.Background(), "5m")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range obs {
				g := o.Metrics.GetGpu()
				if o.Node.ID != tc.want {
					if g != nil {
						t.Errorf("%s got GPUs %v", o.Node.ID, g)
					}
					continue
				}
				if !proto.Equal(g, direct) {
					t.Errorf("%s: through Prometheus\n%s\ndirect\n%s", o.Node.ID, prototext.Format(g), prototext.Format(direct))
				}
			}
			if tc.failing {
				for _, o := range obs {
					if !strings.Contains(strings.Join(o.Metrics.GetWarnings(), "\n"), "dcgm: query") {
						t.Errorf("%s: warnings %q lack the failed DCGM query", o.Node.ID, o.Metrics.GetWarnings())
					}
				}
			}
		})
	}
}

// Without DCGMJoin no DCGM query is sent.
func TestDCGMOff(t *testing.T) {
	fake := fleetFake(t, defaultBuilder("5m"))
	src := newTestSource(t, fake.URL, nil)
	obs, err := src.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range fake.Seen() {
		if strings.Contains(q.Expr, "DCGM_") {
			t.Errorf("DCGM query sent: %s", q.Expr)
		}
	}
	for _, o := range obs {
		if o.Metrics.GetGpu() != nil {
			t.Errorf("%s: GPUs without DCGM join", o.Node.ID)
		}
	}
}

// TestDCGMJoinSentinels: DCGM's "not supported" values in Prometheus read
// as absent, as they do scraped directly: no XID 4294967295, no 9.2e18 °C,
// and a warning on the node per field.
func TestDCGMJoinSentinels(t *testing.T) {
	const fixture = "../../engine/testdata/dcgm-l40s-not-supported.prom"
	direct, _ := engine.ExtractGPU(dcgmFamilies(t, fixture))

	o := refreshJoined(t, fixture)
	g := o.Metrics.GetGpu()
	if !proto.Equal(g, direct) {
		t.Errorf("through Prometheus\n%s\ndirect\n%s", prototext.Format(g), prototext.Format(direct))
	}
	if g.GetXidRead() || len(g.GetXidErrors()) > 0 || g.TemperatureCelsiusMax != nil || g.DramActive != nil {
		t.Errorf("a sentinel became a figure: %s", prototext.Format(g))
	}
	ws := strings.Join(o.Metrics.GetWarnings(), "\n")
	for _, fam := range []string{"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_PROF_DRAM_ACTIVE"} {
		if n := strings.Count(ws, "dcgm: DCGM family "+fam+" reports DCGM_"); n != 1 {
			t.Errorf("%d warnings name %s's sentinel, want 1:\n%s", n, fam, ws)
		}
	}
}

// refreshJoined refreshes a source whose Prometheus serves the fleet
// fixture and fixture's DCGM series on instance vllm-a:9400, joined to
// nodes by instance, and returns node vllm-a:8000's observation.
func refreshJoined(t *testing.T, fixture string) source.Observation {
	t.Helper()
	join := []string{"instance"}
	cfg := Config{DCGMJoin: join}
	cfg.defaults()
	bodies := fixtureBodies(t, "testdata/fleet", plan(t, defaultBuilder("5m"), engine.Engines()...))
	bodies[dcgmQuery(cfg).expr] = canned{Status: http.StatusOK, Body: vectorBody(testNow, dcgmSamples(t, fixture, "instance", "vllm-a:9400"))}
	fake := newFakeProm(t, bodies)
	src := newTestSource(t, fake.URL, func(c *Config) { c.DCGMJoin = join })
	obs, err := src.Refresh(context.Background(), "5m")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(obs, func(o source.Observation) bool { return o.Node.ID == "vllm-a:8000" })
	if i < 0 {
		t.Fatal("no node vllm-a:8000")
	}
	return obs[i]
}
