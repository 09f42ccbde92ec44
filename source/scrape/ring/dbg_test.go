package ring

import (
	"testing"
)

func Dump(t testing.TB, r *Ring) {
	for _, b := range r.blocks {
		hdr := 0
		start := uint32(0)
		const1 := 0
		for _, e := range b.ends {
			n := int(e - start)
			if n <= 12 {
				const1++
			}
			hdr += 11
			start = e
		}
		t.Logf("coarse=%v rows=%d cols=%d data=%d (~%d first-row) const-cols=%d metas=%d", b.coarse, len(b.times), len(b.ends), len(b.data), hdr, const1, len(b.metas))
	}
}
