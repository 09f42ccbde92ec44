package prom

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/engine"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// The role query's answer decides each node's role as a direct scrape
// does (engine.RoleFrom): one label says it, a conflict or no label says
// nothing; a failed role query fails no node, and warns.
func TestRoleQuery(t *testing.T) {
	nodes := synthFleet(4, false)
	qs := plan(t, defaultBuilder("5m"), engine.Engines()...)
	role := qs[len(qs)-1]
	if role.shape != shapeRole {
		t.Fatalf("last planned query is %s, want the role query", role.shape)
	}
	id := func(i int) string { return nodes[i].ID }
	tests := []struct {
		name   string
		answer canned
		want   map[string]llmdiagv1.Role
		source map[string]string
		warn   bool
	}{
		{
			name: "labels",
			answer: canned{Status: http.StatusOK, Body: vectorBody(testNow, []fakeSample{
				{labels: []string{"instance", id(0), "engine_type", "prefill"}, value: "1"},
				{labels: []string{"instance", id(1), "dynamo_component", "decode"}, value: "1"},
				// Two labels that agree: the first of engine.RoleLabels names it.
				{labels: []string{"instance", id(2), "dynamo_component", "prefill"}, value: "1"},
				{labels: []string{"instance", id(2), "engine_type", "prefill"}, value: "1"},
				// A conflict says nothing.
				{labels: []string{"instance", id(3), "engine_type", "prefill"}, value: "1"},
				{labels: []string{"instance", id(3), "engine_type", "decode"}, value: "1"},
			})},
			want:   map[string]llmdiagv1.Role{id(0): llmdiagv1.Role_ROLE_PREFILL, id(1): llmdiagv1.Role_ROLE_DECODE, id(2): llmdiagv1.Role_ROLE_PREFILL},
			source: map[string]string{id(0): `engine_type="prefill"`, id(1): `dynamo_component="decode"`, id(2): `engine_type="prefill"`},
		},
		{
			name:   "failed",
			answer: canned{Status: http.StatusUnprocessableEntity, Body: []byte(`{"status":"error","errorType":"execution","error":"boom"}`)},
			warn:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bodies := synthBodies(qs, nodes, testNow)
			bodies[role.expr] = tc.answer
			src := newTestSource(t, newFakeProm(t, bodies).URL, nil)
			obs, err := src.Refresh(t.Context(), "5m")
			if err != nil {
				t.Fatal(err)
			}
			if len(obs) != len(nodes) {
				t.Fatalf("%d observations, want %d", len(obs), len(nodes))
			}
			for _, o := range obs {
				m := o.Metrics
				if m.GetRole() != tc.want[o.Node.ID] || m.GetRoleSource() != tc.source[o.Node.ID] || o.Sample.Role != m.GetRole() {
					t.Errorf("%s: role %v from %q (sample %v), want %v from %q", o.Node.ID, m.GetRole(), m.GetRoleSource(), o.Sample.Role, tc.want[o.Node.ID], tc.source[o.Node.ID])
				}
				warned := strings.Contains(strings.Join(m.GetWarnings(), "\n"), "role: ")
				if warned != tc.warn || len(m.GetErrors()) > 0 {
					t.Errorf("%s: warnings %q errors %q, want a role warning: %v", o.Node.ID, m.GetWarnings(), m.GetErrors(), tc.warn)
				}
				if m.Queue == nil {
					t.Errorf("%s: no queue", o.Node.ID)
				}
			}
		})
	}
}
