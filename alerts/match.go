package alerts

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/alertmanager/template"

	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// listPageSize is the page asked of ListNodes (the service's maximum).
const listPageSize = 1000

// nodeIndex maps what an alert may name a node by to the node's id: its id,
// and the host:port of its metrics URL. It is read from ListNodes at most
// every ttl and holds at most max nodes.
type nodeIndex struct {
	svc     Service
	clock   Clock
	ttl     time.Duration
	max     int
	timeout time.Duration

	mu  sync.Mutex
	cur *index
	at  time.Time
}

// index is one reading of the fleet.
type index struct {
	byID   map[string]bool
	byHost map[string]string
}

// get returns the index, read anew when older than ttl. When the read
// fails an older index is used if there is one.
func (n *nodeIndex) get(ctx context.Context) (*index, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock.Now()
	if n.cur != nil && now.Sub(n.at) < n.ttl {
		return n.cur, nil
	}
	idx, err := n.read(ctx)
	if err != nil {
		if n.cur != nil {
			return n.cur, nil
		}
		return nil, err
	}
	n.cur, n.at = idx, now
	return idx, nil
}

func (n *nodeIndex) read(ctx context.Context) (*index, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	idx := &index{byID: map[string]bool{}, byHost: map[string]string{}}
	token := ""
	for {
		resp, err := n.svc.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{PageSize: listPageSize, PageToken: token}))
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		for _, nd := range resp.Msg.GetNodes() {
			if len(idx.byID) >= n.max {
				return idx, nil // bounded: the first max nodes, by id
			}
			idx.byID[nd.GetId()] = true
			for _, h := range hostKeys(nd.GetUrl()) {
				if _, taken := idx.byHost[h]; !taken {
					idx.byHost[h] = nd.GetId()
				}
			}
		}
		token = resp.Msg.GetNextPageToken()
		if token == "" {
			return idx, nil
		}
	}
}

// hostKeys are the host:port forms a metrics URL is known by: its host,
// and with the scheme's default port when it names none.
func hostKeys(raw string) []string {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil
	}
	keys := []string{u.Host}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		keys = append(keys, net.JoinHostPort(u.Hostname(), port))
	}
	return keys
}

// match is the outcome of matching one alert.
type match struct {
	node         string // the node's id, "" if none
	label, value string // the label that named a node (or the first one tried that was present)
}

// match finds the node an alert is about: the first of labels the alert
// carries whose value is a node id or the host:port of a node's metrics
// URL.
func (idx *index) match(ls template.KV, labels []string) match {
	var first match
	for _, l := range labels {
		v, ok := ls[l]
		if !ok || v == "" {
			continue
		}
		if first.label == "" {
			first = match{label: l, value: v}
		}
		if idx.byID[v] {
			return match{node: v, label: l, value: v}
		}
		if id, ok := idx.byHost[v]; ok {
			return match{node: id, label: l, value: v}
		}
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			if id, ok := idx.byHost[u.Host]; ok {
				return match{node: id, label: l, value: v}
			}
		}
	}
	return first
}
