// Package openapidoc finishes the OpenAPI document protoc-gen-openapi
// generates from proto/ (make generate): what the generator cannot say
// from the proto alone.
//
//   - A double is sent as protojson writes it: a JSON number, or the
//     string "NaN", "Infinity" or "-Infinity" (a percentile of an empty
//     window is NaN; the last bucket bound is +Inf). Every double of a
//     component schema becomes oneOf that number and those strings.
//   - Every operation needs a bearer token (serve --auth-tokens): the
//     document declares the scheme and requires it.
//   - Proto comments keep the space after "//" on every line but the
//     first; descriptions lose it.
//
// The result is deterministic: the same input gives the same bytes.
package openapidoc
