package sim

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// GPUFault is a hardware problem of some of a node's GPUs, as the NVIDIA
// DCGM exporter reports it.
type GPUFault struct {
	// Throttle holds the clocks of GPUs down: a thermal limit
	// (sw_thermal_slowdown and hw_thermal_slowdown, SM clock at
	// ThermalClockRatio of its maximum, the GPU at 92 °C) or a power
	// limit (sw_power_cap, PowerClockRatio, drawing its full power). The
	// engine core the GPUs belong to computes that much slower (tensor
	// parallelism waits for its slowest rank); reading memory is not
	// slowed.
	Throttle Throttle
	// XID is the XID error the GPUs report (0: none): the node goes on
	// serving, as after a contained error.
	XID int
	// XIDAt are the moments, from the end of warm-up, at which the GPUs
	// report XID: before the first their last XID is 0, from it XID, and
	// the exporter's counter DCGM_EXP_XID_ERRORS_TOTAL counts each. Empty,
	// the GPUs report XID from the start, once, as an XID left from
	// before the exporter's reader came.
	XIDAt []time.Duration
	// GPUs are the affected GPUs, by index on the node (core·TP·PP + rank);
	// empty means GPU 0.
	GPUs []int
}

// Throttle names a clock limit.
type Throttle string

// The clock limits GPUFault can set.
const (
	ThrottleNone    Throttle = ""
	ThrottleThermal Throttle = "thermal"
	ThrottlePower   Throttle = "power"
)

// The SM clock of a throttled GPU, as a fraction of its maximum.
const (
	ThermalClockRatio = 0.58
	PowerClockRatio   = 0.75
)

// clockRatio is the SM clock fraction t leaves.
func (t Throttle) clockRatio() float64 {
	switch t {
	case ThrottleThermal:
		return ThermalClockRatio
	case ThrottlePower:
		return PowerClockRatio
	}
	return 1
}

// reasons is t's DCGM clock-event mask.
func (t Throttle) reasons() uint64 {
	switch t {
	case ThrottleThermal:
		return 0x20 | 0x40 // sw_thermal_slowdown | hw_thermal_slowdown
	case ThrottlePower:
		return 0x4 // sw_power_cap
	}
	return 0
}

// affects reports whether the fault is on GPU i.
func (f GPUFault) affects(i int) bool {
	if len(f.GPUs) == 0 {
		return i == 0
	}
	for _, g := range f.GPUs {
		if g == i {
			return true
		}
	}
	return false
}

// gpusPerCore is the GPUs one engine core spans: TP × PP.
func (n Node) gpusPerCore() int {
	return max(int(n.Profile.TensorParallel), 1) * max(int(n.Profile.PipelineParallel), 1)
}

// gpuModel is what the DCGM figures of a node's GPUs follow from.
type gpuModel struct {
	spec GPU
	// weightRead is the seconds one step spends reading the active
	// weights from memory; kvReadPerK the seconds reading 1,000 tokens of
	// KV cache (EstimatePerf's memory-bound terms).
	weightRead, kvReadPerK float64
}

func newGPUModel(n Node) gpuModel {
	spec, _ := GPUSpec(n.Profile.GPU)
	g := float64(n.gpusPerCore())
	active := n.Profile.ActiveParamsBillions * 1e9
	if active <= 0 {
		active = 8e9
	}
	bw := spec.MemBandwidthTBs * 1e12
	kv := n.Perf.KVBytesPerToken
	if kv <= 0 {
		kv = kvBytesPerToken
	}
	return gpuModel{
		spec:       spec,
		weightRead: active * bytesPerParam / (g * bw),
		kvReadPerK: 1000 * kv / (g * bw),
	}
}

// How busy each kind of work keeps a GPU, by DCGM profiling field: the
// SMs hold warps through memory-bound and compute-bound kernels alike
// (SM active), the tensor pipes work in matrix products (prefill, MLA
// attention), the memory interface in weight and KV reads. The
// per-sequence work of decode (StepPerSeq: small matrix products over the
// weights and activations a step streams) keeps both half busy. Between
// kernels (launches, collectives, a lockstep rank waiting for the others)
// little of either.
var activityOf = [...]struct{ sm, tensor, dram float64 }{
	workMemory:   {0.80, 0.10, 0.88},
	workDecode:   {0.90, 0.30, 0.55},
	workCompute:  {0.92, 0.62, 0.30},
	workOverhead: {0.25, 0.00, 0.05},
	workWait:     {0.10, 0.00, 0.01},
}

type work int

const (
	workMemory work = iota
	workDecode
	workCompute
	workOverhead
	workWait
	numWork
)

// activityTau is the time constant, in simulated seconds, of the mean the
// GPU activity is reported as: DCGM samples its profiling fields about
// every second and dashboards read them over a scrape interval.
const activityTau = 10.0

// gpuLoad is one engine core's GPU activity: exponentially weighted means
// over activityTau up to at.
type gpuLoad struct {
	at                         float64
	util, sm, tensor, dram, pw float64
}

// toward moves l toward the activity of d seconds of the mix (shares of
// d by kind of work; their sum is the busy share).
func (l *gpuLoad) toward(d float64, mix [numWork]float64) {
	if d <= 0 {
		return
	}
	var busy, sm, tensor, dram float64
	for k, s := range mix {
		busy += s
		sm += s * activityOf[k].sm
		tensor += s * activityOf[k].tensor
		dram += s * activityOf[k].dram
	}
	a := 1 - math.Exp(-d/activityTau)
	l.util += a * (min(busy, 1) - l.util)
	l.sm += a * (sm - l.sm)
	l.tensor += a * (tensor - l.tensor)
	l.dram += a * (dram - l.dram)
	l.at += d
}

// idleUntil decays l over the idle time from l.at to t.
func (l *gpuLoad) idleUntil(t float64) {
	if t > l.at {
		l.toward(t-l.at, [numWork]float64{})
		l.at = t
	}
}

// iteration records an iteration of core c from t to end: its own pass
// (own seconds of it), then waiting for its lockstep group, then the
// group's pooled prefill.
func (c *core) iteration(t, end, own, pooled float64) {
	l := &c.gpu
	l.idleUntil(t)
	d := end - t
	if d <= 0 {
		return
	}
	m, p := c.model, c.perf
	var decode, ctx int
	var attn float64
	for _, r := range c.batch {
		if r.decoding() {
			decode++
			ctx += r.computed
		} else {
			attn += float64(r.sched) * (float64(r.computed) + float64(r.sched)/2) / 1000
		}
	}
	kvRead := float64(ctx) / 1000 * m.kvReadPerK
	memory := m.weightRead + kvRead
	overhead := max(p.StepBase.Seconds()-m.weightRead, 0)
	perSeq := float64(decode) * p.StepPerSeq.Seconds()
	compute := max(float64(ctx)/1000*p.StepPerKContext.Seconds()-kvRead, 0) + attn*p.PrefillPerKContext.Seconds() + pooled
	wait := max(d-own-pooled, 0)
	var mix [numWork]float64
	mix[workMemory], mix[workDecode], mix[workCompute] = memory/d, perSeq/d, compute/d
	mix[workOverhead], mix[workWait] = overhead/d, wait/d
	l.toward(d, mix)
}

// dcgmCollector exposes a node's GPUs as the DCGM exporter does, with the
// default counters and the DCP (profiling) fields: one series per GPU of
// each family, labelled gpu, UUID, pci_bus_id, device, modelName and
// Hostname (engine/testdata/dcgm-h100-decode.prom is the exporter's own
// shape). It reads the node's state under its mutex at every gather.
type dcgmCollector struct {
	n     *node
	descs map[string]*prometheus.Desc
}

// dcgmFamilies are the families the simulator exports, with their help.
var dcgmFamilies = []struct{ name, help string }{
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."},
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."},
	{"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."},
	{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."},
	{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)."},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."},
	{"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."},
	{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."},
	{"DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data."},
}

var dcgmLabels = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}

// dcgmXIDTotal is the exporter's opt-in XID counter, one series per GPU
// and XID, from the XID's first report on.
const dcgmXIDTotal = "DCGM_EXP_XID_ERRORS_TOTAL"

func newDCGMCollector(n *node) *dcgmCollector {
	c := &dcgmCollector{n: n, descs: map[string]*prometheus.Desc{}}
	for _, f := range dcgmFamilies {
		c.descs[f.name] = prometheus.NewDesc(f.name, f.help, dcgmLabels, nil)
	}
	c.descs[dcgmXIDTotal] = prometheus.NewDesc(dcgmXIDTotal, "Total XID errors observed since exporter start.", append(slices.Clone(dcgmLabels), "xid"), nil)
	return c
}

func (c *dcgmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// gpuFigures is what DCGM reports of one GPU.
type gpuFigures struct {
	util, sm, gr, tensor, dram float64
	clock, temp, power, fbUsed float64
	fbFree, reasons, xid       float64
	// xids is how many times the GPU reported xid (its
	// DCGM_EXP_XID_ERRORS_TOTAL).
	xids int
}

// figures is GPU i's reading, of its core's activity at the node's
// current time. Each GPU differs from its core's mean by a fixed amount
// within ±1.5% (the ranks of one core are not exactly balanced), drawn
// from its index, not from the node's random stream.
func (n *node) figures(i int) gpuFigures {
	cfg, m := n.cfg, n.gpuModel
	c := n.cores[min(i/cfg.gpusPerCore(), len(n.cores)-1)]
	l := c.gpu
	l.idleUntil(n.now)
	skew := 1 + 0.03*(math.Mod(float64(i)*0.618034, 1)-0.5)
	clamp := func(v float64) float64 { return math.Round(min(max(v*skew, 0), 1)*1000) / 1000 }
	f := gpuFigures{
		util: math.Round(min(l.util*skew, 1) * 100), sm: clamp(l.sm), tensor: clamp(l.tensor), dram: clamp(l.dram),
	}
	f.gr = clamp(l.util * 0.98)
	total := m.spec.MemoryGB * 1024
	f.fbUsed = math.Round(total * gpuMemoryUtilization)
	f.fbFree = math.Round(total - f.fbUsed - fbReservedMiB)
	load := 0.5*f.sm + 0.5*f.dram
	f.power = math.Round((0.15+0.8*load)*m.spec.TDPWatts*10) / 10
	f.clock = m.spec.MaxSMClockMHz
	f.temp = math.Round(32 + 40*load)
	if cfg.GPUFault.affects(i) {
		if t := cfg.GPUFault.Throttle; t != ThrottleNone {
			f.reasons = float64(t.reasons())
			f.clock = math.Round(m.spec.MaxSMClockMHz*t.clockRatio()/15) * 15
			if t == ThrottleThermal {
				f.temp = 92
			} else {
				f.power = m.spec.TDPWatts
			}
		}
		f.xid, f.xids = n.xidsAt(cfg.GPUFault)
	}
	return f
}

// xidsAt is the last XID a GPU of fault reports at the node's current
// time, and how many times it reported it.
func (n *node) xidsAt(fault GPUFault) (float64, int) {
	if fault.XID == 0 {
		return 0, 0
	}
	if len(fault.XIDAt) == 0 {
		return float64(fault.XID), 1
	}
	k := 0
	for _, at := range fault.XIDAt {
		if n.now >= n.warmup+at.Seconds() {
			k++
		}
	}
	if k == 0 {
		return 0, 0
	}
	return float64(fault.XID), k
}

// gpuMemoryUtilization is the share of GPU memory the engines take up
// front (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static);
// fbReservedMiB what the driver keeps.
const (
	gpuMemoryUtilization = 0.9
	fbReservedMiB        = 560
)

func (c *dcgmCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	n.mu.Lock()
	gpus := len(n.cores) * n.cfg.gpusPerCore()
	figs := make([]gpuFigures, gpus)
	for i := range figs {
		figs[i] = n.figures(i)
	}
	n.mu.Unlock()
	model := n.gpuModel.spec.Name
	for i, f := range figs {
		labels := []string{strconv.Itoa(i), fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", n.idHash, i),
			fmt.Sprintf("00000000:%02X:00.0", 0x18+0x10*i), "nvidia" + strconv.Itoa(i), model, n.cfg.ID}
		for name, v := range map[string]float64{
			"DCGM_FI_DEV_SM_CLOCK": f.clock, "DCGM_FI_DEV_GPU_TEMP": f.temp, "DCGM_FI_DEV_POWER_USAGE": f.power,
			"DCGM_FI_DEV_GPU_UTIL": f.util, "DCGM_FI_DEV_XID_ERRORS": f.xid, "DCGM_FI_DEV_FB_FREE": f.fbFree,
			"DCGM_FI_DEV_FB_USED": f.fbUsed, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": f.reasons,
			"DCGM_FI_PROF_GR_ENGINE_ACTIVE": f.gr, "DCGM_FI_PROF_SM_ACTIVE": f.sm,
			"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": f.tensor, "DCGM_FI_PROF_DRAM_ACTIVE": f.dram,
		} {
			ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
		}
		if f.xids > 0 {
			ch <- prometheus.MustNewConstMetric(c.descs[dcgmXIDTotal], prometheus.CounterValue, float64(f.xids),
				append(labels, strconv.Itoa(int(f.xid)))...)
		}
	}
}

// DCGM returns what the node's DCGM exporter would serve now (its URL in
// FleetFile is the node's address, path /dcgm/metrics). It fails with
// ErrNodeDown while the node is down.
func (f *Fleet) DCGM(id string) ([]byte, error) {
	n, err := f.node(id)
	if err != nil {
		return nil, err
	}
	if f.downAt(n, f.Now()) {
		return nil, fmt.Errorf("%s: %w", id, ErrNodeDown)
	}
	mfs, err := n.dcgm.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather dcgm %s: %w", id, err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, fmt.Errorf("encode dcgm %s: %w", id, err)
		}
	}
	return buf.Bytes(), nil
}

// DCGMPath is where a simulated node serves its DCGM exporter's metrics.
const DCGMPath = "/dcgm/metrics"

// throttled is core i's performance model when its GPUs' clocks are held
// down (GPUFault): its compute — per-sequence work, prefill, attention
// where compute-bound — slows by the clock ratio; reading memory does not.
func throttled(cfg Node, i int, p Perf, m gpuModel) Perf {
	r := cfg.GPUFault.Throttle.clockRatio()
	if r == 1 {
		return p
	}
	per := cfg.gpusPerCore()
	hit := false
	for g := i * per; g < (i+1)*per; g++ {
		hit = hit || cfg.GPUFault.affects(g)
	}
	if !hit {
		return p
	}
	slow := func(d time.Duration) time.Duration { return time.Duration(float64(d) / r) }
	p.StepPerSeq = slow(p.StepPerSeq)
	p.PrefillPerKContext = slow(p.PrefillPerKContext)
	if kv := time.Duration(m.kvReadPerK * float64(time.Second)); p.StepPerKContext > kv {
		p.StepPerKContext = kv + slow(p.StepPerKContext-kv)
	}
	p.PrefillTokensPerSec *= r
	return p
}
