// Command llmdiag diagnoses LLM inference fleets from their Prometheus
// metrics. Run `llmdiag --help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/llmdiag/llmdiag/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "llmdiag:", err)
		}
		os.Exit(cli.ExitCode(err))
	}
}

func run(ctx context.Context, args []string, getenv func(string) string) error {
	return cli.Run(ctx, args, cli.Env{Getenv: getenv, Stdout: os.Stdout, Stderr: os.Stderr})
}
