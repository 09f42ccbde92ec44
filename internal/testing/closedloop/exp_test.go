package closedloop_test

import (
	"os"
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/internal/testing/closedloop"
	"github.com/llmdiag/llmdiag/internal/testing/testkit"
)

func TestExp(t *testing.T) {
	bin := testkit.Binary(t, closedloop.HAProxyProgram)
	var extra []string
	if w := os.Getenv("EXP_WINDOW"); w != "" {
		extra = []string{"--window", w}
	}
	rep := closedloop.Run(t, closedloop.Options{HAProxy: bin, Seed: 1, Balance: os.Getenv("EXP_BALANCE"), ServeArgs: extra})
	var b strings.Builder
	rep.WriteTables(&b)
	t.Logf("\n%s\n%s", b.String(), rep.Ratios())
}
