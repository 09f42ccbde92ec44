package cli

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/llmdiag/llmdiag/client"
	"github.com/llmdiag/llmdiag/diagnose"
	"github.com/llmdiag/llmdiag/internal/redact"
	"github.com/llmdiag/llmdiag/mcpserver"
	"github.com/llmdiag/llmdiag/runbook"
)

// mcpRunbooks are the runbooks the MCP server offers (explain_cause and the
// llmdiag://runbooks/ resources), in serve and in `llmdiag mcp`: those
// built into this binary (runbook/).
func mcpRunbooks() mcpserver.Runbooks {
	return mcpserver.RunbookFuncs{AllCauses: runbook.Causes, CauseSlug: runbook.Slug, CauseTitle: runbook.Title, CauseMarkdown: runbook.Markdown}
}

// linkVersion is the version a release build sets at link time
// (scripts/image.sh: -ldflags "-X github.com/llmdiag/llmdiag/cli.linkVersion=…",
// from git describe); empty in a plain go build.
var linkVersion string

// buildVersion is linkVersion when set, else the main module's version,
// "dev" when built from a tree.
func buildVersion() string {
	if linkVersion != "" {
		return linkVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// mcpServer is the MCP server over svc with this build's runbooks.
func mcpServer(svc mcpserver.Service, th *diagnose.Thresholds, opts mcpserver.Options) *mcp.Server {
	opts.Runbooks, opts.Thresholds, opts.Version = mcpRunbooks(), th, buildVersion()
	return mcpserver.New(svc, opts)
}

const mcpHelp = `
Serve llmdiag to an AI agent (Claude Desktop, Cursor, HolmesGPT, …) over the
Model Context Protocol on standard input and output, asking the llmdiag
service at --addr over Connect. Standard output carries the protocol
alone; logs go to standard error.

Tools: list_nodes, unhealthy_nodes (worst first), diagnose_node (en or zh,
Markdown or text), get_node_metrics, compare_percentiles and explain_cause;
resources: the runbook of each root cause (llmdiag://runbooks/<cause>,
Chinese llmdiag://runbooks/zh/<cause>) and, with --thresholds, the
thresholds (llmdiag://thresholds). --timeout is the deadline of each call.

A desktop agent starts it from its configuration, for example:

  {"mcpServers": {"llmdiag": {
    "command": "llmdiag",
    "args": ["mcp", "--addr", "https://llmdiag.example:8443"],
    "env": {"LLMDIAG_TOKEN": "<a reader token>"}}}}

The service itself serves the same tools over streamable HTTP at /mcp on
its port, behind its authentication: agents that speak HTTP need no
llmdiag binary.`

func mcpCommand(env Env, cf *clientFlags) *ffcli.Command {
	// running: mcp bounds each call by --timeout instead.
	return clientCommand(env, cf, clientCmd{name: "mcp", running: true,
		usage: "llmdiag mcp [--addr URL] [--token T] [--thresholds FILE]", short: "serve llmdiag's tools to an AI agent over MCP (stdio)", long: mcpHelp,
		setup: func(fs *flag.FlagSet) clientCall {
			thFile := fs.String("thresholds", "", "offer this thresholds file (the one serve reads) as the llmdiag://thresholds resource; default: none")
			newLog := logFlags(fs)
			return func(ctx context.Context, cl *client.Client, _ clientIn) (clientOut, error) {
				return clientOut{}, runMCP(ctx, env, cf, cl, *thFile, newLog)
			}
		}})
}

// runMCP serves the MCP server on standard input and output until ctx is
// done, asking the service through cl.
func runMCP(ctx context.Context, env Env, cf *clientFlags, cl *client.Client, thFile string, newLog func(io.Writer) (*slog.Logger, error)) error {
	log, err := newLog(env.Stderr)
	if err != nil {
		return err
	}
	var th *diagnose.Thresholds
	if thFile != "" {
		t, err := loadThresholds(thFile)
		if err != nil {
			return err
		}
		th = &t
	}
	s := mcpServer(cl, th, mcpserver.Options{CallTimeout: cf.timeout, Log: log})
	var t mcp.Transport = &mcp.StdioTransport{}
	if env.Stdin != nil {
		t = &mcp.IOTransport{Reader: io.NopCloser(env.Stdin), Writer: nopWriteCloser{env.Stdout}}
	} else if env.Stdout != os.Stdout {
		t = &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{env.Stdout}}
	}
	log.Info("llmdiag mcp serving on stdio", "service", redact.URL(cf.addr))
	err = s.Run(ctx, t)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// nopWriteCloser is a Writer whose Close does nothing: the protocol ends,
// the process's output stays open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
