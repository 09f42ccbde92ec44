package engine

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/sample"
)

// GPUField names one figure the NVIDIA DCGM exporter reports per GPU.
type GPUField int

// The DCGM figures llmdiag reads (see DCGMFamilies for their names).
const (
	GPUUtil        GPUField = iota // DCGM_FI_DEV_GPU_UTIL, percent
	GPUSMActive                    // DCGM_FI_PROF_SM_ACTIVE, else GR_ENGINE_ACTIVE, 0..1
	GPUTensor                      // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0..1
	GPUDRAM                        // DCGM_FI_PROF_DRAM_ACTIVE, 0..1
	GPUFBUsed                      // DCGM_FI_DEV_FB_USED, MiB
	GPUFBFree                      // DCGM_FI_DEV_FB_FREE, MiB
	GPUPower                       // DCGM_FI_DEV_POWER_USAGE, W
	GPUSMClock                     // DCGM_FI_DEV_SM_CLOCK, MHz
	GPUTemp                        // DCGM_FI_DEV_GPU_TEMP, °C
	GPUClockEvents                 // DCGM_FI_DEV_CLOCKS_EVENT_REASONS, bitmask
	GPUXID                         // DCGM_FI_DEV_XID_ERRORS, last XID
	NumGPUFields
)

// DCGMFamilies are the exporter's family names of each field, preferred
// first: the profiling field DCGM_FI_PROF_SM_ACTIVE is off in the
// exporter's shipped counter sets, which enable DCGM_FI_PROF_GR_ENGINE_ACTIVE
// instead; DCGM 3.3 renamed DCGM_FI_DEV_CLOCK_THROTTLE_REASONS to
// DCGM_FI_DEV_CLOCKS_EVENT_REASONS. engine/testdata/dcgm-h100-decode.prom is
// an exposition of the current exporter with the profiling fields,
// engine/testdata/dcgm-a100-throttled-xid.prom one of an older exporter
// without them.
var DCGMFamilies = [NumGPUFields][]string{
	GPUUtil:        {"DCGM_FI_DEV_GPU_UTIL"},
	GPUSMActive:    {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"},
	GPUTensor:      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
	GPUDRAM:        {"DCGM_FI_PROF_DRAM_ACTIVE"},
	GPUFBUsed:      {"DCGM_FI_DEV_FB_USED"},
	GPUFBFree:      {"DCGM_FI_DEV_FB_FREE"},
	GPUPower:       {"DCGM_FI_DEV_POWER_USAGE"},
	GPUSMClock:     {"DCGM_FI_DEV_SM_CLOCK"},
	GPUTemp:        {"DCGM_FI_DEV_GPU_TEMP"},
	GPUClockEvents: {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"},
	GPUXID:         {"DCGM_FI_DEV_XID_ERRORS"},
}

// DCGMFamilyNames lists every family of DCGMFamilies once, in field order.
func DCGMFamilyNames() []string {
	var out []string
	for _, names := range DCGMFamilies {
		out = append(out, names...)
	}
	return out
}

// The DCGM exporter's labels llmdiag reads: the GPU's index on its host
// and its model name. (It also sets UUID, device, pci_bus_id, Hostname
// and, under Kubernetes with pod mapping, pod, namespace and container.)
const (
	DCGMGPULabel   = "gpu"
	DCGMModelLabel = "modelName"
	DCGMUUIDLabel  = "UUID"
	// A MIG instance's series carry its GPU instance id and profile
	// (1g.10gb, …) besides the gpu and UUID labels of the physical GPU
	// it is part of.
	DCGMInstanceLabel = "GPU_I_ID"
	DCGMProfileLabel  = "GPU_I_PROFILE"
	// Under Kubernetes with pod mapping, the pod and namespace a GPU (or
	// MIG instance) is allocated to.
	DCGMPodLabel       = "pod"
	DCGMNamespaceLabel = "namespace"
)

// dcgm-exporter's opt-in XID counter: per GPU and XID (its xid label),
// how many times the exporter saw that XID since it started. It counts
// the repeats of an XID that DCGM_FI_DEV_XID_ERRORS, the last XID, cannot
// show.
const (
	DCGMXIDTotalFamily = "DCGM_EXP_XID_ERRORS_TOTAL"
	DCGMXIDLabel       = "xid"
)

// DCGMPod selects the series of one pod's GPUs, where several engines
// share an exporter: Pod, and Namespace when set, must equal the series'
// pod and namespace labels. The zero DCGMPod keeps every series.
type DCGMPod struct{ Pod, Namespace string }

// NodePod is the DCGMPod of a fleet node's labels: its pod and namespace
// labels, when it has a pod label; else the zero DCGMPod.
func NodePod(labels map[string]string) DCGMPod {
	if labels[DCGMPodLabel] == "" {
		return DCGMPod{}
	}
	return DCGMPod{Pod: labels[DCGMPodLabel], Namespace: labels[DCGMNamespaceLabel]}
}

// Keeps reports whether s is one of p's GPUs.
func (p DCGMPod) Keeps(s DCGMSeries) bool {
	return p.Pod == "" || s.Pod == p.Pod && (p.Namespace == "" || s.Namespace == p.Namespace)
}

// String names p in warnings: namespace/pod.
func (p DCGMPod) String() string {
	if p.Namespace == "" {
		return p.Pod
	}
	return p.Namespace + "/" + p.Pod
}

// ClockEventReasons are the bits of DCGM's clock-event mask (NVML's
// clocks-event reasons), by bit.
var ClockEventReasons = []struct {
	Bit  uint64
	Name string
	// Limit: thermal or power, a limit that holds the clock down under
	// load (not idle, a configured clock or sync boost).
	Limit bool
}{
	{0x1, "gpu_idle", false},
	{0x2, "applications_clocks_setting", false},
	{0x4, "sw_power_cap", true},
	{0x8, "hw_slowdown", true},
	{0x10, "sync_boost", false},
	{0x20, "sw_thermal_slowdown", true},
	{0x40, "hw_thermal_slowdown", true},
	{0x80, "hw_power_brake_slowdown", true},
	{0x100, "display_clock_setting", false},
}

// limitMask holds the ClockEventReasons bits that are thermal or power
// limits.
func limitMask() uint64 {
	var m uint64
	for _, r := range ClockEventReasons {
		if r.Limit {
			m |= r.Bit
		}
	}
	return m
}

// ClockEventNames decodes a clock-event mask into reason names, in bit
// order; bits DCGM does not define read as "bit_0x…".
func ClockEventNames(mask uint64) []string {
	var out []string
	for _, r := range ClockEventReasons {
		if mask&r.Bit != 0 {
			out = append(out, r.Name)
			mask &^= r.Bit
		}
	}
	for b := uint64(1); mask != 0 && b != 0; b <<= 1 {
		if mask&b != 0 {
			out = append(out, fmt.Sprintf("bit_%#x", b))
			mask &^= b
		}
	}
	return out
}

// GPUReading is one GPU's figures: Values[f] is nil where the exporter does
// not report field f for it.
type GPUReading struct {
	// GPU is the gpu label (the index on its host); UUID breaks ties
	// between hosts.
	GPU, UUID string
	Model     string
	Values    [NumGPUFields]*float64
	// XIDCounts is DCGMXIDTotalFamily by XID, nil when not exported.
	XIDCounts map[uint32]float64
}

// DCGMSeries is one series of a DCGM family: its GPU's labels and value.
// Instance and Profile are set on a MIG instance's series (GPU_I_ID,
// GPU_I_PROFILE); GPU and UUID are then its physical GPU's. Pod and
// Namespace are the pod mapping's, when the exporter has it on.
type DCGMSeries struct {
	Family            string
	GPU, UUID, Model  string
	Instance, Profile string
	Pod, Namespace    string
	// XID is the xid label of a DCGMXIDTotalFamily series.
	XID   string
	Value float64
}

// ExtractGPU reads a DCGM exporter's exposition into one GPUMetrics per
// node (GPUFromSeries); nil when it holds no DCGM family. Problems (a
// family of the wrong type, a series without gpu label) are returned as
// warnings, the figures they touch left out.
func ExtractGPU(families map[string]*dto.MetricFamily) (*llmdiagv1.GPUMetrics, []string) {
	return ExtractPodGPU(families, DCGMPod{})
}

// ExtractPodGPU is ExtractGPU of pod's series only (DCGMPod.Keeps), for
// an exporter that serves the GPUs of several engines' pods. A pod with
// no series has no GPU figures, with a warning saying so.
func ExtractPodGPU(families map[string]*dto.MetricFamily, pod DCGMPod) (*llmdiagv1.GPUMetrics, []string) {
	var warnings []string
	names := append(DCGMFamilyNames(), DCGMXIDTotalFamily)
	n := 0
	for _, name := range names {
		n += len(families[name].GetMetric())
	}
	ss := make([]DCGMSeries, 0, n)
	for _, name := range names {
		fam := families[name]
		if fam == nil {
			continue
		}
		if t := fam.GetType(); t != dto.MetricType_GAUGE && t != dto.MetricType_UNTYPED && t != dto.MetricType_COUNTER {
			warnings = append(warnings, fmt.Sprintf("DCGM family %s is a %s, not a gauge: left out", name, t))
			continue
		}
		for _, m := range fam.GetMetric() {
			s := DCGMSeries{Family: name, Value: metricValue(m)}
			for _, p := range m.GetLabel() {
				// A label given twice: the last one, as a map of them.
				switch v := p.GetValue(); p.GetName() {
				case DCGMGPULabel:
					s.GPU = v
				case DCGMUUIDLabel:
					s.UUID = v
				case DCGMModelLabel:
					s.Model = v
				case DCGMInstanceLabel:
					s.Instance = v
				case DCGMProfileLabel:
					s.Profile = v
				case DCGMPodLabel:
					s.Pod = v
				case DCGMNamespaceLabel:
					s.Namespace = v
				case DCGMXIDLabel:
					s.XID = v
				}
			}
			ss = append(ss, s)
		}
	}
	ss, w := pod.Filter(ss)
	warnings = append(warnings, w...)
	g, w := GPUFromSeries(ss)
	return g, append(warnings, w...)
}

// HasDCGMFamily reports whether families hold a family of DCGMFamilies.
func HasDCGMFamily(families map[string]*dto.MetricFamily) bool {
	for _, name := range DCGMFamilyNames() {
		if families[name] != nil {
			return true
		}
	}
	return false
}

// Filter keeps p's series of ss (DCGMPod.Keeps); when p drops every
// DCGM series there is, a warning names the pod.
func (p DCGMPod) Filter(ss []DCGMSeries) ([]DCGMSeries, []string) {
	if p.Pod == "" {
		return ss, nil
	}
	var out []DCGMSeries
	for _, s := range ss {
		if p.Keeps(s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 && len(ss) > 0 {
		return nil, []string{fmt.Sprintf("no DCGM series of pod %s (the node's pod label): no GPU figures", p)}
	}
	return out, nil
}

// GPUFromSeries aggregates one node's DCGM series (AggregateGPU), each
// field from the first of its DCGMFamilies that has a series; nil when none
// is a DCGM family. A series without gpu or UUID label is left out with a
// warning, one that is not a number silently. A value that is one of
// DCGM's sentinels (DCGMSentinels: blank, not found, not supported, not
// permissioned) is absent, with one warning per field naming the
// sentinel and the GPUs that report it; one outside its field's
// plausible range (DCGMBound) is absent, with a warning naming the field,
// the GPU and the value.
func GPUFromSeries(ss []DCGMSeries) (*llmdiagv1.GPUMetrics, []string) {
	rank := map[string][2]int{} // family → field, preference
	for f, names := range DCGMFamilies {
		for i, n := range names {
			rank[n] = [2]int{f, i}
		}
	}
	// The preferred family present for each field.
	best := [NumGPUFields]int{}
	for f := range best {
		best[f] = len(DCGMFamilies[f])
	}
	for _, s := range ss {
		if r, ok := rank[s.Family]; ok && r[1] < best[r[0]] {
			best[r[0]] = r[1]
		}
	}
	byKey := map[string]*migReading{}
	var keys []string
	var warnings []string
	warned := map[string]bool{}
	// Per field, the GPUs that report it, and those that report a DCGM
	// sentinel by sentinel.
	var reporting [NumGPUFields][]string
	var blank [NumGPUFields]map[string][]string
	reading := func(s DCGMSeries) *migReading {
		key := s.GPU + "\xff" + s.UUID + "\xff" + s.Instance
		g := byKey[key]
		if g == nil {
			g = &migReading{GPUReading: GPUReading{GPU: s.GPU, UUID: s.UUID, Model: s.Model}, instance: s.Instance, profile: s.Profile}
			byKey[key] = g
			keys = append(keys, key)
		}
		return g
	}
	for _, s := range ss {
		if s.Family == DCGMXIDTotalFamily {
			if s.GPU == "" && s.UUID == "" {
				continue
			}
			x, err := strconv.ParseUint(s.XID, 10, 32)
			switch {
			case err != nil || x == 0 || x > uint64(DCGMBound(GPUXID).Max):
				warnings = append(warnings, fmt.Sprintf("DCGM family %s has a series with xid label %q: left out", s.Family, s.XID))
			case !(s.Value >= 0 && s.Value <= 1<<53):
				warnings = append(warnings, fmt.Sprintf("DCGM family %s of GPU %s, XID %d, reads %g, not a count: left out", s.Family, cmp.Or(s.GPU, s.UUID), x, s.Value))
			default:
				g := reading(s)
				if g.XIDCounts == nil {
					g.XIDCounts = map[uint32]float64{}
				}
				g.XIDCounts[uint32(x)] += s.Value
			}
			continue
		}
		r, ok := rank[s.Family]
		if !ok || r[1] != best[r[0]] {
			continue
		}
		if s.GPU == "" && s.UUID == "" {
			if !warned[s.Family] {
				warned[s.Family] = true
				warnings = append(warnings, fmt.Sprintf("DCGM family %s has a series without gpu or UUID label: left out", s.Family))
			}
			continue
		}
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		g := reading(s)
		f := GPUField(r[0])
		if g.Values[f] != nil {
			continue
		}
		name := g.name()
		reporting[f] = append(reporting[f], name)
		if what := dcgmSentinel(f, s.Value); what != "" {
			if blank[f] == nil {
				blank[f] = map[string][]string{}
			}
			blank[f][what] = append(blank[f][what], name)
			continue
		}
		if why := implausible(f, s.Family, name, s.Value); why != "" {
			warnings = append(warnings, why)
			continue
		}
		g.Values[f] = sample.F(s.Value)
	}
	warnings = append(warnings, sentinelWarnings(best, reporting, blank)...)
	if len(byKey) == 0 {
		return nil, warnings
	}
	units := make([]migReading, 0, len(byKey))
	for _, k := range keys {
		units = append(units, *byKey[k])
	}
	rs, note := physicalGPUs(units)
	if note != "" {
		warnings = append(warnings, note)
	}
	return AggregateGPU(rs), warnings
}

// migReading is the reading of one physical GPU's own series (instance
// "") or of one of its MIG instances.
type migReading struct {
	GPUReading
	instance, profile string
}

// name is how warnings name the reading: its GPU, and its MIG instance.
func (m migReading) name() string {
	if m.instance == "" {
		return gpuName(m.GPUReading)
	}
	return gpuName(m.GPUReading) + " instance " + m.instance
}

// physicalGPUs folds MIG instances' readings into their physical GPU's
// (same gpu and UUID labels), one reading per physical GPU in first-seen
// order. Each field is the GPU's own series' when it has one; else, of
// its instances', the mean for utilisation and the activities, the sum
// for framebuffer used and free, the union of the bits for the
// clock-event mask, and the highest for power, SM clock, temperature
// and XID (per-device figures each instance repeats). note names the
// GPUs some of whose figures come from their instances, "" when none do.
func physicalGPUs(units []migReading) ([]GPUReading, string) {
	type group struct {
		own   *GPUReading
		insts []migReading
	}
	byGPU := map[string]*group{}
	var order []string
	for _, u := range units {
		k := u.GPU + "\xff" + u.UUID
		g := byGPU[k]
		if g == nil {
			g = &group{}
			byGPU[k] = g
			order = append(order, k)
		}
		if u.instance == "" {
			own := u.GPUReading
			g.own = &own
		} else {
			g.insts = append(g.insts, u)
		}
	}
	out := make([]GPUReading, 0, len(order))
	var from []string
	for _, k := range order {
		g := byGPU[k]
		if len(g.insts) == 0 {
			out = append(out, *g.own)
			continue
		}
		slices.SortFunc(g.insts, func(a, b migReading) int { return compareGPU(a.instance, b.instance) })
		r := GPUReading{GPU: g.insts[0].GPU, UUID: g.insts[0].UUID, Model: g.insts[0].Model}
		if g.own != nil {
			r = *g.own
		}
		used := false
		for f := range NumGPUFields {
			if r.Values[f] != nil {
				continue
			}
			var vs []float64
			for _, in := range g.insts {
				if v := in.Values[f]; v != nil {
					vs = append(vs, *v)
				}
			}
			if len(vs) == 0 {
				continue
			}
			used = true
			r.Values[f] = sample.F(foldInstances(f, vs))
		}
		if r.XIDCounts == nil {
			for _, in := range g.insts {
				for x, n := range in.XIDCounts {
					if r.XIDCounts == nil {
						r.XIDCounts = map[uint32]float64{}
					}
					r.XIDCounts[x] = max(r.XIDCounts[x], n)
				}
			}
		}
		if used {
			var is []string
			for _, in := range g.insts {
				is = append(is, strings.TrimSpace(in.instance+" "+in.profile))
			}
			from = append(from, fmt.Sprintf("GPU %s from MIG instances %s", gpuName(r), strings.Join(is, ", ")))
		}
		out = append(out, r)
	}
	if len(from) == 0 {
		return out, ""
	}
	return out, fmt.Sprintf("DCGM figures without a series of the physical GPU's own aggregate its MIG instances' (mean of activities, sum of framebuffer, highest of the rest): %s", strings.Join(from, "; "))
}

// foldInstances is one physical GPU's figure of field f from its MIG
// instances' values vs (physicalGPUs).
func foldInstances(f GPUField, vs []float64) float64 {
	switch f {
	case GPUUtil, GPUSMActive, GPUTensor, GPUDRAM:
		var s float64
		for _, v := range vs {
			s += v
		}
		return round6(s / float64(len(vs)))
	case GPUFBUsed, GPUFBFree:
		var s float64
		for _, v := range vs {
			s += v
		}
		return round6(s)
	case GPUClockEvents:
		var m uint64
		for _, v := range vs {
			if v >= 0 {
				m |= uint64(v)
			}
		}
		return float64(m)
	}
	return slices.Max(vs)
}

// sentinelWarnings are one warning per field and DCGM sentinel reported
// for it: on every GPU, or on which of them.
func sentinelWarnings(best [NumGPUFields]int, reporting [NumGPUFields][]string, blank [NumGPUFields]map[string][]string) []string {
	var out []string
	for f := range NumGPUFields {
		if len(blank[f]) == 0 {
			continue
		}
		fam := DCGMFamilies[f][best[f]]
		whats := slices.Sorted(maps.Keys(blank[f]))
		for _, what := range whats {
			gpus := blank[f][what]
			on := "every GPU"
			if len(gpus) < len(reporting[f]) {
				slices.SortFunc(gpus, compareGPU)
				on = fmt.Sprintf("%d of %d GPUs (%s)", len(gpus), len(reporting[f]), strings.Join(gpus, ", "))
			}
			out = append(out, fmt.Sprintf("DCGM family %s reports %s on %s: read as absent", fam, what, on))
		}
	}
	return out
}

// metricValue is m's gauge, counter or untyped value.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

// AggregateGPU makes one node's GPUMetrics of its GPUs' readings: means of
// the activities and the SM clock (GPU utilisation from percent to 0..1),
// sums of framebuffer and power, the fullest framebuffer, the lowest clock,
// the hottest GPU, the union of the clock-event bits, and every non-zero
// XID. The Prometheus source (source/prom) builds the same readings from
// its query, so both paths give the same figures. nil for no reading.
func AggregateGPU(rs []GPUReading) *llmdiagv1.GPUMetrics {
	if len(rs) == 0 {
		return nil
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b GPUReading) int {
		return cmp.Or(compareGPU(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID))
	})
	g := &llmdiagv1.GPUMetrics{Gpus: uint32(len(rs)), ModelName: rs[0].Model}
	mean := func(f GPUField, scale float64) *float64 {
		var sum float64
		n := 0
		for _, r := range rs {
			if v := r.Values[f]; v != nil {
				sum += *v
				n++
			}
		}
		if n == 0 {
			return nil
		}
		return sample.F(round6(sum / float64(n) * scale))
	}
	sum := func(f GPUField) *float64 {
		var s float64
		n := 0
		for _, r := range rs {
			if v := r.Values[f]; v != nil {
				s += *v
				n++
			}
		}
		if n == 0 {
			return nil
		}
		return sample.F(round6(s))
	}
	extreme := func(f GPUField, better func(a, b float64) bool) *float64 {
		var out *float64
		for _, r := range rs {
			if v := r.Values[f]; v != nil && (out == nil || better(*v, *out)) {
				out = sample.F(*v)
			}
		}
		return out
	}
	lower := func(a, b float64) bool { return a < b }
	higher := func(a, b float64) bool { return a > b }

	g.Utilization = mean(GPUUtil, 0.01)
	g.SmActive = mean(GPUSMActive, 1)
	g.TensorActive = mean(GPUTensor, 1)
	g.DramActive = mean(GPUDRAM, 1)
	g.DramActiveMin = extreme(GPUDRAM, lower)
	g.DramActiveMax = extreme(GPUDRAM, higher)
	g.FramebufferUsedMib = sum(GPUFBUsed)
	g.FramebufferFreeMib = sum(GPUFBFree)
	for _, r := range rs {
		u, f := r.Values[GPUFBUsed], r.Values[GPUFBFree]
		if u == nil || f == nil || *u+*f <= 0 {
			continue
		}
		if frac := round6(*u / (*u + *f)); g.FramebufferUsedFraction == nil || frac > *g.FramebufferUsedFraction {
			g.FramebufferUsedFraction = sample.F(frac)
		}
	}
	g.PowerWatts = sum(GPUPower)
	g.SmClockMhz = mean(GPUSMClock, 1)
	g.SmClockMhzMin = extreme(GPUSMClock, lower)
	g.TemperatureCelsiusMax = extreme(GPUTemp, higher)

	limits := limitMask()
	for _, r := range rs {
		v := r.Values[GPUClockEvents]
		if v == nil || *v < 0 {
			continue
		}
		mask := uint64(*v)
		if g.ClockEventMask == nil {
			g.ClockEventMask = new(uint64)
		}
		*g.ClockEventMask |= mask
		if mask&limits != 0 {
			g.ThrottledGpus = append(g.ThrottledGpus, gpuName(r))
		}
	}
	if g.ClockEventMask != nil {
		g.ClockEventReasons = ClockEventNames(*g.ClockEventMask)
	}
	for _, r := range rs {
		g.XidErrors = append(g.XidErrors, gpuXIDs(r, &g.XidRead)...)
	}
	return g
}

// gpuXIDs are r's XIDs in xid order: its last XID when not 0, and each
// XID its counter names, with its count. read is set when r reports its
// last XID.
func gpuXIDs(r GPUReading, read *bool) []*llmdiagv1.GPUXid {
	var last uint32
	if v := r.Values[GPUXID]; v != nil {
		*read = true
		// GPUFromSeries keeps an XID within DCGMBound(GPUXID); one that
		// does not fit a uint32 is no XID, never clamped into one.
		if *v > 0 && *v <= math.MaxUint32 {
			last = uint32(*v)
		}
	}
	codes := slices.Sorted(maps.Keys(r.XIDCounts))
	if last != 0 && !slices.Contains(codes, last) {
		codes = append(codes, last)
		slices.Sort(codes)
	}
	out := make([]*llmdiagv1.GPUXid, 0, len(codes))
	for _, x := range codes {
		e := &llmdiagv1.GPUXid{Gpu: gpuName(r), Xid: x, Last: x == last}
		if n, ok := r.XIDCounts[x]; ok {
			e.Count = new(uint64(n))
		}
		out = append(out, e)
	}
	return out
}

// gpuName is how a GPU is named in GPUMetrics: its gpu label, else its
// UUID.
func gpuName(r GPUReading) string {
	if r.GPU != "" {
		return r.GPU
	}
	return r.UUID
}

// compareGPU orders gpu labels numerically when both are numbers.
func compareGPU(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return cmp.Compare(x, y)
	}
	return cmp.Compare(a, b)
}

// LimitReasons returns the thermal and power reasons among names.
func LimitReasons(names []string) []string {
	var out []string
	for _, n := range names {
		for _, r := range ClockEventReasons {
			if r.Name == n && r.Limit {
				out = append(out, n)
			}
		}
	}
	return out
}

// round6 rounds away the float noise of sums and means, so that the same
// readings give the same figures whatever their order.
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }
