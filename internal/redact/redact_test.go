package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"http://scraper:s3cret@10.0.0.5:8000/metrics", "http://scraper:xxxxx@10.0.0.5:8000/metrics"},
		{"http://10.0.0.5:8000/metrics", "http://10.0.0.5:8000/metrics"},
		{"http://user@host/metrics", "http://user@host/metrics"},
		{"redis://u:s3cret@h1,h2/0", "redis://u:xxxxx@h1,h2/0"},
		{"rediss://default:s3cret@[::1]:6380", "rediss://default:xxxxx@[::1]:6380"},
		{"redis://u:s3cret@h1:6379,h2:6379", "redis://u:xxxxx@h1:6379,h2:6379"},
		{"u:s3cret@host", "(redacted)"},
	} {
		got := URL(c.raw)
		if got != c.want || strings.Contains(got, "s3cret") {
			t.Errorf("URL(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}
