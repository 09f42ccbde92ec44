package fleetsd

import (
	"fmt"
	"net"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/scrape"

	"github.com/llmdiag/llmdiag/fleet"
	"github.com/llmdiag/llmdiag/internal/redact"
)

// The target labels that set a node's fields rather than becoming fleet
// labels.
const (
	LabelNode    = "node"
	LabelModel   = "model"
	LabelEngine  = "engine"
	LabelRole    = "role"
	LabelDCGMURL = "dcgm_url"
)

// MaxLabels bounds the fleet labels of one node: a target with more is
// refused (drop some with a labeldrop rule).
const MaxLabels = 64

// Refusal is a target left out of the node set, and why.
type Refusal struct {
	Job, Target string
	Reason      string // RefusedInvalid, RefusedDuplicate or RefusedMaxTargets
	Err         string
}

// Refusal reasons, the values of llmdiag_discovery_refused's reason label.
const (
	RefusedInvalid    = "invalid"
	RefusedDuplicate  = "duplicate"
	RefusedMaxTargets = "max_targets"
)

// Nodes relabels groups as the job says (Prometheus's scrape.TargetsFromGroup)
// and returns the nodes the targets kept make, sorted by id, and the
// targets refused: those whose relabeling failed and those that make no
// valid fleet node. idLabel, when set, names the label whose value is the
// node id (with --prometheus: --node-label), in place of node and the
// default.
func (j *Job) Nodes(groups []*targetgroup.Group, idLabel string) ([]fleet.Node, []Refusal) {
	var (
		nodes   []fleet.Node
		refused []Refusal
		lb      = labels.NewBuilder(labels.EmptyLabels())
		buf     []*scrape.Target
	)
	for _, g := range groups {
		if g == nil {
			continue
		}
		var fails []error
		buf, fails = scrape.TargetsFromGroup(g, j.Config, buf, lb)
		for _, err := range fails {
			refused = append(refused, Refusal{Job: j.Name(), Target: g.Source, Reason: RefusedInvalid, Err: redact.Text(err.Error())})
		}
		for _, t := range buf {
			if t.GetValue(model.AddressLabel) == "" {
				continue // dropped by relabeling (kept for Prometheus's keep_dropped_targets)
			}
			n, err := j.node(t, lb, idLabel)
			if err != nil {
				refused = append(refused, Refusal{Job: j.Name(), Target: redact.Text(t.GetValue(model.AddressLabel)), Reason: RefusedInvalid, Err: redact.Text(err.Error())})
				continue
			}
			nodes = append(nodes, n)
		}
	}
	sort.SliceStable(nodes, func(a, b int) bool { return nodes[a].ID < nodes[b].ID })
	return nodes, refused
}

// node is the fleet node of one relabeled target.
func (j *Job) node(t *scrape.Target, lb *labels.Builder, idLabel string) (fleet.Node, error) {
	addr := t.GetValue(model.AddressLabel)
	n := fleet.Node{URL: t.URL().String(), FollowRedirects: j.FollowRedirects}
	var id string
	var err error
	t.Labels(lb).Range(func(l labels.Label) {
		switch l.Name {
		case LabelNode:
			id = l.Value
		case LabelModel:
			n.Model = l.Value
		case LabelEngine:
			n.Engine = l.Value
		case LabelRole:
			n.Role = l.Value
		case LabelDCGMURL:
			n.DCGM = l.Value
		case model.InstanceLabel:
			if l.Value == addr {
				break // Prometheus's default: the address, which the URL holds
			}
			fallthrough
		default:
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			if len(n.Labels) >= MaxLabels {
				err = fmt.Errorf("more than %d fleet labels: drop some with a labeldrop rule", MaxLabels)
				return
			}
			n.Labels[l.Name] = l.Value
		}
	})
	if err != nil {
		return n, err
	}
	switch {
	case idLabel != "":
		id = t.GetValue(idLabel)
		if idLabel == model.InstanceLabel && id == "" {
			id = addr
		}
		if id == "" {
			return n, fmt.Errorf("no label %s to name the node by", idLabel)
		}
	case id == "":
		id = defaultID(t.DiscoveredLabels(lb), addr)
	}
	n.ID = id
	f := fleet.File{Nodes: []fleet.Node{n}}
	if err := f.Validate(); err != nil {
		return n, fmt.Errorf("node %q: %w", id, err)
	}
	return n, nil
}

// defaultID is <namespace>/<pod>:<port> for a Kubernetes pod's target,
// else its address.
func defaultID(discovered labels.Labels, addr string) string {
	ns, pod := discovered.Get("__meta_kubernetes_namespace"), discovered.Get("__meta_kubernetes_pod_name")
	if ns == "" || pod == "" {
		return addr
	}
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" {
		return ns + "/" + pod + ":" + port
	}
	return ns + "/" + pod
}
