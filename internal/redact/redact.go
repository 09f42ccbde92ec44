package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret this package hides.
const Mask = "xxxxx"

// secretParams are query parameters whose values are hidden: go-redis takes
// a Sentinel set's data-node password as ?password=, and a scrape target
// may take a token in its query.
var secretParams = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "pass": true,
	"sentinel_password": true, "token": true, "access_token": true,
	"api_key": true, "apikey": true, "secret": true, "auth": true,
}

// URL is raw with the password of its userinfo, and the values of query
// parameters that name a secret (password, token, …), replaced by "xxxxx".
// A URL net/url cannot parse (a Redis Cluster's comma-separated hosts) is
// redacted by its shape: whatever stands between "user:" and the last "@"
// before the path; one with no "://" at all is shown as "(redacted)", and
// "" stays "".
func URL(raw string) string {
	if raw == "" {
		return ""
	}
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Opaque == "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
		u.RawQuery = query(u.RawQuery)
		return u.String()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(redacted)"
	}
	auth, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth, tail = rest[:i], rest[i:]
	}
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		if user, _, hasPass := strings.Cut(auth[:i], ":"); hasPass {
			auth = user + ":" + Mask + "@" + auth[i+1:]
		}
	}
	if path, q, ok := strings.Cut(tail, "?"); ok {
		q, frag, hasFrag := strings.Cut(q, "#")
		tail = path + "?" + query(q)
		if hasFrag {
			tail += "#" + frag
		}
	}
	return scheme + "://" + auth + tail
}

// query is a raw query with the values of secret parameters masked, the
// rest left as written.
func query(raw string) string {
	if raw == "" {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, hasValue := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if hasValue && secretParams[strings.ToLower(name)] {
			parts[i] = k + "=" + Mask
		}
	}
	return strings.Join(parts, "&")
}

// inText finds what looks like a URL with a password in free text: a
// scheme, "://", a user, ":" and the password up to the last "@" before
// white space, a quote or a path.
var inText = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^\s"'/?#@:]*):[^\s"'/?#]*@`)

// Text is s with the password of every URL in it replaced by "xxxxx", for
// messages made elsewhere (a parse error quoting its input, another
// server's error string) that may carry a URL with credentials.
func Text(s string) string {
	return inText.ReplaceAllString(s, "${1}:"+Mask+"@")
}
