#!/usr/bin/env bash
# make run: the simulated `seed` fleet plus llmdiag serving it, in one terminal.
# Ctrl-C stops both.
set -euo pipefail
bin=${1:-bin/llmdiag}
listen=${LLMDIAG_LISTEN:-127.0.0.1:8080}
dir=$(mktemp -d)
fleet="$dir/fleet.yaml"

"$bin" sim --scenario seed --fleet-out "$fleet" &
sim=$!
trap 'kill "$sim" 2>/dev/null || true; wait "$sim" 2>/dev/null || true; rm -rf "$dir"' EXIT

for _ in $(seq 1 200); do
  [ -s "$fleet" ] && break
  kill -0 "$sim" 2>/dev/null || { echo "run: simulator exited" >&2; exit 1; }
  sleep 0.1
done
[ -s "$fleet" ] || { echo "run: simulator wrote no fleet file" >&2; exit 1; }

cat <<MSG

llmdiag is starting on http://$listen, watching the simulated fleet in $fleet.
Verdicts appear after the first refresh (a few seconds).

  Web console: http://$listen/          (the fleet, live; click a node for its report and charts)

Try, in another terminal:

  $bin diagnose deepseek-v4-0                # decode-bound, see docs/verdict-rules.md (--lang zh for Chinese)
  grpcurl -plaintext $listen list            # gRPC with reflection
  curl -s -H 'Content-Type: application/json' -d '{"node":"deepseek-v4-0"}' \\
       http://$listen/llmdiag.v1.DiagnosisService/DiagnoseNode   # Connect JSON
  curl -s 'http://$listen/v1/nodes/deepseek-v4-0/diagnosis?language=LANGUAGE_ZH'   # REST
  curl -s http://$listen/openapi.yaml        # the REST paths, as OpenAPI
  $bin bench                                 # answers' latency against the health check's

MSG
# --rate-limit 0: the demo listens on loopback only, and a load test
# (llmdiag bench) makes thousands of calls a second from one caller.
"$bin" serve --listen "$listen" --fleet "$fleet" --reflection --rate-limit 0
