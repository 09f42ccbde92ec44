package mcpserver

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// The structured content of the tools. Enums are their names without the
// prefix (CRIT, DECODE_BOUND, vllm); durations are seconds; a figure the
// service does not know is absent (null), never 0, and so are NaN and
// infinite values, which JSON cannot carry.

// NodeOut is one node of a listing.
type NodeOut struct {
	ID               string            `json:"id"`
	Model            string            `json:"model"`
	Engine           string            `json:"engine"`
	Status           string            `json:"status" jsonschema:"OK, WARN, CRIT, UNKNOWN or DOWN"`
	RootCause        string            `json:"root_cause"`
	Routable         bool              `json:"routable" jsonschema:"whether a router may send it traffic"`
	LoadScore        float64           `json:"load_score" jsonschema:"highest pressure: 0 idle, 1 at a saturation point"`
	StalenessSeconds float64           `json:"staleness_seconds" jsonschema:"age of the data its status rests on"`
	Labels           map[string]string `json:"labels,omitempty"`
	Role             string            `json:"role,omitempty"`
}

// NodesOut is a listing.
type NodesOut struct {
	Nodes     []NodeOut `json:"nodes"`
	Total     int       `json:"total" jsonschema:"nodes that matched, listed or not"`
	Truncated bool      `json:"truncated" jsonschema:"whether more nodes matched than are listed (raise limit)"`
	Degraded  string    `json:"degraded,omitempty" jsonschema:"set when the answer comes from a replica's copy: why"`
}

// FindingOut is one row of a diagnosis.
type FindingOut struct {
	Indicator  string `json:"indicator"`
	Name       string `json:"name"`
	Value      string `json:"value,omitempty"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
}

// DiagnosisOut is a verdict.
type DiagnosisOut struct {
	Node             string       `json:"node"`
	Model            string       `json:"model"`
	Engine           string       `json:"engine"`
	Window           string       `json:"window"`
	Status           string       `json:"status"`
	RootCause        string       `json:"root_cause" jsonschema:"e.g. DECODE_BOUND; explain_cause gives its runbook"`
	Summary          string       `json:"summary"`
	Evidence         []string     `json:"evidence"`
	RuledOut         []string     `json:"ruled_out"`
	Recommendations  []string     `json:"recommendations"`
	Findings         []FindingOut `json:"findings"`
	Routable         bool         `json:"routable"`
	LoadScore        float64      `json:"load_score"`
	Confidence       float64      `json:"confidence" jsonschema:"0..1: how well the evidence supports the root cause"`
	Stale            bool         `json:"stale"`
	StalenessSeconds float64      `json:"staleness_seconds"`
	Language         string       `json:"language"`
	Runbook          string       `json:"runbook,omitempty" jsonschema:"resource URI of the root cause's runbook"`
	Degraded         string       `json:"degraded,omitempty"`
}

// PercentileOut is one quantile with its histogram bucket.
type PercentileOut struct {
	Quantile   float64  `json:"quantile"`
	Value      *float64 `json:"value" jsonschema:"seconds; null when the window has no observations"`
	LowerBound *float64 `json:"lower_bound"`
	UpperBound *float64 `json:"upper_bound" jsonschema:"null when +Inf (the last bucket)"`
}

// DistributionOut is one latency histogram over the window.
type DistributionOut struct {
	Count       float64         `json:"count"`
	Mean        *float64        `json:"mean,omitempty"`
	Percentiles []PercentileOut `json:"percentiles"`
}

// MetricsOut is one node's indicators.
type MetricsOut struct {
	Node             string                     `json:"node"`
	Model            string                     `json:"model"`
	Engine           string                     `json:"engine"`
	Window           string                     `json:"window"`
	Up               bool                       `json:"up"`
	Stale            bool                       `json:"stale"`
	StalenessSeconds float64                    `json:"staleness_seconds"`
	CoveredSeconds   *float64                   `json:"covered_seconds,omitempty" jsonschema:"span of data the window was computed from, when shorter than asked"`
	Latencies        map[string]DistributionOut `json:"latencies" jsonschema:"by name: ttft, e2e, inter_token, time_per_output_token, queue_time (absent: not exposed)"`
	Gauges           map[string]float64         `json:"gauges" jsonschema:"queue, running, queue_running_ratio, kv_pressure (0..1), token rates per second, decode tokens per second per request, preemptions and requests per second (absent: not exposed)"`
	Errors           []string                   `json:"errors,omitempty"`
	Degraded         string                     `json:"degraded,omitempty"`
}

// CompareValueOut is one subject's value at one quantile.
type CompareValueOut struct {
	PercentileOut
	Rank             uint32  `json:"rank" jsonschema:"1 = fastest; 0 = no value"`
	RatioToMedian    float64 `json:"ratio_to_median"`
	WithinResolution bool    `json:"within_resolution" jsonschema:"same bucket as the median subject: the difference is not measured"`
}

// CompareRowOut is one subject.
type CompareRowOut struct {
	Subject         string            `json:"subject"`
	Nodes           []string          `json:"nodes"`
	Count           float64           `json:"count"`
	Values          []CompareValueOut `json:"values"`
	TailRatio       float64           `json:"tail_ratio"`
	Outlier         bool              `json:"outlier"`
	Note            string            `json:"note,omitempty"`
	OffsetSeconds   float64           `json:"offset_seconds,omitempty" jsonschema:"for a baseline row: how long before"`
	RatioToBaseline float64           `json:"ratio_to_baseline,omitempty"`
}

// CompareOut is a comparison.
type CompareOut struct {
	Metric    string          `json:"metric"`
	Window    string          `json:"window"`
	Quantiles []float64       `json:"quantiles"`
	Rows      []CompareRowOut `json:"rows"`
	Degraded  string          `json:"degraded,omitempty"`
}

// ExplainOut is a runbook.
type ExplainOut struct {
	Cause    string `json:"cause"`
	Slug     string `json:"slug"`
	Title    string `json:"title"`
	Language string `json:"language"`
	URI      string `json:"uri"`
	Markdown string `json:"markdown"`
}

func word(s, prefix string) string { return strings.TrimPrefix(s, prefix) }

func seconds(d *durationpb.Duration) float64 {
	if d == nil {
		return 0
	}
	return math.Round(d.AsDuration().Seconds()*1000) / 1000
}

// finite is v, or nil when JSON cannot carry it.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func langWord(l llmdiagv1.Language) string {
	if l == llmdiagv1.Language_LANGUAGE_ZH {
		return "zh"
	}
	return "en"
}

// nodesMask is the read mask of the node tools' ListNodes calls: the
// fields nodesOut, report.Unhealthy and the label filter read (not the
// profile, URL or last-seen time).
func nodesMask() *fieldmaskpb.FieldMask {
	return &fieldmaskpb.FieldMask{Paths: []string{"id", "model", "engine", "status", "root_cause", "routable", "load_score", "staleness", "labels", "role"}}
}

func nodesOut(nodes []*llmdiagv1.Node, limit int, degraded string) NodesOut {
	out := NodesOut{Nodes: []NodeOut{}, Total: len(nodes), Truncated: len(nodes) > limit, Degraded: degraded}
	for _, n := range nodes[:min(limit, len(nodes))] {
		o := NodeOut{ID: n.GetId(), Model: n.GetModel(), Engine: fleet.EngineName(n.GetEngine()),
			Status: word(n.GetStatus().String(), "STATUS_"), RootCause: word(n.GetRootCause().String(), "CAUSE_"),
			Routable: n.GetRoutable(), LoadScore: n.GetLoadScore(), StalenessSeconds: seconds(n.GetStaleness()), Labels: n.GetLabels()}
		if r := n.GetRole(); r != llmdiagv1.Role_ROLE_UNSPECIFIED && r != llmdiagv1.Role_ROLE_BOTH {
			o.Role = strings.ToLower(word(r.String(), "ROLE_"))
		}
		out.Nodes = append(out.Nodes, o)
	}
	return out
}

func diagnosisOut(r *llmdiagv1.DiagnoseNodeResponse, runbook string) DiagnosisOut {
	d := r.GetDiagnosis()
	out := DiagnosisOut{Node: d.GetNode(), Model: d.GetModel(), Engine: fleet.EngineName(d.GetEngine()), Window: d.GetWindow(),
		Status: word(d.GetStatus().String(), "STATUS_"), RootCause: word(d.GetRootCause().String(), "CAUSE_"), Summary: d.GetSummary(),
		Evidence: nonNil(d.GetEvidence()), RuledOut: nonNil(d.GetRuledOut()), Recommendations: nonNil(d.GetRecommendations()),
		Findings: []FindingOut{}, Routable: d.GetRoutable(), LoadScore: d.GetLoadScore(), Confidence: d.GetConfidence(),
		Stale: d.GetStale(), StalenessSeconds: seconds(d.GetStaleness()), Language: langWord(d.GetLanguage()), Runbook: runbook,
		Degraded: r.GetDegraded().GetReason()}
	for _, f := range d.GetFindings() {
		out.Findings = append(out.Findings, FindingOut{Indicator: word(f.GetIndicator().String(), "INDICATOR_"), Name: f.GetName(),
			Value: f.GetValue(), Status: word(f.GetStatus().String(), "STATUS_"), Conclusion: f.GetConclusion()})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func percentileOut(p *llmdiagv1.Percentile) PercentileOut {
	return PercentileOut{Quantile: p.GetQuantile(), Value: finite(p.GetValue()), LowerBound: finite(p.GetLowerBound()), UpperBound: finite(p.GetUpperBound())}
}

// metricsMask is get_node_metrics' read mask: the fields metricsOut
// reads (not the histograms' buckets, GPU, LoRA or KV-transfer figures).
func metricsMask() *fieldmaskpb.FieldMask {
	paths := []string{"node", "model", "engine", "window", "up", "stale", "staleness", "covered", "errors"}
	for _, l := range latencies(&llmdiagv1.NodeMetrics{}) {
		paths = append(paths, l.name+".percentiles", l.name+".mean", l.name+".count")
	}
	for _, g := range gauges(&llmdiagv1.NodeMetrics{}) {
		paths = append(paths, g.name)
	}
	return &fieldmaskpb.FieldMask{Paths: paths}
}

func metricsOut(r *llmdiagv1.GetNodeMetricsResponse) MetricsOut {
	m := r.GetMetrics()
	out := MetricsOut{Node: m.GetNode(), Model: m.GetModel(), Engine: fleet.EngineName(m.GetEngine()), Window: m.GetWindow(),
		Up: m.GetUp(), Stale: m.GetStale(), StalenessSeconds: seconds(m.GetStaleness()), Latencies: map[string]DistributionOut{},
		Gauges: map[string]float64{}, Errors: m.GetErrors(), Degraded: r.GetDegraded().GetReason()}
	if c := m.GetCovered(); c != nil {
		out.CoveredSeconds = finite(seconds(c))
	}
	for _, l := range latencies(m) {
		if l.d == nil {
			continue
		}
		d := DistributionOut{Count: l.d.GetCount(), Percentiles: []PercentileOut{}}
		if l.d.Mean != nil {
			d.Mean = finite(l.d.GetMean())
		}
		for _, p := range l.d.GetPercentiles() {
			d.Percentiles = append(d.Percentiles, percentileOut(p))
		}
		out.Latencies[l.name] = d
	}
	for _, g := range gauges(m) {
		if g.v != nil && finite(*g.v) != nil {
			out.Gauges[g.name] = *g.v
		}
	}
	return out
}

type namedDist struct {
	name string
	d    *llmdiagv1.Distribution
}

func latencies(m *llmdiagv1.NodeMetrics) []namedDist {
	return []namedDist{{"ttft", m.GetTtft()}, {"e2e", m.GetE2E()}, {"inter_token", m.GetInterToken()},
		{"time_per_output_token", m.GetTimePerOutputToken()}, {"queue_time", m.GetQueueTime()}}
}

type namedGauge struct {
	name, label, unit string
	v                 *float64
}

// gauges are the node's gauges and rates in the order the Markdown lists
// them; unit "%" shows a 0..1 fraction as a percentage.
func gauges(m *llmdiagv1.NodeMetrics) []namedGauge {
	return []namedGauge{
		{"queue", "queue", "", m.Queue}, {"running", "running", "", m.Running}, {"queue_running_ratio", "queue/running", "", m.QueueRunningRatio},
		{"kv_pressure", "KV pressure", "%", m.KvPressure}, {"kv_capacity_tokens", "KV capacity", " tokens", m.KvCapacityTokens},
		{"prompt_tokens_per_second", "prompt rate", " tok/s", m.PromptTokensPerSecond},
		{"generation_tokens_per_second", "generation rate", " tok/s", m.GenerationTokensPerSecond},
		{"decode_tokens_per_second_per_request", "decode per request", " tok/s", m.DecodeTokensPerSecondPerRequest},
		{"preemptions_per_second", "preemptions", " /s", m.PreemptionsPerSecond},
		{"requests_per_second", "requests", " /s", m.RequestsPerSecond},
		{"aborted_requests_per_second", "aborted", " /s", m.AbortedRequestsPerSecond},
		{"prefix_cache_hit_rate", "prefix-cache hits", "%", m.PrefixCacheHitRate},
	}
}

func compareOut(r *llmdiagv1.ComparePercentilesResponse) CompareOut {
	out := CompareOut{Metric: strings.ToLower(word(r.GetMetric().String(), "LATENCY_METRIC_")), Window: r.GetWindow(),
		Quantiles: r.GetQuantiles(), Rows: []CompareRowOut{}, Degraded: r.GetDegraded().GetReason()}
	if out.Quantiles == nil {
		out.Quantiles = []float64{}
	}
	for _, row := range r.GetRows() {
		o := CompareRowOut{Subject: row.GetSubject(), Nodes: nonNil(row.GetNodes()), Count: row.GetCount(), Values: []CompareValueOut{},
			TailRatio: zeroIfNotFinite(row.GetTailRatio()), Outlier: row.GetOutlier(), Note: row.GetNote(),
			OffsetSeconds: seconds(row.GetOffset()), RatioToBaseline: zeroIfNotFinite(row.GetRatioToBaseline())}
		for _, v := range row.GetValues() {
			o.Values = append(o.Values, CompareValueOut{PercentileOut: percentileOut(v.GetPercentile()), Rank: v.GetRank(),
				RatioToMedian: zeroIfNotFinite(v.GetRatioToMedian()), WithinResolution: v.GetWithinResolution()})
		}
		out.Rows = append(out.Rows, o)
	}
	return out
}

func zeroIfNotFinite(v float64) float64 {
	if finite(v) == nil {
		return 0
	}
	return v
}

// The Markdown of the answers.

// mdCell escapes what would break a table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func renderNodes(title string, o NodesOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", title)
	if o.Degraded != "" {
		fmt.Fprintf(&b, "_Degraded: %s_\n\n", o.Degraded)
	}
	if len(o.Nodes) == 0 {
		if o.Total == 0 {
			b.WriteString("No node matched.\n")
		}
		return b.String()
	}
	b.WriteString("| Node | Model | Engine | Status | Root cause | Routable | Load | Age |\n|---|---|---|---|---|---|---|---|\n")
	for _, n := range o.Nodes {
		routable := "no"
		if n.Routable {
			routable = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.2f | %s |\n", mdCell(n.ID), mdCell(n.Model), n.Engine, n.Status, n.RootCause,
			routable, n.LoadScore, age(n.StalenessSeconds))
	}
	if o.Truncated {
		fmt.Fprintf(&b, "\n%d of %d nodes shown; raise limit or filter for the rest.\n", len(o.Nodes), o.Total)
	} else {
		fmt.Fprintf(&b, "\n%d nodes.\n", o.Total)
	}
	return b.String()
}

func age(s float64) string {
	if s < 60 {
		return strconv.FormatFloat(math.Round(s*10)/10, 'f', -1, 64) + " s"
	}
	return strconv.FormatFloat(math.Round(s/6)/10, 'f', -1, 64) + " min"
}

func renderDiagnosis(o DiagnosisOut, report string) string {
	var b strings.Builder
	if o.Degraded != "" {
		fmt.Fprintf(&b, "_Degraded: %s_\n\n", o.Degraded)
	}
	b.WriteString(strings.TrimRight(report, "\n"))
	b.WriteString("\n")
	if o.Runbook != "" {
		fmt.Fprintf(&b, "\nRunbook: %s (explain_cause %s)\n", o.Runbook, o.RootCause)
	}
	return b.String()
}

// secs renders a value in seconds as a person reads it.
func secs(v *float64) string {
	switch {
	case v == nil:
		return "+Inf"
	case *v >= 60:
		return fmt.Sprintf("%.1f min", *v/60)
	case *v >= 1:
		return fmt.Sprintf("%.2f s", *v)
	}
	return fmt.Sprintf("%.1f ms", *v*1000)
}

func pct(p PercentileOut) string {
	q := "P" + strconv.FormatFloat(p.Quantile*100, 'f', -1, 64)
	if p.Value == nil {
		return q + " -"
	}
	return fmt.Sprintf("%s %s (%s–%s)", q, secs(p.Value), secs(p.LowerBound), secs(p.UpperBound))
}

func renderMetrics(o MetricsOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s · %s · %s · %s\n\n", o.Node, o.Model, o.Engine, o.Window)
	up := "up"
	if !o.Up {
		up = "DOWN (last scrape failed)"
	}
	stale := ""
	if o.Stale {
		stale = ", STALE"
	}
	fmt.Fprintf(&b, "%s · data age %s%s", up, age(o.StalenessSeconds), stale)
	if o.CoveredSeconds != nil {
		fmt.Fprintf(&b, " · window covers %s of data", age(*o.CoveredSeconds))
	}
	b.WriteString("\n\n")
	if o.Degraded != "" {
		fmt.Fprintf(&b, "_Degraded: %s_\n\n", o.Degraded)
	}
	b.WriteString("| Latency | Count | Mean | Percentiles (bucket) |\n|---|---|---|---|\n")
	for _, name := range []string{"ttft", "e2e", "inter_token", "time_per_output_token", "queue_time"} {
		d, ok := o.Latencies[name]
		if !ok {
			fmt.Fprintf(&b, "| %s | - | - | not exposed |\n", name)
			continue
		}
		var ps []string
		for _, p := range d.Percentiles {
			ps = append(ps, pct(p))
		}
		mean := "-"
		if d.Mean != nil {
			mean = secs(d.Mean)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s |\n", name, d.Count, mean, strings.Join(ps, ", "))
	}
	b.WriteString("\n| Indicator | Value |\n|---|---|\n")
	for _, g := range gauges(&llmdiagv1.NodeMetrics{}) {
		v, ok := o.Gauges[g.name]
		switch {
		case !ok:
			fmt.Fprintf(&b, "| %s | unknown |\n", g.label)
		case g.unit == "%":
			fmt.Fprintf(&b, "| %s | %.1f%% |\n", g.label, v*100)
		default:
			fmt.Fprintf(&b, "| %s | %s%s |\n", g.label, strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64), g.unit)
		}
	}
	for _, e := range o.Errors {
		fmt.Fprintf(&b, "\nerror: %s\n", e)
	}
	return b.String()
}

func renderCompare(o CompareOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s over %s\n\n", o.Metric, o.Window)
	if o.Degraded != "" {
		fmt.Fprintf(&b, "_Degraded: %s_\n\n", o.Degraded)
	}
	head := []string{"Subject", "Count"}
	for _, q := range o.Quantiles {
		head = append(head, "P"+strconv.FormatFloat(q*100, 'f', -1, 64)+" (bucket) rank ×median")
	}
	head = append(head, "Tail", "Outlier")
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	var notes []string
	for _, r := range o.Rows {
		subject := mdCell(r.Subject)
		if r.OffsetSeconds > 0 {
			subject += " (" + age(r.OffsetSeconds) + " before)"
		}
		cells := []string{subject, fmt.Sprintf("%.0f", r.Count)}
		for _, v := range r.Values {
			if v.Value == nil {
				cells = append(cells, "-")
				continue
			}
			cell := fmt.Sprintf("%s (%s–%s) #%d %.2f×", secs(v.Value), secs(v.LowerBound), secs(v.UpperBound), v.Rank, v.RatioToMedian)
			if v.WithinResolution {
				cell += "≈"
			}
			cells = append(cells, cell)
		}
		tail, outlier := "-", "-"
		if r.TailRatio > 0 {
			tail = fmt.Sprintf("%.1f×", r.TailRatio)
		}
		if r.Outlier {
			outlier = "**yes**"
		}
		cells = append(cells, tail, outlier)
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		if r.Note != "" {
			notes = append(notes, r.Subject+": "+r.Note)
		}
	}
	b.WriteString("\n#1 is the fastest; ×median is the ratio to the median subject; ≈ means within bucket resolution (not a measured difference).\n")
	for _, n := range notes {
		fmt.Fprintf(&b, "\nnote: %s\n", n)
	}
	return b.String()
}
