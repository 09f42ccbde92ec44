package slackcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// parsePrefix reads Config.ResponseURLPrefix: an http(s) URL with a host
// and no user, query or fragment; its path is taken to end in "/", so that
// https://hooks.slack.com allows https://hooks.slack.com/… and not
// https://hooks.slack.com.example/.
func parsePrefix(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("want https://host/[path/], with no user, query or fragment")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// errOutsidePrefix refuses a response_url outside the allowed prefix.
var errOutsidePrefix = errors.New("its response_url is not under the allowed prefix (--slack-response-url-prefix)")

// allowed returns raw parsed when it may receive answers: same scheme and
// host as the prefix, no user, and a clean path under the prefix's.
func (h *Handler) allowed(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("the request has no response_url")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.User != nil {
		return nil, errOutsidePrefix
	}
	p := h.prefix
	clean := u.EscapedPath()
	if !strings.EqualFold(u.Scheme, p.Scheme) || !strings.EqualFold(u.Host, p.Host) ||
		!strings.HasPrefix(clean, p.EscapedPath()) || dotSegment(u.Path) {
		return nil, errOutsidePrefix
	}
	return u, nil
}

// deliver posts msg to target, retrying what may pass on a later attempt
// (network errors, 429, 5xx) up to Config.DeliveryAttempts times with
// doubling backoff. Errors never carry the URL.
func (h *Handler) deliver(ctx context.Context, target *url.URL, msg *Message) error {
	body, err := encode(msg)
	if err != nil {
		return err
	}
	backoff := h.cfg.DeliveryBackoff
	var last error
	for attempt := 1; attempt <= h.cfg.DeliveryAttempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("stopped after %d attempts: %w (last: %v)", attempt-1, ctx.Err(), last)
			case <-t.C:
			}
			backoff *= 2
		}
		retry, err := h.post(ctx, target, body)
		if err == nil {
			return nil
		}
		last = err
		if !retry {
			return fmt.Errorf("attempt %d: %w", attempt, err)
		}
	}
	return fmt.Errorf("gave up after %d attempts (limit DeliveryAttempts): %w", h.cfg.DeliveryAttempts, last)
}

// post makes one attempt; retry says whether another may succeed.
func (h *Handler) post(ctx context.Context, target *url.URL, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return false, errors.New("cannot make the request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error quotes the URL
		}
		return true, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusTooManyRequests || c >= 500:
		return true, fmt.Errorf("answered %d", c)
	default:
		return false, fmt.Errorf("answered %d", c)
	}
}

// dotSegment reports whether path (decoded) has a ".." segment, which a
// server could resolve to outside the prefix.
func dotSegment(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}
