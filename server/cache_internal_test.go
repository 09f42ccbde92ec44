package server

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
	"github.com/llmdiag/llmdiag/gen/llmdiag/v1/llmdiagv1connect"
)

func TestCacheGets(t *testing.T) {
	tests := []struct {
		name   string
		method string
		maxAge time.Duration
		status int
		flush  bool
		want   string // Cache-Control; "" none
	}{
		{"GET answered", http.MethodGet, 5 * time.Second, http.StatusOK, false, "private, max-age=5"},
		{"GET answered, written without a status", http.MethodGet, 5 * time.Second, 0, false, "private, max-age=5"},
		{"GET answered, flushed first", http.MethodGet, 5 * time.Second, 0, true, "private, max-age=5"},
		{"GET, max-age rounded down", http.MethodGet, 2500 * time.Millisecond, http.StatusOK, false, "private, max-age=2"},
		{"GET, refreshes under a second", http.MethodGet, 500 * time.Millisecond, http.StatusOK, false, "private, no-cache"},
		{"GET not found", http.MethodGet, 5 * time.Second, http.StatusNotFound, false, "no-store"},
		{"GET rate-limited", http.MethodGet, 5 * time.Second, http.StatusTooManyRequests, false, "no-store"},
		{"POST", http.MethodPost, 5 * time.Second, http.StatusOK, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := cacheGets(tc.maxAge, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.flush {
					http.NewResponseController(w).Flush()
				}
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				_, _ = w.Write([]byte("{}"))
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/x", nil))
			if got := rec.Header().Get("Cache-Control"); got != tc.want {
				t.Errorf("Cache-Control %q, want %q", got, tc.want)
			}
			if vary := rec.Header().Values("Vary"); (tc.method == http.MethodGet) != slices.Contains(vary, "Authorization") {
				t.Errorf("Vary %q on a %s", vary, tc.method)
			}
		})
	}
}

func TestReadProcedures(t *testing.T) {
	got := readProcedures(llmdiagv1.File_llmdiag_v1_diagnosis_proto.Services().ByName("DiagnosisService"))
	for _, p := range []string{
		llmdiagv1connect.DiagnosisServiceListNodesProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeProcedure,
		llmdiagv1connect.DiagnosisServiceGetRoutabilityProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeMetricsProcedure,
		llmdiagv1connect.DiagnosisServiceComparePercentilesProcedure,
		llmdiagv1connect.DiagnosisServiceDiagnoseNodeProcedure,
		llmdiagv1connect.DiagnosisServiceGetNodeHistoryProcedure,
	} {
		if !got[p] {
			t.Errorf("%s is not a read served over GET", p)
		}
	}
	if len(got) != 7 || got[llmdiagv1connect.DiagnosisServiceStreamHealthProcedure] {
		t.Errorf("reads %v: want the seven unary reads, not StreamHealth", got)
	}
}
