package cli_test

import (
	"strings"
	"testing"

	"github.com/llmdiag/llmdiag/cli"
	"github.com/llmdiag/llmdiag/internal/testing/clitest"
)

func TestCompareUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "--by", "rack"}, "--by"},
		{[]string{"compare", "--by", "label="}, "--by"},
		{[]string{"compare", "--by", "label=gpu-pool"}, "--by"},
		{[]string{"compare", "--baseline", "-1h"}, "--baseline"},
		{[]string{"compare", "--baseline", "soon"}, "baseline"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := clitest.Run(t, nil, tc.args...)
			if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exit %d, error %v; want 2 naming %s", cli.ExitCode(err), err, tc.want)
			}
		})
	}
}
