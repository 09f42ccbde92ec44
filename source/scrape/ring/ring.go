package ring

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/llmdiag/llmdiag/sample"
)

// Options bound a Ring. Zero values take the defaults shown.
type Options struct {
	// Full is how far back from the newest sample every sample is kept
	// (default 6m: the default 5m window and a minute more).
	Full time.Duration
	// MaxFull bounds the samples kept whole (default 720).
	MaxFull int
	// Keep is how far back from the newest sample anything is kept
	// (default 1h).
	Keep time.Duration
	// Step is the least spacing of the samples kept beyond Full
	// (default 1m).
	Step time.Duration
}

func (o *Options) defaults() {
	if o.Full <= 0 {
		o.Full = 6 * time.Minute
	}
	if o.MaxFull <= 0 {
		o.MaxFull = 720
	}
	if o.Keep <= 0 {
		o.Keep = time.Hour
	}
	if o.Step <= 0 {
		o.Step = time.Minute
	}
}

// BlockLen is the most rows a block of samples kept whole holds: an append
// re-encodes at most this many, and a read decodes at most this many.
const BlockLen = 16

// coarseLen is the most rows a block of thinned samples holds.
const coarseLen = 60

// Ring is one node's samples. It is safe for concurrent use.
type Ring struct {
	opts Options

	mu sync.Mutex
	// newest is the sample appended last, as it was given.
	newest *sample.Sample
	// blocks are oldest first: the thinned ones, then those kept whole.
	blocks []*block
	// last is the meta of the row appended last, shared by the rows after
	// it that have the same.
	last *meta
}

// New returns an empty Ring.
func New(opts Options) *Ring {
	opts.defaults()
	return &Ring{opts: opts}
}

// block is rows of one layout, each column one XOR chunk.
type block struct {
	layout *layout
	times  []int64 // UnixNano of each row
	metas  []run
	// data holds the columns' chunks one after the other; column c ends at
	// ends[c], or at wide[c] when data is longer than ends can say.
	data   []byte
	ends   []uint16
	wide   []uint32
	coarse bool // thinned
}

// run is the meta of the rows from row from on, up to the next run.
type run struct {
	from int
	m    *meta
}

func (b *block) meta(i int) *meta {
	m := b.metas[0].m
	for _, r := range b.metas[1:] {
		if r.from > i {
			break
		}
		m = r.m
	}
	return m
}

// encode makes a block of l from cols (cols[c] holds column c's value of
// every row), times and metas.
func encode(l *layout, cols [][]float64, times []int64, metas []run, coarse bool) *block {
	b := &block{layout: l, times: times, metas: metas, coarse: coarse}
	ends := make([]uint32, len(cols))
	ch := chunkenc.NewXORChunk()
	buf := ch.Bytes()
	size := 0
	for c, vals := range cols {
		buf = buf[:2]
		buf[0], buf[1] = 0, 0
		ch.Reset(buf)
		app, _ := ch.Appender() // an empty XOR chunk's appender: no error
		for i, v := range vals {
			app.Append(0, int64(i), v)
		}
		buf = ch.Bytes()
		b.data = append(b.data, buf...)
		size += len(buf)
		ends[c] = uint32(len(b.data))
	}
	if cap(b.data) > size {
		b.data = append([]byte(nil), b.data...)
	}
	if size > math.MaxUint16 {
		b.wide = ends
		return b
	}
	b.ends = make([]uint16, len(ends))
	for c, e := range ends {
		b.ends[c] = uint16(e)
	}
	return b
}

// cols is the number of columns of b.
func (b *block) cols() int { return len(b.ends) + len(b.wide) }

// end is where column c ends in b.data.
func (b *block) end(c int) uint32 {
	if b.wide != nil {
		return b.wide[c]
	}
	return uint32(b.ends[c])
}

// chunk is column c's chunk of b, read through ch.
func (b *block) chunk(ch *chunkenc.XORChunk, c int) *chunkenc.XORChunk {
	start := uint32(0)
	if c > 0 {
		start = b.end(c - 1)
	}
	ch.Reset(b.data[start:b.end(c)])
	return ch
}

// columns decodes every column of b.
func (b *block) columns() [][]float64 {
	cols := make([][]float64, b.cols())
	vals := make([]float64, len(cols)*len(b.times))
	ch := &chunkenc.XORChunk{}
	var it chunkenc.Iterator
	for c := range cols {
		it = b.chunk(ch, c).Iterator(it)
		col := vals[c*len(b.times) : c*len(b.times) : (c+1)*len(b.times)]
		for it.Next() != chunkenc.ValNone {
			_, v := it.At()
			col = append(col, v)
		}
		cols[c] = col
	}
	return cols
}

// row decodes row i of b.
func (b *block) row(i int) []float64 {
	row := make([]float64, b.cols())
	ch := &chunkenc.XORChunk{}
	var it chunkenc.Iterator
	for c := range row {
		it = b.chunk(ch, c).Iterator(it)
		for range i + 1 {
			it.Next()
		}
		_, row[c] = it.At()
	}
	return row
}

func (b *block) sample(i int) *sample.Sample {
	return b.layout.sampleOf(b.times[i], b.meta(i), b.row(i))
}

// Append records s, the node's newest sample, and thins and drops the
// samples it makes old. s must not change afterwards.
func (r *Ring) Append(s *sample.Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := metaOf(s)
	if r.last != nil && r.last.equal(m) {
		m = r.last
	}
	r.last = m
	at := s.At.UnixNano()
	f := fixed(s)
	var tail *block
	if n := len(r.blocks); n > 0 && !r.blocks[n-1].coarse {
		tail = r.blocks[n-1]
	}
	fits := tail != nil && tail.layout.fits(f, s)
	if fits && len(tail.times) < BlockLen {
		cols := tail.columns()
		row := make([]float64, tail.layout.cols)
		tail.layout.row(f, s, row)
		for c := range cols {
			cols[c] = append(cols[c], row[c])
		}
		metas := tail.metas
		if metas[len(metas)-1].m != m {
			metas = append(metas[:len(metas):len(metas)], run{from: len(tail.times), m: m})
		}
		times := make([]int64, len(tail.times)+1)
		copy(times, tail.times)
		times[len(tail.times)] = at
		r.blocks[len(r.blocks)-1] = encode(tail.layout, cols, times, metas, false)
	} else {
		var l *layout
		switch {
		case fits:
			l = tail.layout
		case tail != nil:
			l = layoutOf(f, s, tail.layout)
		default:
			l = layoutOf(f, s, nil)
		}
		row := make([]float64, l.cols)
		l.row(f, s, row)
		cols := make([][]float64, l.cols)
		for c := range cols {
			cols[c] = row[c : c+1 : c+1]
		}
		r.blocks = append(r.blocks, encode(l, cols, []int64{at}, []run{{0, m}}, false))
	}
	r.newest = s
	r.age(at)
}

// age thins the blocks kept whole that are past Full (or past MaxFull
// rows) into the coarse ones, and drops the blocks past Keep.
func (r *Ring) age(newest int64) {
	full, first := 0, len(r.blocks)
	for i := len(r.blocks) - 1; i >= 0 && !r.blocks[i].coarse; i-- {
		full += len(r.blocks[i].times)
		first = i
	}
	for first < len(r.blocks)-1 {
		b := r.blocks[first]
		if newest-b.times[len(b.times)-1] <= int64(r.opts.Full) && full <= r.opts.MaxFull {
			break
		}
		full -= len(b.times)
		r.blocks = append(r.blocks[:first], r.blocks[first+1:]...)
		first = r.thin(b, first, newest)
	}
	drop := 0
	for drop < len(r.blocks)-1 && newest-r.blocks[drop].times[len(r.blocks[drop].times)-1] > int64(r.opts.Keep) {
		drop++
	}
	if drop > 0 {
		r.blocks = append(r.blocks[:0:0], r.blocks[drop:]...)
	}
}

// thin adds to the coarse blocks, which end before index at, the rows of
// b that are kept beyond Full: up, within Keep, and the first of their
// Step (of Unix time, as Step divides it: each minute's first with the
// default). It returns the index of the first block kept whole.
func (r *Ring) thin(b *block, at int, newest int64) int {
	var prev *block
	if at > 0 {
		prev = r.blocks[at-1]
	}
	last := int64(0)
	if prev != nil {
		last = prev.times[len(prev.times)-1]
	}
	var keep []int
	for i, t := range b.times {
		if !b.meta(i).up || newest-t > int64(r.opts.Keep) || (prev != nil || len(keep) > 0) && t/int64(r.opts.Step) == last/int64(r.opts.Step) {
			continue
		}
		keep = append(keep, i)
		last = t
	}
	if len(keep) == 0 {
		return at
	}
	cols := b.columns()
	// Join the coarse block before when it has room and the same layout.
	var times []int64
	var metas []run
	var kept [][]float64
	if prev != nil && len(prev.times)+len(keep) <= coarseLen && prev.layout == b.layout {
		kept = prev.columns()
		times = append(times, prev.times...)
		metas = append(metas, prev.metas...)
		at--
		r.blocks = append(r.blocks[:at], r.blocks[at+1:]...)
	} else {
		kept = make([][]float64, len(cols))
	}
	for _, i := range keep {
		for c := range cols {
			kept[c] = append(kept[c], cols[c][i])
		}
		m := b.meta(i)
		if len(metas) == 0 || metas[len(metas)-1].m != m {
			metas = append(metas, run{from: len(times), m: m})
		}
		times = append(times, b.times[i])
	}
	nb := encode(b.layout, kept, times, metas, true)
	r.blocks = append(r.blocks[:at], append([]*block{nb}, r.blocks[at:]...)...)
	return at + 1
}

// point names one row kept.
type point struct {
	b *block
	i int
}

// Len is the number of samples kept.
func (r *Ring) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	r.each(func(point, int64) { n++ })
	return n
}

// Oldest is the time of the oldest sample kept; zero when none is.
func (r *Ring) Oldest() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Time
	r.each(func(_ point, t int64) {
		if oldest.IsZero() {
			oldest = time.Unix(0, t)
		}
	})
	return oldest
}

// Samples reads back every sample kept, oldest first (the newest as it
// was given).
func (r *Ring) Samples() []*sample.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*sample.Sample
	r.each(func(p point, _ int64) { out = append(out, r.read(p)) })
	return out
}

// Newest is the sample appended last, as it was given; nil before the
// first.
func (r *Ring) Newest() *sample.Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.newest
}

// each calls f with every row kept, oldest first: rows past Keep (in a
// block not yet dropped) are not.
func (r *Ring) each(f func(point, int64)) {
	if r.newest == nil {
		return
	}
	cutoff := r.newest.At.UnixNano() - int64(r.opts.Keep)
	for _, b := range r.blocks {
		for i, t := range b.times {
			if t >= cutoff {
				f(point{b, i}, t)
			}
		}
	}
}

// Window returns the samples a window is computed from, as metrics.Pick
// chooses them among the samples kept at or before until (all of them
// when until is zero): newest, the latest of those, and base, the latest
// up sample at or before newest.At − window, or the oldest up sample
// before newest when none is; base is nil when window <= 0 (the lifetime)
// or no older up sample is kept. Both are nil when no sample is kept at
// or before until. The newest sample appended is returned as it was
// given; the others are read back from their columns.
func (r *Ring) Window(until time.Time, window time.Duration) (newest, base *sample.Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var (
		limit   = int64(0)
		bounded = !until.IsZero()
		n       point
		nt      int64
		found   bool
	)
	if bounded {
		limit = until.UnixNano()
	}
	r.each(func(p point, t int64) {
		if bounded && t > limit {
			return
		}
		if !found || t > nt {
			n, nt, found = p, t, true
		}
	})
	if !found {
		return nil, nil
	}
	newest = r.read(n)
	if window <= 0 {
		return newest, nil
	}
	cutoff := newest.At.Add(-window).UnixNano()
	var b, oldest point
	var bt, ot int64
	var haveB, haveO bool
	r.each(func(p point, t int64) {
		if bounded && t > limit || t >= nt || !p.b.meta(p.i).up {
			return
		}
		if !haveO || t < ot {
			oldest, ot, haveO = p, t, true
		}
		if t <= cutoff && (!haveB || t > bt) {
			b, bt, haveB = p, t, true
		}
	})
	switch {
	case haveB:
		base = r.read(b)
	case haveO:
		base = r.read(oldest)
	}
	return newest, base
}

// read is the sample of p: the newest as given when p is its row.
func (r *Ring) read(p point) *sample.Sample {
	last := r.blocks[len(r.blocks)-1]
	if p.b == last && p.i == len(last.times)-1 {
		return r.newest
	}
	return p.b.sample(p.i)
}
