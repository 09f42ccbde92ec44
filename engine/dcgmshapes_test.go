package engine

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// TestDCGMExporterShapes reads expositions in the shapes the DCGM exporter
// writes them, each fixture's header saying which: the 2.x line (old
// clock-event name, no profiling fields, ", " between labels), the
// current one (GR_ENGINE_ACTIVE, both clock-event names, its own
// DCGM_EXP_ families), MIG instances, pods sharing an exporter, MIG and
// pods together, and fields a GPU does not support. Each row is one
// node's read: its GPU count, every figure, and every warning.
func TestDCGMExporterShapes(t *testing.T) {
	migNote := "DCGM figures without a series of the physical GPU's own aggregate its MIG instances' (mean of activities, sum of framebuffer, highest of the rest): "
	for _, tc := range []struct {
		name, file string
		pod        DCGMPod
		want       *llmdiagv1.GPUMetrics
		warnings   []string // each warning, in order, contains its string
	}{
		{"exporter 2.x, old clock-event name, no profiling", "dcgm-t4-exporter2.prom", DCGMPod{}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "Tesla T4",
			Utilization:             f64(0.4), // (35+45)/2 %
			FramebufferUsedMib:      f64(15000),
			FramebufferFreeMib:      f64(15218),
			FramebufferUsedFraction: f64(0.595671), // GPU 0: 9000 / 15109
			PowerWatts:              f64(79.75),
			SmClockMhz:              f64(1590),
			SmClockMhzMin:           f64(1590),
			TemperatureCelsiusMax:   f64(58),
			ClockEventMask:          u64(0x4), // from DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
			ClockEventReasons:       []string{"sw_power_cap"},
			ThrottledGpus:           []string{"1"},
			XidRead:                 true,
		}, nil}, // the memory temperature's sentinel is in a family llmdiag does not read
		{"exporter 4.x, GR_ENGINE_ACTIVE, both clock-event names", "dcgm-h100-exporter4.prom", DCGMPod{}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "NVIDIA H100 80GB HBM3",
			Utilization:             f64(0.99),
			SmActive:                f64(0.7), // GR_ENGINE_ACTIVE, SM_ACTIVE not exported
			TensorActive:            f64(0.2),
			DramActive:              f64(0.76),
			DramActiveMin:           f64(0.74),
			DramActiveMax:           f64(0.78),
			FramebufferUsedMib:      f64(147000),
			FramebufferFreeMib:      f64(16118),
			FramebufferUsedFraction: f64(0.907319), // GPU 0: 74000 / 81559
			PowerWatts:              f64(1210.75),
			SmClockMhz:              f64(1980),
			SmClockMhzMin:           f64(1980),
			TemperatureCelsiusMax:   f64(66),
			ClockEventMask:          u64(0),
			XidRead:                 true,
		}, nil},
		{"current exporter with profiling fields", "dcgm-h100-decode.prom", DCGMPod{}, &llmdiagv1.GPUMetrics{
			Gpus: 8, ModelName: "NVIDIA H100 80GB HBM3",
			Utilization:             f64(0.9925),
			SmActive:                f64(0.62),
			TensorActive:            f64(0.185875),
			DramActive:              f64(0.84925),
			DramActiveMin:           f64(0.836),
			DramActiveMax:           f64(0.868),
			FramebufferUsedFraction: f64(0.908615),
			FramebufferUsedMib:      f64(586069),
			FramebufferFreeMib:      f64(59203),
			PowerWatts:              f64(4200.2),
			SmClockMhz:              f64(1980),
			SmClockMhzMin:           f64(1980),
			TemperatureCelsiusMax:   f64(65),
			ClockEventMask:          u64(0),
			XidRead:                 true,
		}, nil},
		{"fields the GPU does not support", "dcgm-l40s-not-supported.prom", DCGMPod{}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "NVIDIA L40S",
			Utilization:             f64(0.475),
			SmActive:                f64(0.4335),
			FramebufferUsedMib:      f64(73080),
			FramebufferFreeMib:      f64(18112),
			FramebufferUsedFraction: f64(0.802351),
			PowerWatts:              f64(460.3),
			SmClockMhz:              f64(2040),
			SmClockMhzMin:           f64(2040),
			ClockEventMask:          u64(0),
		}, []string{
			"DCGM family DCGM_FI_PROF_DRAM_ACTIVE reports DCGM_FP64_NOT_SUPPORTED (not supported) on every GPU",
			"DCGM family DCGM_FI_DEV_GPU_TEMP reports DCGM_INT64_BLANK",
			"DCGM family DCGM_FI_DEV_XID_ERRORS reports DCGM_INT64_BLANK",
		}},
		{"MIG, two instances on each of two GPUs", "dcgm-a100-mig.prom", DCGMPod{}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "NVIDIA A100-SXM4-80GB",
			SmActive:                f64(0.4),
			TensorActive:            f64(0.15),
			DramActive:              f64(0.4),
			DramActiveMin:           f64(0.3),
			DramActiveMax:           f64(0.5),
			FramebufferUsedMib:      f64(65000),
			FramebufferFreeMib:      f64(96800),
			FramebufferUsedFraction: f64(0.494438),
			PowerWatts:              f64(430.75),
			SmClockMhz:              f64(1342.5),
			SmClockMhzMin:           f64(1275),
			TemperatureCelsiusMax:   f64(66),
			ClockEventMask:          u64(0x4),
			ClockEventReasons:       []string{"sw_power_cap"},
			ThrottledGpus:           []string{"1"},
			XidRead:                 true,
			XidErrors:               []*llmdiagv1.GPUXid{{Gpu: "1", Xid: 79, Last: true}},
		}, []string{migNote + "GPU 0 from MIG instances 1 3g.40gb, 2 3g.40gb; GPU 1 from MIG instances 1 3g.40gb, 2 3g.40gb"}},
		{"pods: pod a", "dcgm-h100-pods.prom", DCGMPod{Pod: "llama-a-0"}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "NVIDIA H100 80GB HBM3",
			Utilization:             f64(0.85), // (90+80)/2 %
			FramebufferUsedMib:      f64(141000),
			FramebufferFreeMib:      f64(21000),
			FramebufferUsedFraction: f64(0.876543), // GPU 1: 71000 / 81000
			PowerWatts:              f64(1180),
			TemperatureCelsiusMax:   f64(71),
		}, nil},
		{"pods: pod b in its namespace", "dcgm-h100-pods.prom", DCGMPod{Pod: "llama-b-0", Namespace: "inference"}, &llmdiagv1.GPUMetrics{
			Gpus: 1, ModelName: "NVIDIA H100 80GB HBM3",
			Utilization:             f64(0.4),
			FramebufferUsedMib:      f64(40000),
			FramebufferFreeMib:      f64(41000),
			FramebufferUsedFraction: f64(0.493827),
			PowerWatts:              f64(300),
			TemperatureCelsiusMax:   f64(55),
		}, nil},
		{"pods: a pod with no series", "dcgm-h100-pods.prom", DCGMPod{Pod: "gone-0"}, nil,
			[]string{"no DCGM series of pod gone-0 (the node's pod label): no GPU figures"}},
		{"MIG and pods: every instance", "dcgm-h100-mig-pods.prom", DCGMPod{}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "NVIDIA H100 80GB HBM3",
			SmActive:                f64(0.4), // GPU 0 (0.6+0.2)/2, GPU 1 (0.5+0.3)/2
			FramebufferUsedMib:      f64(97000),
			FramebufferFreeMib:      f64(64600),
			FramebufferUsedFraction: f64(0.680693), // GPU 1: 55000 / 80800
			PowerWatts:              f64(650),      // 300 + 350, each GPU's once
			TemperatureCelsiusMax:   f64(64),
			XidRead:                 true,
		}, []string{migNote + "GPU 0 from MIG instances 1 3g.40gb, 2 3g.40gb; GPU 1 from MIG instances 1 3g.40gb, 2 3g.40gb"}},
		{"MIG and pods: pod a, one instance of GPU 0 and GPU 1 whole", "dcgm-h100-mig-pods.prom", DCGMPod{Pod: "llama-a-0"}, &llmdiagv1.GPUMetrics{
			Gpus: 2, ModelName: "NVIDIA H100 80GB HBM3",
			SmActive:                f64(0.5), // GPU 0 0.6, GPU 1 0.4
			FramebufferUsedMib:      f64(85000),
			FramebufferFreeMib:      f64(36200),
			FramebufferUsedFraction: f64(0.742574), // GPU 0's instance 1: 30000 / 40400
			PowerWatts:              f64(650),
			TemperatureCelsiusMax:   f64(64),
			XidRead:                 true,
		}, []string{migNote + "GPU 0 from MIG instances 1 3g.40gb; GPU 1 from MIG instances 1 3g.40gb, 2 3g.40gb"}},
		{"MIG and pods: pod b, the other instance of GPU 0", "dcgm-h100-mig-pods.prom", DCGMPod{Pod: "llama-b-0", Namespace: "inference"}, &llmdiagv1.GPUMetrics{
			Gpus: 1, ModelName: "NVIDIA H100 80GB HBM3",
			SmActive:                f64(0.2),
			FramebufferUsedMib:      f64(12000),
			FramebufferFreeMib:      f64(28400),
			FramebufferUsedFraction: f64(0.29703),
			PowerWatts:              f64(300),
			TemperatureCelsiusMax:   f64(60),
			XidRead:                 true,
		}, []string{migNote + "GPU 0 from MIG instances 2 3g.40gb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fams := readFixture(t, tc.file)
			if b := fixture(t, tc.file); !strings.HasPrefix(b, "# ") || strings.HasPrefix(b, "# HELP") {
				t.Errorf("%s has no header saying which exporter it stands for", tc.file)
			}
			got, warnings := ExtractPodGPU(fams, tc.pod)
			if got.GetGpus() != tc.want.GetGpus() {
				t.Errorf("%d GPUs, want %d", got.GetGpus(), tc.want.GetGpus())
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(tc.want))
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d: %q", warnings, len(tc.warnings), tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d %q, want it to contain %q", i, warnings[i], w)
				}
			}
		})
	}
}
