package server

import (
	"errors"
	"slices"
	"strings"

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
