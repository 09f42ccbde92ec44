package readmask

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// Mask is a validated, normalized read mask for one message type. The
// zero Mask keeps every field.
type Mask struct {
	key    string
	fields fields
}

// fields maps a kept field to what is kept of it: nil for the whole field.
type fields map[protoreflect.Name]fields

// PathError is a path that names no field of the message.
type PathError struct {
	Path    string
	Message protoreflect.FullName
}

func (e *PathError) Error() string {
	return fmt.Sprintf("path %q is not a field of %s", e.Path, e.Message)
}

// Parse validates paths against of's message type and returns the mask
// they form. No paths make the zero Mask (every field).
func Parse(of proto.Message, paths []string) (Mask, error) {
	if len(paths) == 0 {
		return Mask{}, nil
	}
	fm, err := fieldmaskpb.New(of, paths...)
	if err != nil {
		for _, p := range paths {
			if _, err := fieldmaskpb.New(of, p); err != nil {
				return Mask{}, &PathError{Path: p, Message: of.ProtoReflect().Descriptor().FullName()}
			}
		}
		return Mask{}, err
	}
	fm.Normalize()
	m := Mask{key: strings.Join(fm.GetPaths(), ","), fields: fields{}}
	for _, p := range fm.GetPaths() {
		f := m.fields
		names := strings.Split(p, ".")
		for i, n := range names {
			name := protoreflect.Name(n)
			if i == len(names)-1 {
				f[name] = nil
				break
			}
			next, ok := f[name]
			if !ok {
				next = fields{}
				f[name] = next
			}
			f = next
		}
	}
	return m, nil
}

// All reports whether m keeps every field (no mask, or an empty one).
func (m Mask) All() bool { return m.fields == nil }

// Key is m's normalized paths joined by commas: the same for every mask
// keeping the same fields; "" for the zero Mask.
func (m Mask) Key() string { return m.key }

// Has reports whether m keeps the field at path (dot-separated), wholly or
// in part: the whole message when m is the zero Mask.
func (m Mask) Has(path string) bool {
	if m.All() {
		return true
	}
	f := m.fields
	for n := range strings.SplitSeq(path, ".") {
		sub, ok := f[protoreflect.Name(n)]
		if !ok {
			return false
		}
		if sub == nil {
			return true
		}
		f = sub
	}
	return true
}

// Prune clears every field of msg that m does not keep, and msg's unknown
// fields, in place; the zero Mask leaves msg as it is. msg must be of the
// type m was parsed for.
func (m Mask) Prune(msg proto.Message) {
	if m.All() || msg == nil {
		return
	}
	prune(msg.ProtoReflect(), m.fields)
}

func prune(msg protoreflect.Message, keep fields) {
	if !msg.IsValid() {
		return
	}
	msg.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		sub, ok := keep[fd.Name()]
		switch {
		case !ok:
			msg.Clear(fd)
		case sub != nil:
			// Parse allows paths through singular messages only.
			prune(v.Message(), sub)
		}
		return true
	})
	if msg.GetUnknown() != nil {
		msg.SetUnknown(nil)
	}
}
