package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Bearer is an http.RoundTripper that sends Authorization: Bearer Token
// with every request, through Next (http.DefaultTransport when nil).
type Bearer struct {
	Token string
	Next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	next := b.Next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// HealthStatus asks base's grpc.health.v1 Check for service ("" for the
// server) in Connect's JSON, with hc, and returns the status without its
// prefix ("SERVING", "NOT_SERVING"), or why there is none.
func HealthStatus(ctx context.Context, hc *http.Client, base, service string) (string, error) {
	body, _ := json.Marshal(map[string]string{"service": service}) // cannot fail
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/grpc.health.v1.Health/Check", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	var out struct{ Status string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(answer, &out) != nil || out.Status == "" {
		return "", fmt.Errorf("health: %s %s", resp.Status, answer)
	}
	return strings.TrimPrefix(out.Status, "SERVING_STATUS_"), nil
}
