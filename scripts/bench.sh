#!/usr/bin/env bash
# The benchmarks behind docs/benchmarks.md, each run COUNT times
# (default 5), printed as one table of medians (internal/cmd/benchtable).
# Ratios against a baseline measured in the same run (x-health: a call's
# p50 over the health check's; ratio-%: an incremental replica sync's bytes
# over a full one's; per-node-x: a 10,000-node cycle's cost per node over a
# 1,000-node one's) are the figures to compare across machines; absolute
# times depend on the machine and what else runs on it.
#
#   make bench              # everything, about 30 minutes on 2 cores
#   COUNT=3 make bench      # fewer runs
#   ONLY=Unary make bench   # the benchmarks whose name matches
#   ONLY=ClosedLoop make bench   # what steering buys behind HAProxy, ~25 minutes
#
# An entry with a fourth field runs that many times whatever COUNT says:
# BenchmarkClosedLoop's runs are repetitions of a 2.5-minute experiment
# (for each of three pairings of balance algorithms), three of them,
# whose medians docs/integrations.md reports.
#
# The raw output is kept in bin/bench.txt.
set -euo pipefail
count=${COUNT:-5}
only=${ONLY:-.}
out=bin/bench.txt
mkdir -p bin
: >"$out"

# package, benchmark pattern, -benchtime[, count]
benches=(
  "./server         ^BenchmarkUnary$                     3000x"
  "./server         ^BenchmarkUnaryREST$                 3000x"
  "./refresh        ^BenchmarkCycle$                     4x"
  "./refresh        ^BenchmarkDirectScrape$              1x"
  "./source/scrape/ring ^BenchmarkRing$                 3000x"
  "./source/scrape/ring ^BenchmarkRingMemory$           1x"
  "./store/replica  ^BenchmarkReplicaSync$               5x"
  "./server         ^BenchmarkStreamHealth$              5x"
  "./server         ^BenchmarkStreamHealthServerMemory$  1x"
  "./server         ^BenchmarkStreamFloorServerMemory$   1x"
  "./source/prom    ^BenchmarkRefresh10kNodes$           1x"
  "./source/scrape  ^BenchmarkFleetFullParse$            1x"
  "./internal/testing/routertest ^BenchmarkFastLaneToView$       1x"
  "./store/memory   ^BenchmarkStoreRefreshCycle$         1s"
  "./engine         ^BenchmarkParseVLLM$                 1s"
  "./client         ^Benchmark(Routable|Pick)$           1s"
  "./internal/testing/e2e/kubediscovery ^BenchmarkDiscoveryFollowsChurn$ 5x"
  "./internal/testing/e2e/flood ^BenchmarkFloodP99Ratio$ 1x"
  "./internal/testing/closedloop ^BenchmarkClosedLoop$  1x  3"
)
for b in "${benches[@]}"; do
  read -r pkg pattern benchtime runs <<<"$b"
  [[ "$pattern" =~ $only ]] || continue
  runs=${runs:-$count}
  echo "bench: $pkg $pattern ×$runs" >&2
  set +e
  # -v: go test then prints a run's name with its result, after whatever
  # the run printed (BenchmarkClosedLoop's tables), not before it.
  go test -v -run '^$' -bench "$pattern" -benchtime "$benchtime" -benchmem -count "$runs" -timeout 60m "$pkg" 2>&1 |
    tee -a "$out" | grep --line-buffered -E '^(Benchmark|FAIL|panic|---|\s+\S+(_test)?\.go|\s{8})' >&2
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "bench: $pkg $pattern failed (output in $out)" >&2
    exit "$status"
  fi
done
go run ./internal/cmd/benchtable <"$out"
