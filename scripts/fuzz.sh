#!/usr/bin/env bash
# Runs every Go fuzz target of the repository (func FuzzX(f *testing.F) in
# a _test.go file) for FUZZTIME each (default 30s), one after another, and
# stops at the first failure. `go test` alone (make check, make test) runs
# only the targets' seed corpora: f.Add's inputs and the files under each
# package's testdata/fuzz/FuzzX/.
#
#   make fuzz                     # every target, 30 s each
#   FUZZTIME=5m make fuzz         # longer
#   ONLY=Webhook make fuzz        # the targets whose name matches
#   PARALLEL=1 make fuzz          # one fuzzing worker (default: GOMAXPROCS)
#   FUZZMINIMIZETIME=1m make fuzz # longer to shrink a kept input (default 10s)
#
# A failure leaves the input that failed in the package's
# testdata/fuzz/FuzzX/: it is a seed from then on, so `go test` fails too
# until the code is fixed. Commit it with the fix as a regression entry.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
ONLY=${ONLY:-}
PARALLEL=${PARALLEL:-}
# How long the fuzzer may spend shrinking an input it keeps (a new
# interesting one or a failure); Go's default, 60s, would take all of a
# short FUZZTIME for one large seed's mutation.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}

# Packages with a fuzz target: grep narrows them, one go test -list names
# the targets each test binary really has (it prints a package's names,
# then "ok <package>").
mapfile -t dirs < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . | xargs -r -n1 dirname | sort -u)
if [ ${#dirs[@]} -eq 0 ]; then
	echo "fuzz: no package has a fuzz target" >&2
	exit 1
fi
targets=()
names=()
while read -r first second _; do
	case $first in
	Fuzz*) names+=("$first") ;;
	ok)
		for name in "${names[@]}"; do
			if [ -n "$ONLY" ] && ! grep -qE -- "$ONLY" <<<"$name"; then continue; fi
			targets+=("$second $name")
		done
		names=()
		;;
	esac
done < <($GO test -list '^Fuzz' "${dirs[@]}")
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz: no fuzz target${ONLY:+ matching $ONLY}" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, $FUZZTIME each"

par=()
[ -n "$PARALLEL" ] && par=(-parallel "$PARALLEL")
for t in "${targets[@]}"; do
	d=${t% *} name=${t#* }
	echo "=== $d $name"
	log=$(mktemp)
	if $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "${par[@]}" "$d" 2>&1 | tee "$log"; then
		rm -f "$log"
		continue
	fi
	input=$(grep -oE "testdata/fuzz/${name}/[0-9a-f]+" "$log" | head -n1 || true)
	rm -f "$log"
	echo >&2
	echo "fuzz: $name in $d failed." >&2
	if [ -n "$input" ]; then
		dir=$(realpath --relative-to=. "$($GO list -f '{{.Dir}}' "$d")")
		cat >&2 <<MSG
The input that failed is $dir/$input: go test now runs it as a seed, so
	go test -run '^${name}/${input##*/}\$' ./$dir
reproduces it. Fix the code (not the assertion), then commit the file with
the fix: it stays in the corpus as a regression entry.
MSG
	else
		echo "No input was written (the build or a seed failed): read the output above." >&2
	fi
	exit 1
done
echo "fuzz: every target ran $FUZZTIME without a failure"
