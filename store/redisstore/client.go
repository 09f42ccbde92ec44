package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/llmdiag/llmdiag/internal/redact"
)

// NewClient returns a client for raw, which is one of
//
//   - a URL of one server: redis://[user:password@]host:port[/db] (rediss://
//     for TLS), with go-redis's query options (dial_timeout=…, …);
//   - a URL of a Cluster: several host:port separated by commas
//     (redis://u:p@h1:7000,h2:7001), or further seeds as addr= parameters;
//   - a URL of a Sentinel set: redis://[user:pass@]sentinel1:26379?master_name=mymaster&addr=sentinel2:26379;
//   - a bare comma-separated list of host:port: a Cluster's seeds.
//
// The client is a redis.UniversalClient, so New works the same on all of
// them, and the deadline of a caller's context reaches the socket
// (ContextTimeoutEnabled). Errors never carry the URL's password.
func NewClient(raw string) (redis.UniversalClient, error) {
	return NewClientWith(raw, ClientOptions{})
}

// ClientOptions are what NewClientWith takes beside the URL.
type ClientOptions struct {
	// Password authenticates to the server, the Cluster's nodes or the
	// Sentinel set's master and replicas, so that it need not stand in the
	// URL (and the process list): serve --redis-password-file. The URL's
	// user, if any, goes with it; the URL may then hold no password of its
	// own, except a Sentinel set's userinfo, which is the sentinels' own.
	Password string
	// PasswordFile holds the password instead (trimmed of surrounding white
	// space): read by NewClientWith, which fails when it cannot, and read
	// anew for every new connection, so that a rotated password is picked
	// up without a restart (the last one read is kept while it cannot be).
	PasswordFile string
}

// NewClientWith is NewClient with o.
func NewClientWith(raw string, o ClientOptions) (redis.UniversalClient, error) {
	if o.PasswordFile != "" {
		if o.Password != "" {
			return nil, errors.New("a password and a password file: give one")
		}
		pw, err := readPassword(o.PasswordFile)
		if err != nil {
			return nil, err
		}
		if pw == "" {
			return nil, fmt.Errorf("password file %s is empty", o.PasswordFile)
		}
		o.Password = pw
	}
	c, err := newClient(raw, o)
	if err != nil {
		return nil, errors.New(redact.Text(err.Error()))
	}
	return c, nil
}

func readPassword(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// credentials returns go-redis's CredentialsProvider for o: user with the
// password of o.PasswordFile, read anew each time; nil without a file.
func credentials(user string, o ClientOptions) func() (string, string) {
	if o.PasswordFile == "" {
		return nil
	}
	var mu sync.Mutex
	last := o.Password
	return func() (string, string) {
		mu.Lock()
		defer mu.Unlock()
		if pw, err := readPassword(o.PasswordFile); err == nil && pw != "" {
			last = pw
		}
		return user, last
	}
}

func newClient(raw string, o ClientOptions) (redis.UniversalClient, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	if scheme != "redis" && scheme != "rediss" {
		return nil, errors.New("want a redis:// or rediss:// URL")
	}
	auth, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", auth
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		userinfo, hosts = auth[:i+1], auth[i+1:]
	}
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			addrs = append(addrs, h)
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("no host in URL")
	}
	u, err := url.Parse(scheme + "://" + userinfo + addrs[0] + tail)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	u.RawQuery = q.Encode()
	_, urlPassword := u.User.Password()
	sentinel := q.Get("master_name") != ""
	switch {
	case o.Password != "" && sentinel && q.Has("password"):
		return nil, errors.New("a password both in the URL (?password=) and given apart: give one")
	case o.Password != "" && !sentinel && urlPassword:
		return nil, errors.New("a password both in the URL and given apart: give one")
	}
	switch {
	case sentinel:
		opts, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, err
		}
		if o.Password != "" {
			opts.Password = o.Password
			opts.CredentialsProvider = credentials(opts.Username, o)
		}
		opts.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(opts), nil
	case q.Has("addr"):
		opts, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, err
		}
		if o.Password != "" {
			opts.Password = o.Password
			opts.CredentialsProvider = credentials(opts.Username, o)
		}
		opts.ContextTimeoutEnabled = true
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, err
	}
	if o.Password != "" {
		opts.Password = o.Password
		opts.CredentialsProvider = credentials(opts.Username, o)
	}
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts), nil
}
