package server

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/internal/refusal"
)

// boundedGzip is the gzip decompression requests are read with: it stops
// with ResourceExhausted once more than limit bytes came out. connect-go
// reads one byte past its read limit to see a message is too large, then
// inflates the rest only to say by how much (a 1 MiB body of zeros inflated
// to 1 GiB); this decompressor refuses at limit+1 bytes instead, a refusal
// of reason size on refusals (nil: not counted).
func boundedGzip(limit int64, refusals *refusal.Log) connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &limitedGzip{limit: limit, refusals: refusals} },
		func() connect.Compressor { return gzip.NewWriter(io.Discard) },
	)
}

// errInflated ends a decompressed request past its limit. connect-go reads
// past the limit only to measure the message, and answers ResourceExhausted
// whatever this error is.
var errInflated = errors.New("decompressed request too large")

// limitedGzip is a connect.Decompressor that yields at most limit+1 bytes.
type limitedGzip struct {
	zr    *gzip.Reader
	limit int64
	n     int64
	// out counts the bytes it ever inflated (tests read it).
	out *int64
	// refusals counts a message inflated past limit, once (refused says
	// it was).
	refusals *refusal.Log
	refused  bool
}

func (g *limitedGzip) Read(p []byte) (int, error) {
	if g.zr == nil {
		return 0, io.ErrUnexpectedEOF
	}
	if g.n > g.limit {
		err := fmt.Errorf("%w: more than %d bytes", errInflated, g.limit)
		if !g.refused {
			g.refused = true
			g.refusals.Refuse(refusal.Size, "request refused", "reason", err.Error())
		}
		return 0, err
	}
	if room := g.limit + 1 - g.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := g.zr.Read(p)
	g.n += int64(n)
	if g.out != nil {
		*g.out += int64(n)
	}
	return n, err
}

func (g *limitedGzip) Reset(r io.Reader) error {
	g.n = 0
	g.refused = false
	if g.zr == nil {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		g.zr = zr
		return nil
	}
	return g.zr.Reset(r)
}

func (g *limitedGzip) Close() error {
	if g.zr == nil {
		return nil
	}
	return g.zr.Close()
}
