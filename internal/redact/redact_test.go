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
		{"redis://u:s3cret@h1:6379,h2:6379/0?password=s3cret&addr=h3", "redis://u:xxxxx@h1:6379,h2:6379/0?password=xxxxx&addr=h3"},
		{"redis://s1:26379?master_name=m&password=s3cret", "redis://s1:26379?master_name=m&password=xxxxx"},
		{"http://host/metrics?token=s3cret&x=1#f", "http://host/metrics?token=xxxxx&x=1#f"},
		{"http://a:s3c@ret@host/metrics", "http://a:xxxxx@host/metrics"},
		{"u:s3cret@host", "(redacted)"},
		{"", ""},
	} {
		got := URL(c.raw)
		if got != c.want || strings.Contains(got, "s3cret") {
			t.Errorf("URL(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`parse "redis://u:s3cret@h1:x": invalid port`, `parse "redis://u:xxxxx@h1:x": invalid port`},
		{`Get "http://a:s3cret@h/metrics": EOF; then https://b:s3cret@h2:9090/x`, `Get "http://a:xxxxx@h/metrics": EOF; then https://b:xxxxx@h2:9090/x`},
		{"no url here: a:b@c", "no url here: a:b@c"},
		{"http://host:8080/metrics fine", "http://host:8080/metrics fine"},
	} {
		if got := Text(c.in); got != c.want || strings.Contains(got, "s3cret") {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
