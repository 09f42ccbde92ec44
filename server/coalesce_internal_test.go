package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
)

// recorder records, in order, what reaches the writer under a
// coalescingWriter: "header 200", "write N" (bytes), "flush".
type recorder struct {
	*httptest.ResponseRecorder
	calls []string
}

func (r *recorder) WriteHeader(code int) {
	r.calls = append(r.calls, "header "+strconv.Itoa(code))
	r.ResponseRecorder.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	r.calls = append(r.calls, "write "+strconv.Itoa(len(p)))
	return r.ResponseRecorder.Write(p)
}

func (r *recorder) Flush() {
	r.calls = append(r.calls, "flush")
	r.ResponseRecorder.Flush()
}

func TestCoalescingWriter(t *testing.T) {
	big := bytes.Repeat([]byte("b"), coalesceMaxBytes/2+1)
	tests := []struct {
		name    string
		handler func(w http.ResponseWriter)
		// calls is what reaches the underlying writer, handler and
		// release together.
		calls []string
		body  []byte
	}{
		{
			name: "prefix, body and flush go out as one write",
			handler: func(w http.ResponseWriter) {
				w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
				_, _ = w.Write([]byte("12345"))
				_, _ = w.Write([]byte("message"))
				w.(http.Flusher).Flush()
			},
			calls: []string{"header 200", "write 12"},
			body:  []byte("12345message"),
		},
		{
			name:    "a status alone",
			handler: func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
			calls:   []string{"header 503"},
		},
		{
			name:    "nothing written",
			handler: func(http.ResponseWriter) {},
		},
		{
			name: "the first status counts",
			handler: func(w http.ResponseWriter) {
				w.WriteHeader(http.StatusTooManyRequests)
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte("x"))
			},
			calls: []string{"header 429", "write 1"},
			body:  []byte("x"),
		},
		{
			name: "past the cap it writes through, flushes included",
			handler: func(w http.ResponseWriter) {
				_, _ = w.Write(big)
				_, _ = w.Write(big)
				w.(http.Flusher).Flush()
				_, _ = w.Write([]byte("tail"))
			},
			calls: []string{"header 200", "write " + strconv.Itoa(len(big)), "write " + strconv.Itoa(len(big)), "flush", "write 4"},
			body:  slices.Concat(big, big, []byte("tail")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{ResponseRecorder: httptest.NewRecorder()}
			newCoalescer().wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				tt.handler(w)
			})).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
			if !slices.Equal(rec.calls, tt.calls) {
				t.Errorf("underlying writer got %q, want %q", rec.calls, tt.calls)
			}
			if !bytes.Equal(rec.Body.Bytes(), tt.body) {
				t.Errorf("body is %d bytes, want %d", rec.Body.Len(), len(tt.body))
			}
		})
	}
}

func TestUnaryProcedures(t *testing.T) {
	got := unaryProcedures(llmdiagv1.File_llmdiag_v1_diagnosis_proto.Services().ByName("DiagnosisService"))
	want := []string{
		llmdiagv1connect.DiagnosisServiceListNodesProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeProcedure,
		llmdiagv1connect.DiagnosisServiceGetRoutabilityProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure,
		llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure,
		llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeHistoryProcedure,
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("unary procedures %q, want %q (StreamHealth must not be coalesced)", got, want)
	}
}

// TestCoalescedOverHTTP2 sends coalesced answers over a real HTTP/2 server
// with each protocol: answers below and above the cap arrive whole, and an
// error keeps its code, which gRPC carries in trailers.
func TestCoalescedOverHTTP2(t *testing.T) {
	const procedure = "/test.Echo/Echo"
	h := connect.NewUnaryHandler(procedure, func(_ context.Context, req *connect.Request[wrapperspb.StringValue]) (*connect.Response[wrapperspb.StringValue], error) {
		n, err := strconv.Atoi(req.Msg.Value)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("value: not a number"))
		}
		return connect.NewResponse(wrapperspb.String(string(bytes.Repeat([]byte("a"), n)))), nil
	})
	srv := httptest.NewUnstartedServer(newCoalescer().wrap(h))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &protocols
	srv.Start()
	t.Cleanup(srv.Close)
	httpClient := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	for _, proto := range []struct {
		name string
		opt  []connect.ClientOption
	}{
		{"connect", nil},
		{"grpc", []connect.ClientOption{connect.WithGRPC()}},
		{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
	} {
		client := connect.NewClient[wrapperspb.StringValue, wrapperspb.StringValue](httpClient, srv.URL+procedure, proto.opt...)
		for _, n := range []int{0, 8 << 10, 3 * coalesceMaxBytes} {
			res, err := client.CallUnary(t.Context(), connect.NewRequest(wrapperspb.String(strconv.Itoa(n))))
			if err != nil {
				t.Fatalf("%s, %d bytes: %v", proto.name, n, err)
			}
			if len(res.Msg.Value) != n {
				t.Errorf("%s: answer of %d bytes, want %d", proto.name, len(res.Msg.Value), n)
			}
		}
		_, err := client.CallUnary(t.Context(), connect.NewRequest(wrapperspb.String("x")))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: error %v, want InvalidArgument", proto.name, err)
		}
	}
}
