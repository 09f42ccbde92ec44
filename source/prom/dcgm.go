package prom

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/llmdiag/llmdiag/engine"
	"github.com/llmdiag/llmdiag/source"
)

// dcgmQuery is the one instant query that reads every DCGM series the
// nodes' GPUs are read from (engine.DCGMFamilies, and the exporter's XID
// counter engine.DCGMXIDTotalFamily), with the labels that
// name a GPU and those that join it to a node (Config.DCGMJoin).
func dcgmQuery(cfg Config) query {
	names := append(engine.DCGMFamilyNames(), engine.DCGMXIDTotalFamily)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	want := uniq(append([]string{"__name__", engine.DCGMGPULabel, engine.DCGMUUIDLabel, engine.DCGMModelLabel,
		engine.DCGMInstanceLabel, engine.DCGMProfileLabel, engine.DCGMPodLabel, engine.DCGMNamespaceLabel, engine.DCGMXIDLabel,
		exportedPod, exportedNamespace}, cfg.DCGMJoin...)...)
	return query{shape: shapeDCGM, want: want, expr: fmt.Sprintf(`{__name__=~"%s"}`, strings.Join(quoted, "|"))}
}

// A Prometheus that scrapes the exporter without honor_labels renames
// the exporter's pod and namespace labels (the GPU's pod) to these, its
// own being the exporter's pod.
const (
	exportedPod       = "exported_" + engine.DCGMPodLabel
	exportedNamespace = "exported_" + engine.DCGMNamespaceLabel
)

// joinGPU reads the DCGM series in Prometheus at t and gives each node of
// obs the GPUs joined to it (NodeMetrics.gpu): Config.DCGMJoin's labels
// are tried in order, and a series belongs to the node whose id, or the
// host of whose id (without the port), equals the label's value or that
// value's host. A value that names several nodes (two engines on one
// host) joins none of them, as it cannot tell whose GPUs they are,
// unless Config.DCGMPods says which of them the series' pod is (else,
// which one has no pod): a later label (pod) may. A node with a pod in
// Config.DCGMPods joins only series of its pod (exported_pod and exported_namespace when set, else
// pod and namespace). Series of MIG instances join as any other and are
// folded into their physical GPU. The figures are
// engine.GPUFromSeries's, as for an exporter scraped directly. A failed
// query leaves every node without GPU figures, with a warning.
func (s *Source) joinGPU(ctx context.Context, obs []source.Observation, t time.Time) {
	q := dcgmQuery(s.cfg)
	w := s.workers.Get().(*worker)
	defer s.workers.Put(w)
	warnings, err := s.query(ctx, w, q, t)
	if err != nil {
		msg := fmt.Sprintf("dcgm: %v: no GPU figures", err)
		for i := range obs {
			if obs[i].Metrics != nil {
				obs[i].Metrics.Warnings = append(obs[i].Metrics.Warnings, msg)
			}
		}
		return
	}
	// Every key a node answers to, and how many nodes answer to it.
	owners := map[string][]int{}
	for i, o := range obs {
		keys := uniq(o.Node.ID, hostOf(o.Node.ID))
		for _, k := range keys {
			owners[k] = append(owners[k], i)
		}
	}
	series := make([][]engine.DCGMSeries, len(obs))
	at := map[string]int{}
	for i, name := range q.want {
		at[name] = i
	}
	// Of the nodes a key names, those whose pod the series is; when
	// none is, those without a pod.
	var cand, open []int
	candidates := func(o []int, sr engine.DCGMSeries) []int {
		cand, open = cand[:0], open[:0]
		for _, n := range o {
			switch p := s.cfg.DCGMPods[obs[n].Node.ID]; {
			case p.Pod == "":
				open = append(open, n)
			case p.Keeps(sr):
				cand = append(cand, n)
			}
		}
		if len(cand) == 0 {
			return open
		}
		return cand
	}
	for i := range w.vec.len() {
		ls := w.vec.labels(i)
		sr := engine.DCGMSeries{
			Family: ls[at["__name__"]], GPU: ls[at[engine.DCGMGPULabel]], UUID: ls[at[engine.DCGMUUIDLabel]],
			Model: ls[at[engine.DCGMModelLabel]], Instance: ls[at[engine.DCGMInstanceLabel]], Profile: ls[at[engine.DCGMProfileLabel]],
			Pod: cmp.Or(ls[at[exportedPod]], ls[at[engine.DCGMPodLabel]]), Namespace: cmp.Or(ls[at[exportedNamespace]], ls[at[engine.DCGMNamespaceLabel]]),
			XID: ls[at[engine.DCGMXIDLabel]], Value: w.vec.vs[i],
		}
		node := -1
	join:
		for _, j := range s.cfg.DCGMJoin {
			v := ls[at[j]]
			if v == "" {
				continue
			}
			for _, k := range uniq(v, hostOf(v)) {
				if o := candidates(owners[k], sr); len(o) == 1 {
					node = o[0]
					break join
				}
			}
		}
		if node < 0 {
			continue
		}
		series[node] = append(series[node], sr)
	}
	for i := range obs {
		m := obs[i].Metrics
		if m == nil || len(series[i]) == 0 {
			continue
		}
		g, ws := engine.GPUFromSeries(series[i])
		m.Gpu = g
		for _, x := range append([]string(warnings), ws...) {
			m.Warnings = append(m.Warnings, "dcgm: "+x)
		}
		if obs[i].Sample != nil {
			obs[i].Sample.GPU = g
		}
	}
}

// hostOf is a host:port's host; other values as they are.
func hostOf(v string) string {
	if h, _, err := net.SplitHostPort(v); err == nil {
		return h
	}
	return v
}
