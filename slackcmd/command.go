package slackcmd

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"connectrpc.com/connect"

	"github.com/llmdiag/llmdiag/compare"
	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// kind is what a command asks.
type kind string

const (
	kindHelp      kind = "help"
	kindDiagnose  kind = "diagnose"
	kindNodes     kind = "nodes"
	kindUnhealthy kind = "unhealthy"
	kindCompare   kind = "compare"
)

// command is the parsed text after the slash command.
type command struct {
	kind kind
	// problem, with kindHelp, says what was wrong with the text.
	problem string
	// diagnose
	node string
	lang llmdiagv1.Language
	// compare
	metric     llmdiagv1.LatencyMetric
	metricName string
	group      llmdiagv1.GroupBy
	label      string
}

// String is the command as the person would type it, normalised.
func (c command) String() string {
	switch c.kind {
	case kindDiagnose:
		if c.lang == llmdiagv1.Language_LANGUAGE_ZH {
			return "diagnose " + c.node + " zh"
		}
		return "diagnose " + c.node
	case kindCompare:
		s := "compare " + c.metricName + " by "
		switch c.group {
		case llmdiagv1.GroupBy_GROUP_BY_MODEL:
			return s + "model"
		case llmdiagv1.GroupBy_GROUP_BY_ENGINE:
			return s + "engine"
		case llmdiagv1.GroupBy_GROUP_BY_LABEL:
			return s + "label " + c.label
		}
		return s + "node"
	}
	return string(c.kind)
}

// maxNodeID bounds a node id taken from the text.
const maxNodeID = 256

// parse reads the text after the slash command. Anything it does not
// understand is help, with what was wrong.
func parse(text string) command {
	f := strings.Fields(text)
	if len(f) == 0 {
		return command{kind: kindHelp}
	}
	help := func(format string, a ...any) command {
		return command{kind: kindHelp, problem: fmt.Sprintf(format, a...)}
	}
	switch strings.ToLower(f[0]) {
	case "help":
		return command{kind: kindHelp}
	case "nodes", "unhealthy":
		if len(f) > 1 {
			return help("`%s` takes no arguments", strings.ToLower(f[0]))
		}
		return command{kind: kind(strings.ToLower(f[0]))}
	case "diagnose":
		if len(f) < 2 {
			return help("`diagnose` needs a node")
		}
		c := command{kind: kindDiagnose, node: f[1], lang: llmdiagv1.Language_LANGUAGE_EN}
		if len(c.node) > maxNodeID {
			return help("the node id is longer than %d characters", maxNodeID)
		}
		switch {
		case len(f) == 2:
		case len(f) == 3 && strings.EqualFold(f[2], "zh"):
			c.lang = llmdiagv1.Language_LANGUAGE_ZH
		case len(f) == 3 && strings.EqualFold(f[2], "en"):
		default:
			return help("`diagnose` takes a node and optionally `zh`")
		}
		return c
	case "compare":
		return parseCompare(f[1:])
	}
	return help("unknown command `%s`", truncate(f[0], 40))
}

// parseCompare reads `METRIC [by model|engine|node|label KEY]`.
func parseCompare(f []string) command {
	help := func(format string, a ...any) command {
		return command{kind: kindHelp, problem: fmt.Sprintf(format, a...)}
	}
	if len(f) == 0 {
		return help("`compare` needs a metric: %s", compare.MetricNamesHint)
	}
	c := command{kind: kindCompare, metricName: strings.ToLower(f[0]), group: llmdiagv1.GroupBy_GROUP_BY_NODE}
	var ok bool
	if c.metric, ok = compare.MetricByName(c.metricName); !ok {
		return help("unknown metric `%s`: want %s", truncate(f[0], 40), compare.MetricNamesHint)
	}
	f = f[1:]
	if len(f) == 0 {
		return c
	}
	if !strings.EqualFold(f[0], "by") || len(f) < 2 {
		return help("`compare %s` takes `by model`, `by engine`, `by node` or `by label KEY`", c.metricName)
	}
	by, rest := strings.ToLower(f[1]), f[2:]
	if key, ok := strings.CutPrefix(by, "label="); ok {
		by, rest = "label", append([]string{key}, rest...)
	}
	switch by {
	case "node", "model", "engine":
		if len(rest) > 0 {
			return help("`by %s` takes nothing after it", by)
		}
		c.group = map[string]llmdiagv1.GroupBy{
			"node": llmdiagv1.GroupBy_GROUP_BY_NODE, "model": llmdiagv1.GroupBy_GROUP_BY_MODEL, "engine": llmdiagv1.GroupBy_GROUP_BY_ENGINE,
		}[by]
	case "label":
		if len(rest) != 1 || !fleet.ValidLabelName(rest[0]) {
			return help("`by label` takes one label name (letters, digits and _)")
		}
		c.group, c.label = llmdiagv1.GroupBy_GROUP_BY_LABEL, rest[0]
	default:
		return help("`by %s`: want model, engine, node or label KEY", truncate(by, 40))
	}
	return c
}

// commandName is the slash command as Slack sent it, when it looks like
// one, else /llmdiag.
func commandName(s string) string {
	if slashName.MatchString(s) {
		return s
	}
	return "/llmdiag"
}

var slashName = regexp.MustCompile(`^/[a-z0-9_-]{1,32}$`)

// maxListed bounds the nodes ListNodes is asked for.
const maxListed = 1000

// run runs c against svc and renders its answer.
func run(ctx context.Context, svc Service, req request) *Message {
	c := req.cmd
	switch c.kind {
	case kindDiagnose:
		resp, err := svc.DiagnoseNode(ctx, connect.NewRequest(&llmdiagv1.DiagnoseNodeRequest{Node: c.node, Language: c.lang}))
		if err != nil {
			return errorMessage(c, err)
		}
		return diagnoseMessage(resp.Msg)
	case kindNodes, kindUnhealthy:
		resp, err := svc.ListNodes(ctx, connect.NewRequest(&llmdiagv1.ListNodesRequest{PageSize: maxListed}))
		if err != nil {
			return errorMessage(c, err)
		}
		if c.kind == kindNodes {
			return nodesMessage(resp.Msg)
		}
		return unhealthyMessage(resp.Msg)
	case kindCompare:
		resp, err := svc.ComparePercentiles(ctx, connect.NewRequest(&llmdiagv1.ComparePercentilesRequest{Metric: c.metric, GroupBy: c.group, Label: c.label}))
		if err != nil {
			return errorMessage(c, err)
		}
		return compareMessage(c, resp.Msg)
	}
	return helpMessage(req.name, c.problem)
}

// errorMessage says why c failed, in the service's words.
func errorMessage(c command, err error) *Message {
	var ce *connect.Error
	msg := err.Error()
	code := connect.CodeUnknown
	if errors.As(err, &ce) {
		msg, code = ce.Message(), ce.Code()
	}
	switch code {
	case connect.CodeNotFound:
		return textMessage(fmt.Sprintf(":mag: `%s`: %s. `nodes` lists the fleet.", escape(c.String()), escape(truncate(msg, 500))))
	case connect.CodeDeadlineExceeded, connect.CodeCanceled:
		return textMessage(fmt.Sprintf(":warning: `%s` did not finish in time (%s). Try again.", escape(c.String()), escape(truncate(msg, 500))))
	}
	return textMessage(fmt.Sprintf(":warning: `%s` failed (%s): %s", escape(c.String()), code, escape(truncate(msg, 500))))
}
