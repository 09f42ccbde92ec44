// Package openapi holds llmdiag's OpenAPI document, llmdiag.v1.yaml: the
// REST surface (the google.api.http options of proto/llmdiag/v1), generated
// by make generate and served at /openapi.yaml.
package openapi

import _ "embed"

// Document is llmdiag.v1.yaml.
//
//go:embed llmdiag.v1.yaml
var Document []byte
