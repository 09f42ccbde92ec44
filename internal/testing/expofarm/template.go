package expofarm

import (
	"bytes"
	"fmt"
	"strconv"
)

// The families a template patches, by the gauge they carry.
const (
	familyWaiting = "vllm:num_requests_waiting"
	familyRunning = "vllm:num_requests_running"
	familyKV      = "vllm:kv_cache_usage_perc"
)

type gaugeKind uint8

const (
	kindWaiting gaugeKind = iota
	kindRunning
	kindKV
	numKinds
)

var patched = map[string]gaugeKind{familyWaiting: kindWaiting, familyRunning: kindRunning, familyKV: kindKV}

// slot is one patched sample value: body[start:end], the rank-th series of
// its family (one per engine core).
type slot struct {
	start, end int
	kind       gaugeKind
	rank       int
}

// template is a body cut around the values it patches.
type template struct {
	prefix, suffix []byte // static: before the first slot, after the last
	// region is the text from the first slot to the last one's end;
	// pieces[i] is the static text of region before slots[i].
	pieces [][]byte
	slots  []slot
	// cores is the number of series of each family (engine cores).
	cores [numKinds]int
	// maxRegion bounds a rendered region.
	maxRegion int
}

// maxValueLen bounds one rendered value: an int up to maxRequests, or a
// float64 in 0..1 formatted shortest ('g', -1).
const maxValueLen = 32

// newTemplate cuts body around the sample values of the three routing
// gauge families. Each family must be there, its samples without a
// timestamp; its series are taken as the node's engine cores, which share
// the node's Waiting and Running and all show its KVUsage.
func newTemplate(body []byte) (*template, error) {
	t := &template{}
	var slots []slot
	for pos := 0; pos < len(body); {
		end := bytes.IndexByte(body[pos:], '\n')
		if end < 0 {
			end = len(body)
		} else {
			end += pos
		}
		line := body[pos:end]
		if len(line) > 0 && line[0] != '#' {
			name, rest := splitName(line)
			if kind, ok := patched[string(name)]; ok {
				vs, ve, err := valueSpan(line, len(line)-len(rest))
				if err != nil {
					return nil, fmt.Errorf("template: %s: %w", name, err)
				}
				slots = append(slots, slot{start: pos + vs, end: pos + ve, kind: kind, rank: t.cores[kind]})
				t.cores[kind]++
			}
		}
		pos = end + 1
	}
	for k, fam := range []string{familyWaiting, familyRunning, familyKV} {
		if t.cores[k] == 0 {
			return nil, fmt.Errorf("template: no %s sample in the body", fam)
		}
	}
	t.slots = slots
	t.prefix = body[:slots[0].start]
	t.suffix = body[slots[len(slots)-1].end:]
	prev := slots[0].start
	region := 0
	for _, s := range slots {
		t.pieces = append(t.pieces, body[prev:s.start])
		region += s.start - prev
		prev = s.end
	}
	t.maxRegion = region + len(slots)*maxValueLen
	return t, nil
}

// splitName splits a sample line into its metric name and the rest.
func splitName(line []byte) (name, rest []byte) {
	i := bytes.IndexAny(line, "{ \t")
	if i < 0 {
		return line, nil
	}
	return line[:i], line[i:]
}

// valueSpan finds the value of a sample line whose label set (if any)
// starts at from: the token after it, which must end the line.
func valueSpan(line []byte, from int) (start, end int, err error) {
	i := from
	if i < len(line) && line[i] == '{' {
		if i = labelsEnd(line, i); i < 0 {
			return 0, 0, fmt.Errorf("unterminated label set in %q", line)
		}
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	start = i
	for i < len(line) && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' {
		i++
	}
	end = i
	if start == end {
		return 0, 0, fmt.Errorf("no value in %q", line)
	}
	if _, err := strconv.ParseFloat(string(line[start:end]), 64); err != nil {
		return 0, 0, fmt.Errorf("value of %q: %w", line, err)
	}
	if rest := bytes.TrimRight(line[end:], " \t\r"); len(rest) > 0 {
		return 0, 0, fmt.Errorf("timestamp in %q: patched samples take none", line)
	}
	return start, end, nil
}

// labelsEnd is the index just past the label set opening at line[open],
// -1 if it does not close.
func labelsEnd(line []byte, open int) int {
	quoted := false
	for i := open + 1; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i + 1
		}
	}
	return -1
}

// share is core rank's part of total over cores: as even as integers
// allow, the first ones taking the remainder.
func share(total, cores, rank int) int {
	n := total / cores
	if rank < total%cores {
		n++
	}
	return n
}

// render appends the region with g's values to dst (of capacity
// maxRegion, so it does not grow).
func (t *template) render(dst []byte, g Gauges) []byte {
	for i, s := range t.slots {
		dst = append(dst, t.pieces[i]...)
		switch s.kind {
		case kindWaiting:
			dst = strconv.AppendInt(dst, int64(share(g.Waiting, t.cores[s.kind], s.rank)), 10)
		case kindRunning:
			dst = strconv.AppendInt(dst, int64(share(g.Running, t.cores[s.kind], s.rank)), 10)
		case kindKV:
			dst = strconv.AppendFloat(dst, g.KVUsage, 'g', -1, 64)
		}
	}
	return dst
}
