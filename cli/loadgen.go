package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/llmdiag/llmdiag/loadgen"
)

func loadgenCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("llmdiag loadgen", flag.ContinueOnError)
	target := fs.String("url", "", "the endpoint: http://HOST:PORT/v1/completions or .../v1/chat/completions (no path: /v1/completions)")
	rate := fs.Float64("rate", 1, fmt.Sprintf("mean arrivals per second, Poisson (at most %d)", loadgen.MaxRate))
	duration := fs.Duration("duration", 10*time.Second, "how long arrivals go on")
	prompt := fs.String("prompt-tokens", "256", "prompt length distribution in tokens: N, A-B (uniform), M~S (log-normal, median M, sigma S), or a mix W:SHAPE,W:SHAPE")
	output := fs.String("output-tokens", "64", "output length distribution in tokens (sent as max_tokens), same syntax as --prompt-tokens")
	stream := fs.Bool("stream", false, "stream the answers (Server-Sent Events); TTFT is measured only then")
	inflight := fs.Int("concurrency-max", 64, fmt.Sprintf("most requests in flight; an arrival beyond is skipped, not delayed (at most %d)", loadgen.MaxInFlightLimit))
	maxRequests := fs.Int("max-requests", 10000, fmt.Sprintf("most requests sent in all (at most %d)", loadgen.MaxRequestsLimit))
	timeout := fs.Duration("request-timeout", time.Minute, "bound on each request; the run ends at most this long after --duration")
	model := fs.String("model", "sim", "the requests' model field")
	seed := fs.Uint64("seed", 1, "random seed of the arrival times and lengths")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a table")
	return &ffcli.Command{
		Name:       "loadgen",
		ShortUsage: "llmdiag loadgen --url URL [--rate R] [--duration D] [--prompt-tokens DIST] [--output-tokens DIST] [--stream] [--concurrency-max N] [--json]",
		ShortHelp:  "send bounded open-loop completion traffic to one endpoint and report client-side TTFT and E2E",
		LongHelp: strings.TrimSpace(`
Send OpenAI-compatible completion requests to the one --url given, at
--rate arrivals a second (Poisson, open loop: arrivals do not wait for
answers) for --duration, with prompt and output lengths drawn from
--prompt-tokens and --output-tokens, and report what the client saw: TTFT
(time to the first content chunk, with --stream) and end-to-end time as
p50/p90/p99 and max, successes, and failures by kind (http NNN, timeout,
connection, stream cut, bad body).

It is meant for loopback test rigs and endpoints of your own, such as the
nodes of llmdiag sim:
  llmdiag sim --scenario seed --load external --base-port 9100 &
  llmdiag loadgen --url http://127.0.0.1:9104/v1/completions --rate 4 \
    --duration 30s --prompt-tokens 0.8:500~0.6,0.2:4000 --output-tokens 50-300 --stream

It is bounded: --rate at most 1000, --concurrency-max (arrivals that find
that many requests outstanding are skipped and counted, not queued),
--max-requests in all, --request-timeout per request, and the run ends at
most --request-timeout after --duration. Prompts are "tok " repeated (4
characters a token, as the simulator counts them); outputs are max_tokens
with "ignore_eos": true, so vLLM and SGLang generate that many tokens too.`),
		FlagSet: fs,
		Exec: withEnv(fs, env, func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			if *target == "" {
				return usageError{errors.New("--url is required")}
			}
			pd, err := loadgen.ParseDist(*prompt)
			if err != nil {
				return usageError{fmt.Errorf("--prompt-tokens: %w", err)}
			}
			od, err := loadgen.ParseDist(*output)
			if err != nil {
				return usageError{fmt.Errorf("--output-tokens: %w", err)}
			}
			if *inflight < 1 || *maxRequests < 1 || *timeout <= 0 {
				return usageError{errors.New("--concurrency-max, --max-requests and --request-timeout must be positive")}
			}
			res, err := loadgen.Run(ctx, loadgen.Config{
				URL: *target, Rate: *rate, Duration: *duration, Prompt: pd, Output: od, Stream: *stream,
				MaxInFlight: *inflight, MaxRequests: *maxRequests, Timeout: *timeout, Model: *model, Seed: *seed,
			})
			if err != nil {
				return usageError{err}
			}
			if *asJSON {
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return res.WriteTable(env.Stdout)
		}),
	}
}
