package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
	"github.com/llmdiag/llmdiag/openapi"
)

// routerToken is a router's token in the tests' tokens file.
const routerToken = "router-token-0123456789abcdef"

// node is a node of the seed fleet.
const node = "deepseek-v4-0"

// serveSeed starts the seed fleet and serve in front of it, with a reader
// and a router token, and waits for a verdict of every node. It returns
// serve's base URL and a Connect client holding the reader's token.
func serveSeed(t *testing.T) (string, llmdiagv1connect.DiagnosisServiceClient) {
	t.Helper()
	dir := t.TempDir()
	fleetPath := filepath.Join(dir, "fleet.yaml")
	fleet := clitest.Sim(t, "seed", fleetPath)
	tokens := clitest.WriteFile(t, "tokens.yaml", "tokens:\n"+
		"  - {name: grafana, role: reader, token: "+clitest.ReaderToken+"}\n"+
		"  - {name: envoy, role: router, token: "+routerToken+"}\n")
	addr := testkit.FreeAddr(t)
	clitest.Background(t, nil, "serve", "--listen", addr, "--fleet", fleetPath, "--interval", "1s",
		"--auth-tokens", tokens, "--rate-limit", "1e6", "--rate-burst", "1000000", "--log-level", "warn")
	base := "http://" + addr
	c := llmdiagv1connect.NewDiagnosisServiceClient(&http.Client{
		Transport: testkit.Bearer{Token: clitest.ReaderToken, Next: http.DefaultTransport},
		Timeout:   10 * time.Second,
	}, base)
	var last string
	clitest.WaitFor(t, "a verdict of every node of the seed fleet", 2*time.Minute, func() bool {
		resp, err := c.ListNodes(context.Background(), connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
		if err != nil {
			last = err.Error()
			return false
		}
		last = protojson.Format(resp.Msg)
		if len(resp.Msg.GetNodes()) != len(fleet.Nodes) {
			return false
		}
		for _, n := range resp.Msg.GetNodes() {
			if n.GetStatus() == llmdiagv1.Status_STATUS_UNSPECIFIED {
				return false
			}
			// A verdict of a scrape with its histograms, not one of a
			// first scrape still running.
			m, err := c.GetNodeMetrics(context.Background(), connect.NewRequest(&llmdiagv1.GetNodeMetricsRequest{Node: n.GetId()}))
			if err != nil {
				last = err.Error()
				return false
			}
			if last = protojson.Format(m.Msg); !m.Msg.GetMetrics().GetUp() || len(m.Msg.GetMetrics().GetTtft().GetBucketBounds()) == 0 {
				return false
			}
		}
		return true
	}, &last)
	return base, c
}

// get sends one GET of path (escaped, with its query) with token as a
// bearer token unless it is "", and returns the status and body.
func get(t *testing.T, base, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// rpcCodes is the google.rpc.Code a REST error body holds for its status.
var rpcCodes = map[int]int32{
	http.StatusBadRequest:       int32(connect.CodeInvalidArgument),
	http.StatusUnauthorized:     int32(connect.CodeUnauthenticated),
	http.StatusForbidden:        int32(connect.CodePermissionDenied),
	http.StatusNotFound:         int32(connect.CodeNotFound),
	http.StatusMethodNotAllowed: int32(connect.CodeUnimplemented),
}

// restCase is one request of TestRESTAgainstOpenAPI.
type restCase struct {
	name   string
	method string // GET unless set
	path   string // escaped, with its query
	token  string
	code   int
	// reqErr, when set, is what kin-openapi's request validator must say
	// of the request: the document itself refuses it, as serve does.
	reqErr string
	// body is a substring the answer must hold (for an error: its message).
	body string
}

// TestRESTAgainstOpenAPI sends the REST reads to serve, on the seed fleet,
// and validates each request and each answer, success or error, against
// the committed OpenAPI document; every operation of the document must be
// answered 2xx by at least one case.
func TestRESTAgainstOpenAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: REST reads on the simulated seed fleet, about half a minute under -race")
	}
	t.Parallel()
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document)
	if err != nil {
		t.Fatalf("loading openapi/llmdiag.v1.yaml: %v", err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("openapi/llmdiag.v1.yaml does not validate: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// The document lets an object hold properties it does not name: a
	// field served but missing from the document would pass. A second copy
	// closes every object that names its properties, and answers are
	// validated against both.
	closed, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	closeObjects(closed)
	if err := closed.Validate(ctx); err != nil {
		t.Fatalf("the document with its objects closed: %v", err)
	}
	closedRouter, err := legacy.NewRouter(closed)
	if err != nil {
		t.Fatal(err)
	}
	statusSchema := doc.Components.Schemas["Status"]
	if statusSchema == nil || statusSchema.Value == nil {
		t.Fatal("the document has no components.schemas.Status")
	}

	base, _ := serveSeed(t)

	// The document served is the one committed, to anyone.
	if code, body := get(t, base, "/openapi.yaml", ""); code != http.StatusOK || !bytes.Equal(body, openapi.Document) {
		t.Errorf("GET /openapi.yaml: HTTP %d, %d bytes; want 200 and the %d bytes of openapi/llmdiag.v1.yaml", code, len(body), len(openapi.Document))
	}

	const (
		reader    = clitest.ReaderToken
		noToken   = "security requirements failed"
		notInEnum = "value is not one of the allowed values"
	)
	stranger := "ns/pod:8000" // unknown to the fleet, a slash and a colon in it
	nodeURL := "/v1/nodes/" + url.PathEscape(node)
	strangerURL := "/v1/nodes/" + url.PathEscape(stranger)
	cases := []restCase{
		// ListNodes
		{name: "ListNodes", path: "/v1/nodes", token: reader, code: 200, body: `"id":"` + node + `"`},
		{name: "ListNodes, every filter", path: "/v1/nodes?model=deepseek-v4&engine=ENGINE_VLLM&pageSize=1&status=STATUS_OK&readMask=id,status", token: reader, code: 200},
		{name: "ListNodes, a page of 2", path: "/v1/nodes?pageSize=2", token: reader, code: 200, body: `"nextPageToken":`},
		{name: "ListNodes, bad page token", path: "/v1/nodes?pageToken=nope", token: reader, code: 400},
		{name: "ListNodes, bad enum", path: "/v1/nodes?engine=ENGINE_NOPE", token: reader, code: 400, reqErr: notInEnum, body: "ENGINE_NOPE"},
		{name: "ListNodes, unknown parameter", path: "/v1/nodes?colour=red", token: reader, code: 400, body: "colour"},
		{name: "ListNodes, unknown mask path", path: "/v1/nodes?readMask=nope", token: reader, code: 400, body: "nope"},
		{name: "ListNodes, no token", path: "/v1/nodes", code: 401, reqErr: noToken},
		{name: "ListNodes, unknown token", path: "/v1/nodes", token: "x-0123456789abcdefghij", code: 401},
		// GetNode
		{name: "GetNode", path: nodeURL, token: reader, code: 200, body: `"id":"` + node + `"`},
		{name: "GetNode, masked", path: nodeURL + "?readMask=id,status", token: reader, code: 200},
		{name: "GetNode, router", path: nodeURL, token: routerToken, code: 200},
		{name: "GetNode, unknown node with a slash", path: strangerURL, token: reader, code: 404, body: stranger},
		{name: "GetNode, no token", path: nodeURL, code: 401, reqErr: noToken},
		// GetNodeMetrics: bucket bounds end with +Inf, written "Infinity".
		{name: "GetNodeMetrics", path: nodeURL + "/metrics", token: reader, code: 200, body: `"Infinity"`},
		{name: "GetNodeMetrics, window 1m, masked", path: nodeURL + "/metrics?window=1m&readMask=ttft,queue", token: reader, code: 200},
		{name: "GetNodeMetrics, invalid window", path: nodeURL + "/metrics?window=fortnight", token: reader, code: 400, body: "fortnight"},
		{name: "GetNodeMetrics, offset not a duration", path: nodeURL + "/metrics?offset=yesterday", token: reader, code: 400, reqErr: "string doesn't match the regular expression"},
		{name: "GetNodeMetrics, unknown node with a slash", path: strangerURL + "/metrics", token: reader, code: 404, body: stranger},
		// DiagnoseNode
		{name: "DiagnoseNode, Chinese text", path: nodeURL + "/diagnosis?language=LANGUAGE_ZH&format=REPORT_FORMAT_TEXT&window=1m", token: reader, code: 200, body: `"language":"LANGUAGE_ZH"`},
		{name: "DiagnoseNode, masked", path: nodeURL + "/diagnosis?readMask=routable,loadScore,status,rootCause,report", token: reader, code: 200},
		{name: "DiagnoseNode, bad language", path: nodeURL + "/diagnosis?language=LANGUAGE_KLINGON", token: reader, code: 400, reqErr: notInEnum, body: "LANGUAGE_KLINGON"},
		{name: "DiagnoseNode, unknown node with a slash", path: strangerURL + "/diagnosis", token: reader, code: 404, body: stranger},
		// GetNodeHistory
		{name: "GetNodeHistory", path: nodeURL + "/history", token: reader, code: 200, body: `"points":[`},
		{name: "GetNodeHistory, limit 1", path: nodeURL + "/history?limit=1", token: reader, code: 200},
		{name: "GetNodeHistory, limit -1", path: nodeURL + "/history?limit=-1", token: reader, code: 400, body: "limit"},
		{name: "GetNodeHistory, limit not a number", path: nodeURL + "/history?limit=three", token: reader, code: 400, reqErr: "value three: an invalid integer", body: "limit"},
		{name: "GetNodeHistory, unknown node with a slash", path: strangerURL + "/history", token: reader, code: 404, body: stranger},
		// GetRoutability: the router role only.
		{name: "GetRoutability, router", path: nodeURL + "/routable", token: routerToken, code: 200, body: `"node":"` + node + `"`},
		{name: "GetRoutability, reader", path: nodeURL + "/routable", token: reader, code: 403},
		{name: "GetRoutability, no token", path: nodeURL + "/routable", code: 401, reqErr: noToken},
		{name: "GetRoutability, unknown node with a slash", path: strangerURL + "/routable", token: routerToken, code: 404, body: stranger},
		// ComparePercentiles
		{name: "ComparePercentiles", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_TTFT", token: reader, code: 200, body: `"rows":[`},
		{name: "ComparePercentiles, by model, two quantiles", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_E2E&groupBy=GROUP_BY_MODEL&quantiles=0.5&quantiles=0.9&window=1m", token: reader, code: 200},
		{name: "ComparePercentiles, two nodes", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_TTFT&nodes=" + node + "&nodes=glm-4.6-0", token: reader, code: 200},
		{name: "ComparePercentiles, quantile out of range", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_TTFT&quantiles=1.5", token: reader, code: 400, body: "1.5"},
		{name: "ComparePercentiles, bad metric", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_NOPE", token: reader, code: 400, reqErr: notInEnum, body: "LATENCY_METRIC_NOPE"},
		{name: "ComparePercentiles, by label without one", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_TTFT&groupBy=GROUP_BY_LABEL", token: reader, code: 400, body: "label"},
		{name: "ComparePercentiles, unknown node with a slash", path: "/v1/percentiles:compare?metric=LATENCY_METRIC_TTFT&nodes=" + url.QueryEscape(stranger), token: reader, code: 404, body: stranger},
		// Outside the document: no route, the error body still a Status.
		{name: "unknown path", path: "/v1/clusters", token: reader, code: 404, body: "/v1/clusters"},
		{name: "POST", method: http.MethodPost, path: "/v1/nodes", token: reader, code: 405},
	}

	auth := func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		if in.SecuritySchemeName != "bearer" || in.SecurityScheme.Type != "http" || in.SecurityScheme.Scheme != "bearer" {
			return fmt.Errorf("unexpected security scheme %q", in.SecuritySchemeName)
		}
		h := in.RequestValidationInput.Request.Header.Get("Authorization")
		if tok, ok := strings.CutPrefix(h, "Bearer "); !ok || tok == "" {
			return errors.New("no bearer token in Authorization")
		}
		return nil
	}
	opts := &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true, AuthenticationFunc: auth}
	answered := map[string][]string{} // "GET /v1/nodes" → the cases answering it 2xx
	invalid := 0
	for _, c := range cases {
		method := c.method
		if method == "" {
			method = http.MethodGet
		}
		req, err := http.NewRequestWithContext(ctx, method, base+c.path, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		route, params, routeErr := findRoute(router, req)
		var in *openapi3filter.RequestValidationInput
		if routeErr == nil {
			in = &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
			err := openapi3filter.ValidateRequest(ctx, in)
			switch {
			case c.reqErr == "" && err != nil:
				t.Errorf("%s: the request does not validate against the document: %v", c.name, err)
			case c.reqErr != "" && (err == nil || !strings.Contains(err.Error(), c.reqErr)):
				t.Errorf("%s: request validation: %v; want an error holding %q", c.name, err, c.reqErr)
			}
		} else if c.code/100 == 2 || c.reqErr != "" {
			t.Errorf("%s: %s %s has no route in the document: %v", c.name, method, req.URL.Path, routeErr)
			continue
		}

		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.StatusCode != c.code {
			t.Errorf("%s: %s %s: HTTP %d %s, want %d", c.name, method, c.path, resp.StatusCode, body, c.code)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", c.name, ct)
		}
		if !strings.Contains(string(body), c.body) {
			t.Errorf("%s: body %s, want %q in it", c.name, body, c.body)
		}
		if in != nil {
			err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in,
				Status:                 resp.StatusCode,
				Header:                 resp.Header,
				Body:                   io.NopCloser(bytes.NewReader(body)),
				Options:                opts,
			})
			if err != nil {
				invalid++
				t.Errorf("%s: %s %s: the answer (HTTP %d) does not validate against the document:\n%v\nbody: %.2000s", c.name, method, c.path, resp.StatusCode, err, body)
			} else if err := validateClosed(ctx, closedRouter, req, resp, body, opts); err != nil {
				invalid++
				t.Errorf("%s: %s %s: the answer (HTTP %d) holds a property the document does not name:\n%v\nbody: %.2000s", c.name, method, c.path, resp.StatusCode, err, body)
			}
		} else {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Errorf("%s: body %s: %v", c.name, body, err)
			} else if err := statusSchema.Value.VisitJSON(v); err != nil {
				t.Errorf("%s: body %s is not a Status as the document has it: %v", c.name, body, err)
			}
		}
		if c.code/100 == 2 {
			key := route.Method + " " + route.Path
			answered[key] = append(answered[key], c.name)
			continue
		}
		var st struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &st); err != nil || st.Code != rpcCodes[c.code] || st.Message == "" {
			t.Errorf("%s: error body %s (%v), want a google.rpc.Status with code %d and a message", c.name, body, err, rpcCodes[c.code])
		}
		// An error of the transcoder or the service is not to be kept; a
		// refusal by authentication or roles is not either, with no-store
		// or with no Cache-Control (neither 401 nor 403 is kept without one).
		cc := resp.Header.Get("Cache-Control")
		if refused := c.code == http.StatusUnauthorized || c.code == http.StatusForbidden; refused && cc != "" && cc != "no-store" || !refused && cc != "no-store" {
			t.Errorf("%s: HTTP %d with Cache-Control %q", c.name, c.code, cc)
		}
	}
	if invalid > 0 {
		t.Logf("%d of %d answers did not validate", invalid, len(cases))
	}

	// Every operation of the document answered 2xx at least once.
	for _, path := range doc.Paths.InMatchingOrder() {
		for method := range doc.Paths.Value(path).Operations() {
			if key := method + " " + path; len(answered[key]) == 0 {
				t.Errorf("%s (%s) was never answered 2xx: add a case for it to TestRESTAgainstOpenAPI", key, doc.Paths.Value(path).GetOperation(method).OperationID)
			}
		}
	}
	keys := make([]string, 0, len(answered))
	for k := range answered {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("%s: %d cases answered 2xx", k, len(answered[k]))
	}
}

// closeObjects sets additionalProperties: false on every object schema of
// doc that names its properties and says nothing of others.
func closeObjects(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if s.Type.Is("object") && len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties = openapi3.AdditionalProperties{Has: openapi3.Ptr(false)}
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, l := range [][]*openapi3.SchemaRef{s.OneOf, s.AnyOf, s.AllOf} {
			for _, r := range l {
				walk(r)
			}
		}
	}
	for _, ref := range doc.Components.Schemas {
		walk(ref)
	}
}

// validateClosed validates an answer against the closed copy of the
// document.
func validateClosed(ctx context.Context, router routers.Router, req *http.Request, resp *http.Response, body []byte, opts *openapi3filter.Options) error {
	route, params, err := findRoute(router, req)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	})
}

// findRoute is router.FindRoute on the escaped path: the legacy router
// matches URL.Path, in which a node id's %2F is a slash again and would
// split its segment. The path parameters it captures are unescaped here.
func findRoute(router routers.Router, req *http.Request) (*routers.Route, map[string]string, error) {
	r := req.Clone(req.Context())
	r.URL.Path, r.URL.RawPath = req.URL.EscapedPath(), ""
	route, params, err := router.FindRoute(r)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range params {
		if params[k], err = url.PathUnescape(v); err != nil {
			return nil, nil, err
		}
	}
	return route, params, nil
}

// reportAge is the data's age in a Chinese report, measured per call.
var reportAge = regexp.MustCompile(`（[^（）]*前）`)

// TestRESTMatchesRPC reads a diagnosis and a node over REST and over the
// Connect RPCs: the REST body, read as protojson, is the RPC's answer,
// field for field, but for what is measured per call (staleness). A pair
// of RPC answers around the REST one that differ means a refresh came
// between: the three are read again.
func TestRESTMatchesRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: REST and RPC answers on the simulated seed fleet, about half a minute under -race")
	}
	t.Parallel()
	ctx := context.Background()
	base, c := serveSeed(t)

	restRead := func(t *testing.T, path string, into proto.Message) {
		t.Helper()
		code, body := get(t, base, path, clitest.ReaderToken)
		if code != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d %s", path, code, body)
		}
		if err := protojson.Unmarshal(body, into); err != nil {
			t.Fatalf("GET %s: %s is not protojson of %T: %v", path, body, into, err)
		}
	}

	t.Run("DiagnoseNode", func(t *testing.T) {
		// What is measured per call: the staleness, and the report's
		// rendering of it, the data's age ("观测时间：… （15 毫秒前）").
		perCall := func(what string, r *llmdiagv1.DiagnoseNodeResponse) {
			t.Helper()
			r.GetDiagnosis().Staleness = nil
			if n := len(reportAge.FindAllStringIndex(r.GetReport(), -1)); n != 1 {
				t.Fatalf("%s: the report holds %d ages (…前), want 1:\n%s", what, n, r.GetReport())
			}
			r.Report = reportAge.ReplaceAllString(r.GetReport(), "（…前）")
		}
		rpc := func() *llmdiagv1.DiagnoseNodeResponse {
			resp, err := c.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: node, Language: llmdiagv1.Language_LANGUAGE_ZH}))
			if err != nil {
				t.Fatalf("DiagnoseNode: %v", err)
			}
			perCall("DiagnoseNode", resp.Msg)
			return resp.Msg
		}
		attempts := 0
		var last string
		clitest.WaitFor(t, "two DiagnoseNode answers of one refresh around the REST one", time.Minute, func() bool {
			attempts++
			before := rpc()
			rest := &llmdiagv1.DiagnoseNodeResponse{}
			restRead(t, "/v1/nodes/"+url.PathEscape(node)+"/diagnosis?language=LANGUAGE_ZH", rest)
			after := rpc()
			perCall("GET /v1/nodes/{node}/diagnosis", rest)
			if !proto.Equal(before, after) {
				last = fmt.Sprintf("a refresh between the RPCs: observed_at %v, then %v", before.GetDiagnosis().GetObservedAt().AsTime(), after.GetDiagnosis().GetObservedAt().AsTime())
				return false
			}
			if !proto.Equal(before, rest) {
				t.Fatalf("GET /v1/nodes/%s/diagnosis?language=LANGUAGE_ZH answered\n%s\nthe RPC, before and after it,\n%s", node, protojson.Format(rest), protojson.Format(before))
			}
			if before.GetDiagnosis().GetLanguage() != llmdiagv1.Language_LANGUAGE_ZH || before.GetReport() == "" || len(before.GetDiagnosis().GetFindings()) == 0 {
				t.Fatalf("DiagnoseNode in Chinese: %s; want the language, a report and findings", protojson.Format(before))
			}
			return true
		}, &last)
		t.Logf("DiagnoseNode: REST equal to the RPC after %d attempt(s)", attempts)
	})

	t.Run("GetNode", func(t *testing.T) {
		list := func() *llmdiagv1.Node {
			resp, err := c.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{}))
			if err != nil {
				t.Fatalf("ListNodes: %v", err)
			}
			for _, n := range resp.Msg.GetNodes() {
				if n.GetId() == node {
					n.Staleness = nil
					return n
				}
			}
			t.Fatalf("ListNodes: no %s in %s", node, protojson.Format(resp.Msg))
			return nil
		}
		attempts := 0
		var last string
		clitest.WaitFor(t, "two ListNodes answers of one refresh around GET /v1/nodes/{node}", time.Minute, func() bool {
			attempts++
			before := list()
			rest := &llmdiagv1.GetNodeResponse{}
			restRead(t, "/v1/nodes/"+url.PathEscape(node), rest)
			after := list()
			if !proto.Equal(before, after) {
				last = fmt.Sprintf("a refresh between the RPCs: last_seen %v, then %v", before.GetLastSeen().AsTime(), after.GetLastSeen().AsTime())
				return false
			}
			if rest.GetDegraded() != nil {
				t.Fatalf("GET /v1/nodes/%s: degraded %v from a single serve", node, rest.GetDegraded())
			}
			rest.GetNode().Staleness = nil
			if !proto.Equal(before, rest.GetNode()) {
				t.Fatalf("GET /v1/nodes/%s answered\n%s\nListNodes, before and after it,\n%s", node, protojson.Format(rest.GetNode()), protojson.Format(before))
			}
			return true
		}, &last)
		t.Logf("GetNode: REST equal to ListNodes' entry after %d attempt(s)", attempts)
	})
}
