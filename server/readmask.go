package server

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/readmask"
)

// Read masks: ListNodes, GetNodeMetrics and DiagnoseNode answer with only
// the fields a request's read_mask names, as paths relative to the
// resource each returns: a Node of ListNodes, the NodeMetrics of
// GetNodeMetrics, the Diagnosis of DiagnoseNode (and "report", its
// rendering). Degraded is always sent when set: an answer from this
// replica's copy says so whatever was asked. No mask, or an empty one, is
// the whole answer.

// maxParsedMasks bounds the read masks kept parsed; a mask beyond them is
// parsed on each call.
const maxParsedMasks = 64

// maskCache keeps read masks parsed, by RPC and paths as the request wrote
// them: a router sends the same mask on every call, and parsing one costs
// more than the rest of a prepared answer's handling.
type maskCache struct {
	mu sync.RWMutex
	m  map[string]readmask.Mask
}

// get returns the mask parse makes of paths for rpc, parsed once while
// there is room.
func (c *maskCache) get(rpc string, paths []string, parse func() (readmask.Mask, error)) (readmask.Mask, error) {
	if len(paths) == 0 {
		return readmask.Mask{}, nil
	}
	var b strings.Builder
	b.WriteString(rpc)
	for _, p := range paths {
		b.WriteByte(0)
		b.WriteString(p)
	}
	key := b.String()
	c.mu.RLock()
	m, ok := c.m[key]
	c.mu.RUnlock()
	if ok {
		return m, nil
	}
	m, err := parse()
	if err != nil {
		return m, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]readmask.Mask{}
	}
	if len(c.m) < maxParsedMasks {
		c.m[key] = m
	}
	return m, nil
}

// answerMask is a request's read_mask over a response whose resource is
// its field named resource: each path p becomes resource.p, except those
// in own (the response's own fields a caller may ask for, such as
// DiagnoseNodeResponse.report); degraded is always kept. An unknown path is
// InvalidArgument naming read_mask and the path as the caller wrote it.
func answerMask(resp proto.Message, resource string, fm *fieldmaskpb.FieldMask, own ...string) (readmask.Mask, error) {
	if len(fm.GetPaths()) == 0 {
		return readmask.Mask{}, nil
	}
	paths := make([]string, 0, len(fm.GetPaths())+1)
	for _, p := range fm.GetPaths() {
		if !slices.Contains(own, p) {
			p = resource + "." + p
		}
		paths = append(paths, p)
	}
	m, err := readmask.Parse(resp, append(paths, "degraded"))
	if pe := (*readmask.PathError)(nil); errors.As(err, &pe) {
		fd := resp.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(resource))
		return readmask.Mask{}, invalid("read_mask", &readmask.PathError{Path: strings.TrimPrefix(pe.Path, resource+"."), Message: fd.Message().FullName()})
	}
	return m, err
}

// nodeMask is ListNodesRequest.read_mask over a Node.
func nodeMask(fm *fieldmaskpb.FieldMask) (readmask.Mask, error) {
	m, err := readmask.Parse(&llmdiagv1.Node{}, fm.GetPaths())
	if err != nil {
		return readmask.Mask{}, invalid("read_mask", err)
	}
	return m, nil
}
