package engine

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// StampXIDs sets when each XID of cur occurred (GPUXid.occurred_at and
// at_first_read), cur being read at at and prev the same node's GPUs as
// an earlier read saw and stamped them (nil when there was none).
//
// DCGM_FI_DEV_XID_ERRORS holds a GPU's last XID until the exporter or
// DCGM restarts, so its value says that an XID occurred once, not when.
// An XID occurred at at when it is new since prev (the GPU's last XID
// changed to it, or its counter appeared) or its count rose; one prev
// holds as well, with the same count or a lower one (the exporter
// restarted), keeps prev's stamps. When prev did not read the XID field,
// nothing says when cur's XIDs occurred: they are at their first read,
// stamped at.
func StampXIDs(prev, cur *llmdiagv1.GPUMetrics, at time.Time) {
	if cur == nil || len(cur.GetXidErrors()) == 0 {
		return
	}
	type key struct {
		gpu string
		xid uint32
	}
	before := make(map[key]*llmdiagv1.GPUXid, len(prev.GetXidErrors()))
	for _, x := range prev.GetXidErrors() {
		before[key{x.GetGpu(), x.GetXid()}] = x
	}
	now := timestamppb.New(at)
	for _, x := range cur.GetXidErrors() {
		p := before[key{x.GetGpu(), x.GetXid()}]
		switch {
		case p == nil && !prev.GetXidRead():
			x.OccurredAt, x.AtFirstRead = now, true
		case p == nil, x.GetLast() && !p.GetLast(), x.Count != nil && p.Count != nil && x.GetCount() > p.GetCount():
			x.OccurredAt, x.AtFirstRead = now, false
		default:
			x.OccurredAt, x.AtFirstRead = p.GetOccurredAt(), p.GetAtFirstRead()
			if x.OccurredAt == nil { // prev was never stamped
				x.OccurredAt, x.AtFirstRead = now, true
			}
		}
	}
}
