package scrape_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/internal/testing/expofarm"
	"github.com/llmdiag/llmdiag/source/scrape"
)

// TestExpofarmChild is the exposition farm of BenchmarkFleetFullParse, in
// the child process expofarm.StartChild runs; elsewhere it skips.
func TestExpofarmChild(t *testing.T) { expofarm.ServeChild(t) }

// fleetInterval and fleetNodes are the fast lane's target: 1,000
// nodes read every 250 ms.
const (
	fleetNodes    = 1000
	fleetInterval = 250 * time.Millisecond
)

// BenchmarkFleetFullParse is the full-parse baseline of the fast lane:
// 1,000 vLLM endpoints of ~172 KB (internal/testing/expofarm, the simulator's seed
// DeepSeek node, 8 engine cores, its routing gauges stepping), each read
// every 250 ms on its own phase with 25 ms of jitter, a node's tick skipped
// while its previous read runs (expofarm.Drive), for a 5 s span after 2 s
// of warm-up. Each read is today's path:
//
//   - reader=scraper: Scraper.Refresh of the node (one single-target
//     Scraper per node, all on one client with Go's default transport, as
//     serve builds it): fetch, engine.ParseMemo (each Scraper's memo
//     learns its one node), engine.Extract, the ring, the 5m window's
//     indicators. What the refresh loop does after (diagnose, store,
//     publish) is not counted.
//   - reader=parse: the same GET, engine.ParseMemo through one memo for
//     the fleet (as serve's one Scraper) and engine.Extract only: the part
//     the fast reader replaces.
//
// The farm runs in a child process: cores (CPU seconds per wall second,
// getrusage of this process) is llmdiag's own. On 2 cores the full path
// cannot keep up, so ticks are skipped: demand-cores (cpu-us/read × the
// ticks due per second) is what reading every tick would take, and
// cpu-us/read the cost per node read. farm-cores, farm-cpu-us/req and
// conns/req are the child's CPU, per request, and the connections it
// accepted per request (Go's default transport keeps 100 idle connections
// in all: at 1,000 nodes most reads dial anew).
//
// reader=fast is the fast lane's read (refresh/fast.go, fetch): the same
// GET on a transport of its own with an idle connection per node, then
// engine.ReadRouting, which stops after the routing families, and a
// drain of the rest of the body (up to 1 MiB) so the connection is
// reused. It keeps up (read-% near 100), so its cores are what it costs,
// to compare with the full path's demand-cores (whose cores are capped by
// the machine).
func BenchmarkFleetFullParse(b *testing.B) {
	for _, name := range []string{"scraper", "parse", "fast"} {
		b.Run("nodes=1000/reader="+name, func(b *testing.B) {
			child := expofarm.StartChild(b, "TestExpofarmChild", expofarm.Spec{Nodes: fleetNodes})
			tr := http.DefaultTransport.(*http.Transport).Clone()
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			var rd expofarm.Reader
			switch name {
			case "scraper":
				rd = scraperReader(child.URLs, client)
			case "parse":
				rd = parseReader(client)
			case "fast":
				// As the fast lane's own transport: an idle connection to
				// every node (they share one host here) and every read in
				// flight.
				tr.MaxIdleConns, tr.MaxIdleConnsPerHost = fleetNodes+64, fleetNodes+64
				rd = fastReader(client)
			}
			for b.Loop() {
				st0, err := child.Stats(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				res, err := expofarm.Drive(b.Context(), expofarm.DriveConfig{
					URLs: child.URLs, Interval: fleetInterval, Warmup: 2 * time.Second, Span: 5 * time.Second,
				}, rd)
				if err != nil {
					b.Fatal(err)
				}
				st1, err := child.Stats(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if res.Reads == 0 || res.Failed > res.Reads/10 {
					b.Fatalf("%d reads, %d failed (first: %s)", res.Reads, res.Failed, res.FirstError)
				}
				for unit, v := range res.Metrics() {
					b.ReportMetric(v, unit)
				}
				// The child's figures cover the warm-up too.
				b.ReportMetric(float64(st1.CPU-st0.CPU)/float64(res.Wall+2*time.Second), "farm-cores")
				if reqs := st1.Requests - st0.Requests; reqs > 0 {
					b.ReportMetric(float64(st1.Connections-st0.Connections)/float64(reqs), "conns/req")
					b.ReportMetric(float64(st1.CPU-st0.CPU)/float64(reqs)/1e3, "farm-cpu-us/req")
				}
			}
		})
	}
}

// scraperReader reads a node with a Scraper of its own, as Refresh does
// every interval.
func scraperReader(urls []string, client *http.Client) expofarm.Reader {
	scrapers := make(map[string]*scrape.Scraper, len(urls))
	for i, u := range urls {
		node := fleet.Node{ID: fmt.Sprintf("node-%04d", i), URL: u, Engine: "vllm"}
		scrapers[u] = scrape.New([]fleet.Node{node}, client, discard(), time.Now, scrape.Options{Timeout: 4 * fleetInterval})
	}
	return expofarm.ReaderFunc(func(ctx context.Context, u string) error {
		obs, err := scrapers[u].Refresh(ctx, "5m")
		if err != nil {
			return err
		}
		if m := obs[0].Metrics; !m.GetUp() || len(m.GetErrors()) > 0 {
			return fmt.Errorf("%s: up %v, errors %q", u, m.GetUp(), m.GetErrors())
		}
		return nil
	})
}

// parseReader reads a node as Scraper's fetch and scrape do (through one
// memo for the fleet), without the ring and the window.
func parseReader(client *http.Client) expofarm.Reader {
	memo := engine.NewSeriesMemo()
	return exposition(client, func(body io.Reader) error {
		exp, err := engine.ParseMemo(body, engine.Limits{}, memo)
		if err != nil {
			return err
		}
		smp := engine.Extract(llmdiagv1.Engine_ENGINE_VLLM, exp.Families, time.Now())
		if smp.Queue == nil || smp.Running == nil || smp.KVUsage == nil {
			return errors.New("no routing gauges")
		}
		return nil
	})
}

// fastReader reads a node as the fast lane does (refresh/fast.go, fetch:
// one memo for the fleet).
func fastReader(client *http.Client) expofarm.Reader {
	memo := engine.NewSeriesMemo()
	return exposition(client, func(body io.Reader) error {
		lr := &io.LimitedReader{R: body, N: 16<<20 + 1}
		r, err := engine.ReadRouting(lr, llmdiagv1.Engine_ENGINE_VLLM, engine.Limits{}, time.Now(), memo)
		if err != nil {
			return err
		}
		if r.Stopped {
			_, _ = io.Copy(io.Discard, io.LimitReader(lr, 1<<20))
		}
		if r.Queue == nil || r.Running == nil || r.KVUsage == nil {
			return errors.New("no routing gauges")
		}
		return nil
	})
}

// exposition is a Reader that GETs a node's exposition as Scraper's fetch
// does (Accept header, 200 and text/plain checks) and hands the body to
// read.
func exposition(client *http.Client, read func(body io.Reader) error) expofarm.Reader {
	return expofarm.ReaderFunc(func(ctx context.Context, u string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			return fmt.Errorf("HTTP %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return read(resp.Body)
	})
}
