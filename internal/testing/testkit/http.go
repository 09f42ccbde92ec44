package testkit

import "net/http"

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
