package redact

import (
	"net/url"
	"strings"
)

// URL is raw with the password of its userinfo replaced by "xxxxx". A URL
// net/url cannot parse (a Redis Cluster's comma-separated hosts) is
// redacted by its shape: whatever stands between "user:" and the last "@"
// before the path; one with no "://" at all is shown as "(redacted)".
func URL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Opaque == "" {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(redacted)"
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		if user, _, hasPass := strings.Cut(rest[:i], ":"); hasPass {
			return scheme + "://" + user + ":xxxxx@" + rest[i+1:]
		}
	}
	return raw
}
