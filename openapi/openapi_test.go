package openapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/openapi"
)

// TestDocumentValid: the committed document is valid OpenAPI, and its
// operations are exactly the google.api.http options of the
// DiagnosisService (make generate keeps them in step; make checkgenerate
// fails when it was not run).
func TestDocumentValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid document: %v", err)
	}
	var inDoc []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			inDoc = append(inDoc, method+" "+path+" "+op.OperationID)
		}
	}
	var inProto []string
	sd := llmdiagv1.File_llmdiag_v1_diagnosis_proto.Services().ByName("DiagnosisService")
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
		if rule == nil {
			if !m.IsStreamingServer() {
				t.Errorf("%s has no google.api.http option: every unary read has a REST path", m.Name())
			}
			continue
		}
		get := rule.GetGet()
		if get == "" {
			t.Errorf("%s: google.api.http is not a GET: %v", m.Name(), rule)
			continue
		}
		inProto = append(inProto, http.MethodGet+" "+get+" DiagnosisService_"+string(m.Name()))
	}
	slices.Sort(inDoc)
	slices.Sort(inProto)
	if !slices.Equal(inDoc, inProto) {
		t.Errorf("document operations:\n%s\nproto's google.api.http options:\n%s\n(run make generate)", strings.Join(inDoc, "\n"), strings.Join(inProto, "\n"))
	}
	if _, ok := doc.Components.SecuritySchemes["bearer"]; !ok || len(doc.Security) == 0 {
		t.Error("the document neither declares nor requires the bearer scheme")
	}
}
