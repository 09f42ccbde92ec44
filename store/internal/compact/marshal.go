package compact

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// History versions: 2 may use E2EP99's bits (history.go), which version 1
// readers would misread; a history without E2EP99 is still written as 1,
// which every reader decodes.
const (
	historyVersion1 = 1
	historyVersion2 = 2
)

// ErrLocation is returned by MarshalBinary for a history holding a time in a
// location other than UTC and Local: such a location is a pointer that does
// not cross processes.
var ErrLocation = errors.New("compact: history time location other than UTC or Local cannot be marshalled")

// MarshalBinary returns the history as portable bytes: a version byte (2
// once a point with E2EP99 was appended, else 1), the
// chunk geometry as varints (points per chunk, points dropped, points in
// the tail, the number of full chunks and each one's length), then the
// chunks' bytes as they are. The encoder's state is not written: Unmarshal
// rebuilds it by decoding the tail.
func (h *History) MarshalBinary() ([]byte, error) {
	if len(h.locs) > 0 {
		return nil, ErrLocation
	}
	b := make([]byte, 0, 8+2*len(h.ends)+len(h.closed)+len(h.tail))
	version := byte(historyVersion1)
	if h.p99 {
		version = historyVersion2
	}
	b = append(b, version)
	b = protowire.AppendVarint(b, uint64(h.per))
	b = protowire.AppendVarint(b, uint64(h.skip))
	b = protowire.AppendVarint(b, uint64(h.st.n))
	b = protowire.AppendVarint(b, uint64(len(h.ends)))
	start := uint32(0)
	for _, end := range h.ends {
		b = protowire.AppendVarint(b, uint64(end-start))
		start = end
	}
	b = append(b, h.closed...)
	return append(b, h.tail...), nil
}

// UnmarshalBinary replaces h with the history b holds, as MarshalBinary
// wrote it; appending to it continues exactly as appending to the original
// would have.
func (h *History) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || (b[0] != historyVersion1 && b[0] != historyVersion2) {
		return fmt.Errorf("%w: history version", errCorrupt)
	}
	p99 := b[0] == historyVersion2
	b = b[1:]
	var vals [4]uint64
	for i := range vals {
		v, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return fmt.Errorf("%w: history header", errCorrupt)
		}
		vals[i], b = v, b[k:]
	}
	per, skip, n, chunks := vals[0], vals[1], vals[2], vals[3]
	if per > maxChunk || n > per || chunks > uint64(len(b)) || (per == 0 && (skip|n|chunks) != 0) || skip > per {
		return fmt.Errorf("%w: history header", errCorrupt)
	}
	ends := make([]uint32, chunks)
	var end uint64
	for i := range ends {
		v, k := protowire.ConsumeVarint(b)
		if k < 0 {
			return fmt.Errorf("%w: history chunk length", errCorrupt)
		}
		b = b[k:]
		end += v
		if end > uint64(len(b)) || end > 1<<32-1 {
			return fmt.Errorf("%w: history chunk length", errCorrupt)
		}
		ends[i] = uint32(end)
	}
	out := History{per: int(per), skip: int(skip), ends: ends, p99: p99}
	if chunks > 0 {
		out.closed = append([]byte(nil), b[:end]...)
	} else {
		out.ends = nil
	}
	if tail := b[end:]; len(tail) > 0 || n > 0 {
		out.tail = append(make([]byte, 0, len(tail)+64), tail...)
		var st state
		if _, _, err := out.decodeChunk(out.tail, int(n), int(n), nil, nil, &st); err != nil {
			return err
		}
		out.st = st
	}
	*h = out
	return nil
}
