package clitest

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/llmdiag/llmdiag/dashboard"
)

// DashboardQueries reads a dashboard file `llmdiag dashboard` wrote into
// the Grafana SDK's type, failing the test if it does not load, and
// returns its queries.
func DashboardQueries(t testing.TB, path string) []dashboard.Query {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins() // the SDK's decoder of panel and query types
	var d sdk.Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s does not load into the SDK's dashboard type: %v", path, err)
	}
	qs, err := dashboard.Queries(d)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}
