package alerts

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// FuzzWebhook posts arbitrary bytes to the receiver as Alertmanager's
// webhook body. The answer is 202 with {"accepted":n,"duplicates":m} where
// n+m is the message's alert count and the message validates; or 400
// saying what is wrong (the body, the version or alerts[i]'s field); or
// 413 for a body over the limit. Never a panic, never another status.
func FuzzWebhook(f *testing.F) {
	const maxAlerts, maxBody = 5, 8 << 10
	r, err := New(&fakeService{nodes: fleet()}, []Sink{JSONSink("http://127.0.0.1:1/hook")}, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), &http.Client{},
		Options{MaxAlerts: maxAlerts, MaxBodyBytes: maxBody, IntakeQueue: 1, Clock: fakeClock()})
	if err != nil {
		f.Fatal(err)
	}
	ok := alert(map[string]string{"alertname": "LLMDiagOverloaded", "instance": "127.0.0.1:9101"})
	resolved := ok
	resolved.Status = "resolved"
	resolved.Fingerprint = "abc"
	for _, s := range []string{
		message(ok), message(ok, resolved), message(ok, ok, ok, ok, ok, ok), message(),
		`{"version":"3","alerts":[{"status":"firing","labels":{"a":"b"}}]}`,
		`{"version":"4","alerts":[{"status":"pending","labels":{"a":"b"}}]}`,
		`{"version":"4","alerts":[{"status":"firing"}]}`,
		`{"version":"4","alerts":[{"status":"firing","labels":{"a":"b"},"startsAt":"0001-01-01T00:00:00Z","endsAt":"9999-12-31T23:59:59Z"}]}`,
		`{"version":"4","alerts":null}`, `{"version":"4"}`, `version=4`, `{"version":"4","receiver":` + strings.Repeat(`"x`, 5000) + `"}`,
		`{"version":"4","alerts":[{"status":"firing","labels":{"instance":"\u0000"}}]}{"trailing":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Nothing runs the receiver: empty its intake so every message
		// that validates is accepted, not refused as a full queue.
		select {
		case <-r.intake:
		default:
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/alertmanager", bytes.NewReader(body)))
		got := rec.Body.String()
		switch rec.Code {
		case http.StatusAccepted:
			var m Message
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&m); err != nil {
				t.Fatalf("202 for a body that does not decode: %v", err)
			}
			if err := m.validate(maxAlerts); err != nil {
				t.Fatalf("202 for a message that does not validate: %v", err)
			}
			var a struct{ Accepted, Duplicates int }
			if err := json.Unmarshal([]byte(got), &a); err != nil {
				t.Fatalf("202 answer %q: %v", got, err)
			}
			if a.Accepted+a.Duplicates != len(m.Alerts) || a.Accepted < 0 || a.Duplicates < 0 {
				t.Fatalf("202 answer %q for %d alerts", got, len(m.Alerts))
			}
		case http.StatusBadRequest:
			if !strings.HasPrefix(got, "body: not Alertmanager's webhook JSON") && !strings.HasPrefix(got, "version: ") && !strings.HasPrefix(got, "alerts") {
				t.Fatalf("400 that names no field: %q", got)
			}
		case http.StatusRequestEntityTooLarge:
			if len(body) <= maxBody {
				t.Fatalf("413 for %d bytes, under the %d-byte limit", len(body), maxBody)
			}
		default:
			t.Fatalf("HTTP %d: %q", rec.Code, got)
		}
	})
}
