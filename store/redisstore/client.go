package redisstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NewClient returns a client for addr, which is one of
//
//   - a URL of one server: redis://[user:password@]host:port[/db] (rediss://
//     for TLS), with go-redis's query options (dial_timeout=…, …);
//   - a URL of a Cluster: the same with further seed nodes as addr=
//     parameters: redis://user:pass@host1:6379?addr=host2:6379&addr=host3:6379;
//   - a URL of a Sentinel set: redis://[user:pass@]sentinel1:26379?master_name=mymaster&addr=sentinel2:26379;
//   - a comma-separated list of host:port seed nodes of a Cluster.
//
// The client is a redis.UniversalClient, so New works the same on all of
// them.
func NewClient(addr string) (redis.UniversalClient, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("redis address is empty")
	}
	if !strings.Contains(addr, "://") {
		var addrs []string
		for _, a := range strings.Split(addr, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
		return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: len(addrs) > 1}), nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	q := u.Query()
	switch {
	case q.Get("master_name") != "":
		opts, err := redis.ParseFailoverURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis sentinel url: %w", err)
		}
		return redis.NewFailoverClient(opts), nil
	case q.Has("addr"):
		opts, err := redis.ParseClusterURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis cluster url: %w", err)
		}
		return redis.NewClusterClient(opts), nil
	default:
		opts, err := redis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		return redis.NewClient(opts), nil
	}
}
