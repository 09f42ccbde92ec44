// Package readmask trims an answer to the fields a caller asked for: the
// read_mask of a request, as Google's API guidance on partial responses
// describes it.
//
// What it promises: a Mask made by Parse names only fields that exist (an
// unknown path is a *PathError naming it, and nothing is trimmed); Prune
// leaves set exactly the fields the mask names, and everything under
// them; the zero Mask (no mask, or an empty one) keeps every field, so
// Prune is then a no-op and the answer is byte for byte the unmasked one.
//
// Paths are the fieldmaskpb rules: field names (not JSON names) separated
// by dots, through singular message fields only; a repeated or map field
// may end a path, and is kept whole. Parse normalizes a mask
// (fieldmaskpb.FieldMask.Normalize: sorted, duplicates and paths under
// another dropped), so two masks that keep the same fields have the same
// Key, which callers use to share what they prepare for a mask shape.
package readmask
