package compact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/llmdiag/llmdiag/diagnose"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// History is a node's history of points, oldest first, in chunks of up to 32
// points, each chunk on its own: its first point in full, the others as
// differences from the one before. A point is
//
//   - a 2-byte header: what follows for the flags, the time and each gauge;
//   - the flags word (which gauges are known, Up, Status, the time's
//     location), only when it differs from the previous point's;
//   - the time as the change of the interval since the previous point
//     (delta of delta, a varint in the coarsest of s, ms, µs, ns that is
//     exact), nothing when the refresh interval held;
//   - each known gauge XORed with its previous value, in the bytes that
//     changed (Gorilla's scheme, by whole bytes): nothing when unchanged,
//     else those bytes, after one byte placing them when they do not fit
//     the previous gauge's window.
//
// Integer gauges cost a byte or two; a gauge that takes a new,
// full-precision value every refresh costs 7 bytes, about its entropy: the
// bytes are cheap to decode, and bits would save little. A 5 s refresh
// whose time has nanosecond jitter costs 4 bytes of time.
//
// Dropping the oldest points drops whole chunks: up to a chunk's worth of
// dropped points stays encoded, skipped when decoding. Time values keep
// their instant and location (UTC, Local or any other *time.Location) but
// not a monotonic clock reading, as with any store that serialises them.
//
// The gauges are Queue, Running, KVPressure, E2EMean, GenerationRate and
// E2EP99, in that order. E2EP99 came later, in bits the first layout left
// clear (flag bit 12, header bits 13-14), so chunks written before it
// decode unchanged, as points without it; a history holding it marshals as
// version 2, which older binaries refuse rather than misread (marshal.go).
//
// The zero History is empty. A History is not safe for concurrent use; a
// Snapshot may be decoded while the History changes.
type History struct {
	closed []byte   // full chunks, back to back; replaced, never modified
	ends   []uint32 // end offset in closed of each full chunk; replaced, never modified
	tail   []byte   // the chunk being filled
	st     state    // after the tail's last point
	skip   int      // points dropped from the front of the first chunk
	per    int      // points per chunk
	locs   []*time.Location
	// p99 is set once a point with E2EP99 is encoded (or a version 2
	// history unmarshalled): the bytes may then use its bits.
	p99 bool
}

// maxChunk bounds the points of one chunk: a longer chunk costs less per
// point but keeps more dropped points.
const maxChunk = 32

// state is what encoding or decoding the next point of a chunk needs.
type state struct {
	n      int // points so far in the chunk
	flags  uint16
	status int32
	tOK    bool  // t is the previous point's time in Unix nanoseconds
	t, d   int64 // previous time and interval, ns
	v      [numGauges]uint64
	lead   [numGauges]uint8 // window of the gauge's last change, in bytes
	size   [numGauges]uint8 // 0: no window yet
}

const numGauges = 6

// Flags word layout: bits 0..4 and 12 say which gauges are known (knownBit).
const (
	flagUp      = 1 << 5
	flagLocBit  = 6 // 2 bits: locUTC, locLocal, locOther
	flagRawTime = 1 << 8
	flagStatBit = 9 // 3 bits: status 0..6, 7 = written in 4 bytes
	statusEsc   = 7
	flagP99     = 1 << 12 // E2EP99 known
)

// knownBit is each gauge's bit in the flags word, codeShift the place of
// its 2-bit code in the header: the first five as the first layout had
// them, E2EP99 in bits it left clear.
var (
	knownBit  = [numGauges]uint16{1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, flagP99}
	codeShift = [numGauges]uint{0, 2, 4, 6, 8, 13}
)

const (
	locUTC = iota
	locLocal
	locOther
)

// Header layout: 2 bits for each of the first five gauges, then the time's
// kind, then whether the flags follow, then 2 bits for E2EP99 (codeShift).
const (
	gaugeSame   = 0 // unchanged
	gaugeWindow = 1 // the changed bytes, in the previous window
	gaugeNew    = 2 // a window byte (lead<<4 | size), then the changed bytes

	hdrTimeBit = 10 // 2 bits:
	timeSame   = 0  // the interval held
	timeDelta  = 1  // varint zigzag(change/unit)<<2 | unit
	timeNanos  = 2  // Unix nanoseconds, 8 bytes
	timeRaw    = 3  // Unix seconds (8 bytes) and nanoseconds (4)
	hdrFlags   = 1 << (hdrTimeBit + 2)
)

func gauges(p *diagnose.Point) [numGauges]**float64 {
	return [numGauges]**float64{&p.Queue, &p.Running, &p.KVPressure, &p.E2EMean, &p.GenerationRate, &p.E2EP99}
}

// Len returns the number of points.
func (h *History) Len() int {
	if h.per == 0 {
		return 0
	}
	return len(h.ends)*h.per + h.st.n - h.skip
}

// Size returns the bytes the encoded points take.
func (h *History) Size() int { return len(h.closed) + len(h.tail) + 4*len(h.ends) }

// Append adds p as the newest point and drops the oldest beyond limit (at
// least 1).
func (h *History) Append(p diagnose.Point, limit int) error {
	limit = min(max(limit, 1), math.MaxInt32)
	if h.per == 0 {
		h.per = min(limit, maxChunk)
	}
	if h.st.n == h.per {
		h.closeTail()
	}
	// Grow the tail a little at a time, by about two points: it is kept,
	// and append would leave up to half of it unused. A larger point than
	// usual still fits: append grows what it must.
	if cap(h.tail)-len(h.tail) < 40 {
		buf := make([]byte, len(h.tail), len(h.tail)+64)
		copy(buf, h.tail)
		h.tail = buf
	}
	if err := h.encode(p); err != nil {
		return err
	}
	for h.Len() > limit {
		h.skip++
		if len(h.ends) == 0 {
			if h.skip == h.st.n {
				h.tail, h.st, h.skip = nil, state{}, 0
			}
			continue
		}
		if h.skip == h.per {
			first := h.ends[0]
			h.closed = append([]byte(nil), h.closed[first:]...)
			ends := make([]uint32, len(h.ends)-1)
			for i := range ends {
				ends[i] = h.ends[i+1] - first
			}
			h.ends, h.skip = ends, 0
		}
	}
	return nil
}

// closeTail moves the full tail chunk to closed, in exactly sized slices.
func (h *History) closeTail() {
	closed := make([]byte, len(h.closed)+len(h.tail))
	copy(closed, h.closed)
	copy(closed[len(h.closed):], h.tail)
	ends := make([]uint32, len(h.ends)+1)
	copy(ends, h.ends)
	ends[len(h.ends)] = uint32(len(closed))
	h.closed, h.ends = closed, ends
	h.tail, h.st = nil, state{}
}

var timeUnits = [4]int64{1, 1e3, 1e6, 1e9}

func (h *History) encode(p diagnose.Point) error {
	st := &h.st
	var flags uint16
	g := gauges(&p)
	for i, v := range g {
		if *v != nil {
			flags |= knownBit[i]
		}
	}
	if flags&flagP99 != 0 {
		h.p99 = true
	}
	if p.Up {
		flags |= flagUp
	}
	loc := p.At.Location()
	locIdx := -1
	switch loc {
	case time.UTC:
		flags |= locUTC << flagLocBit
	case time.Local:
		flags |= locLocal << flagLocBit
	default:
		flags |= locOther << flagLocBit
		for i, l := range h.locs {
			if l == loc {
				locIdx = i
			}
		}
		if locIdx < 0 {
			locIdx = len(h.locs)
			h.locs = append(h.locs, loc)
		}
	}
	ns := p.At.UnixNano()
	normal := time.Unix(0, ns).Equal(p.At)
	if !normal {
		if !time.Unix(p.At.Unix(), int64(p.At.Nanosecond())).Equal(p.At) {
			return fmt.Errorf("history point time %v cannot be stored", p.At)
		}
		flags |= flagRawTime
	}
	stat := uint16(statusEsc)
	if p.Status >= 0 && p.Status < statusEsc {
		stat = uint16(p.Status)
	}
	flags |= stat << flagStatBit

	// The header goes first; its bits are known once the rest is written.
	at := len(h.tail)
	b := append(h.tail, 0, 0)
	var hdr uint16
	if st.n == 0 || flags != st.flags || int32(p.Status) != st.status {
		hdr |= hdrFlags
		b = binary.LittleEndian.AppendUint16(b, flags)
		if stat == statusEsc {
			b = binary.LittleEndian.AppendUint32(b, uint32(p.Status))
		}
	}
	st.flags, st.status = flags, int32(p.Status)
	if locIdx >= 0 {
		b = protowire.AppendVarint(b, uint64(locIdx))
	}

	switch {
	case !normal:
		hdr |= timeRaw << hdrTimeBit
		b = binary.LittleEndian.AppendUint64(b, uint64(p.At.Unix()))
		b = binary.LittleEndian.AppendUint32(b, uint32(p.At.Nanosecond()))
		st.tOK = false
	case !st.tOK:
		hdr |= timeNanos << hdrTimeBit
		b = binary.LittleEndian.AppendUint64(b, uint64(ns))
		st.t, st.d, st.tOK = ns, 0, true
	default:
		// Differences wrap around, and unwrap exactly.
		d := ns - st.t
		if dod := d - st.d; dod != 0 {
			hdr |= timeDelta << hdrTimeBit
			unit := 0
			for unit < 3 && dod%timeUnits[unit+1] == 0 {
				unit++
			}
			b = protowire.AppendVarint(b, zigzag(dod/timeUnits[unit])<<2|uint64(unit))
		}
		st.t, st.d = ns, d
	}

	for i, v := range g {
		if *v == nil {
			continue
		}
		cur := math.Float64bits(**v)
		x := cur ^ st.v[i]
		st.v[i] = cur
		if x == 0 {
			continue
		}
		lead := uint8(bits.LeadingZeros64(x) / 8)
		size := 8 - lead - uint8(bits.TrailingZeros64(x)/8)
		if s := st.size[i]; s != 0 && lead >= st.lead[i] && lead+size <= st.lead[i]+s && s <= size+1 {
			hdr |= gaugeWindow << codeShift[i]
			lead, size = st.lead[i], s
		} else {
			hdr |= gaugeNew << codeShift[i]
			b = append(b, lead<<4|size)
			st.lead[i], st.size[i] = lead, size
		}
		for k := range size {
			b = append(b, byte(x>>(8*(7-lead-k))))
		}
	}
	binary.LittleEndian.PutUint16(b[at:], hdr)
	h.tail = b
	st.n++
	return nil
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// Snapshot returns a copy of h that later changes to h do not affect.
func (h *History) Snapshot() History {
	c := *h
	c.tail = append([]byte(nil), h.tail...)
	c.locs = append([]*time.Location(nil), h.locs...)
	return c
}

// Equal reports whether h and o hold the same encoding: then they decode to
// the same points. Histories of the same points appended in another order
// of chunking may differ; Equal errs on the side of "changed".
func (h *History) Equal(o History) bool {
	return h.skip == o.skip && h.per == o.per && h.st == o.st &&
		bytes.Equal(h.closed, o.closed) && bytes.Equal(h.tail, o.tail) &&
		slices.Equal(h.ends, o.ends) && slices.Equal(h.locs, o.locs)
}

// Points decodes the points, oldest first. The known gauges of all points
// share one backing array. The slice has room for one point more: a refresh
// appends its own to the history it diagnoses with.
func (h *History) Points() ([]diagnose.Point, error) {
	total := h.Len()
	out, _, err := h.AppendPoints(make([]diagnose.Point, 0, total+1), make([]float64, 0, numGauges*total))
	return out, err
}

// AppendPoints is Points decoding into memory the caller reuses: it
// appends the points to out and their known gauges to vals, which the
// points' gauges then point into, and returns both (grown as need be, with
// room for one point more in out).
func (h *History) AppendPoints(out []diagnose.Point, vals []float64) ([]diagnose.Point, []float64, error) {
	total := h.Len()
	out = slices.Grow(out, total+1)
	vals = slices.Grow(vals, numGauges*total)
	skip := h.skip
	var err error
	start := uint32(0)
	for _, end := range h.ends {
		if end < start || int(end) > len(h.closed) {
			return nil, nil, errCorrupt
		}
		if out, vals, err = h.decodeChunk(h.closed[start:end], h.per, skip, out, vals, nil); err != nil {
			return nil, nil, err
		}
		start, skip = end, 0
	}
	if out, vals, err = h.decodeChunk(h.tail, h.st.n, skip, out, vals, nil); err != nil {
		return nil, nil, err
	}
	return out, vals, nil
}

// decodeChunk decodes the n points of the chunk b and appends all but the
// first skip to out, their gauges to vals. When final is not nil it is set
// to the state after the last point, as encoding left it.
func (h *History) decodeChunk(b []byte, n, skip int, out []diagnose.Point, vals []float64, final *state) ([]diagnose.Point, []float64, error) {
	var st state
	var scratch diagnose.Point
	for i := range n {
		if len(b) < 2 {
			return nil, nil, errCorrupt
		}
		hdr := binary.LittleEndian.Uint16(b)
		b = b[2:]
		if hdr&hdrFlags != 0 {
			if len(b) < 2 {
				return nil, nil, errCorrupt
			}
			st.flags = binary.LittleEndian.Uint16(b)
			b = b[2:]
			st.status = int32(st.flags >> flagStatBit & 7)
			if st.status == statusEsc {
				if len(b) < 4 {
					return nil, nil, errCorrupt
				}
				st.status = int32(binary.LittleEndian.Uint32(b))
				b = b[4:]
			}
		} else if i == 0 {
			return nil, nil, errCorrupt
		}
		flags := st.flags
		p := &scratch
		if i >= skip {
			out = append(out, diagnose.Point{})
			p = &out[len(out)-1]
		}
		p.Status = llmdiagv1.Status(st.status)
		p.Up = flags&flagUp != 0
		loc := time.UTC
		switch flags >> flagLocBit & 3 {
		case locUTC:
		case locLocal:
			loc = time.Local
		case locOther:
			j, k := protowire.ConsumeVarint(b)
			if k < 0 || j >= uint64(len(h.locs)) {
				return nil, nil, errCorrupt
			}
			b = b[k:]
			loc = h.locs[j]
		default:
			return nil, nil, errCorrupt
		}

		switch hdr >> hdrTimeBit & 3 {
		case timeRaw:
			if len(b) < 12 {
				return nil, nil, errCorrupt
			}
			p.At = time.Unix(int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint32(b[8:])))
			b = b[12:]
			st.tOK = false
		case timeNanos:
			if len(b) < 8 {
				return nil, nil, errCorrupt
			}
			st.t, st.d, st.tOK = int64(binary.LittleEndian.Uint64(b)), 0, true
			b = b[8:]
			p.At = time.Unix(0, st.t)
		case timeDelta:
			v, k := protowire.ConsumeVarint(b)
			if k < 0 || !st.tOK {
				return nil, nil, errCorrupt
			}
			b = b[k:]
			st.d += unzigzag(v>>2) * timeUnits[v&3]
			fallthrough
		case timeSame:
			if !st.tOK {
				return nil, nil, errCorrupt
			}
			st.t += st.d
			p.At = time.Unix(0, st.t)
		}
		if loc == time.UTC {
			p.At = p.At.UTC()
		} else if loc != time.Local {
			p.At = p.At.In(loc)
		}

		ptrs := gauges(p)
		for g := range numGauges {
			if flags&knownBit[g] == 0 {
				continue
			}
			switch hdr >> codeShift[g] & 3 {
			case gaugeSame:
			case gaugeNew:
				if len(b) < 1 {
					return nil, nil, errCorrupt
				}
				st.lead[g], st.size[g] = b[0]>>4, b[0]&15
				b = b[1:]
				fallthrough
			case gaugeWindow:
				lead, size := uint(st.lead[g]), uint(st.size[g])
				if size == 0 || lead+size > 8 || uint(len(b)) < size {
					return nil, nil, errCorrupt
				}
				var x uint64
				if len(b) >= 8 {
					x = binary.BigEndian.Uint64(b) >> (64 - 8*size)
				} else {
					for _, c := range b[:size] {
						x = x<<8 | uint64(c)
					}
				}
				b = b[size:]
				st.v[g] ^= x << (8 * (8 - lead - size))
			default:
				return nil, nil, errCorrupt
			}
			if i >= skip {
				vals = append(vals, math.Float64frombits(st.v[g]))
				*ptrs[g] = &vals[len(vals)-1]
			}
		}
		st.n++
	}
	if final != nil {
		*final = st
	}
	return out, vals, nil
}
