#!/usr/bin/env bash
# fuzz/run.sh DURATION [PATTERN]
#
# Runs every fuzz target of the repository (every func FuzzXxx in a
# *_test.go file), one after the other, for DURATION each, and prints per
# target the executions, the new interesting inputs (new coverage) and the
# corpus size. DURATION is go test's -fuzztime: a time (30s, 10m, 2h) or a
# count of executions after the baseline (20000x). PATTERN (an extended
# regular expression) limits the run to matching target names.
#
# The corpus the fuzzer grows is kept in $FUZZ_CORPUS (default fuzz/corpus,
# ignored by git), one directory per package and target; it is loaded into
# the go build cache's fuzz directory before each target runs, so a
# campaign resumes where the last one stopped, and new entries are copied
# back after. A failing input is written by go test to the package's
# testdata/fuzz/TARGET/ (commit it with the fix: it becomes a regression
# test).
#
# Exit status: 0 when every target ran past its baseline coverage and
# found no failure; 1 otherwise (every target still runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
	sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
duration=$1
pattern=${2:-.}
if ! [[ $duration =~ ^[0-9]+(x|ns|us|ms|s|m|h)$|^[0-9hms.]+$ ]]; then
	echo "fuzz/run.sh: DURATION $duration is not a -fuzztime value (e.g. 30s, 10m, 20000x)" >&2
	exit 2
fi
corpus=${FUZZ_CORPUS:-fuzz/corpus}
mkdir -p "$corpus"
corpus=$(cd "$corpus" && pwd)
cache=$(go env GOCACHE)/fuzz
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

# targets: "pkgdir name" lines, sorted.
targets=$(grep -rl --include='*_test.go' '^func Fuzz' . |
	grep -v -e '/testdata/' -e '/vendor/' | sort |
	while IFS= read -r file; do
		for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
			echo "$(dirname "$file") $name"
		done
	done | awk -v re="$pattern" '$2 ~ re' | sort -u)
if [ -z "$targets" ]; then
	echo "fuzz/run.sh: no fuzz target matches $pattern" >&2
	exit 1
fi
ntargets=$(echo "$targets" | wc -l)
echo "fuzz/run.sh: $ntargets targets, -fuzztime $duration each, corpus $corpus"

count() { find "$1" -type f 2>/dev/null | wc -l; }
summary=()
failed=0
while read -r pkgdir name; do
	pkg=$(go list "$pkgdir")
	kept="$corpus/${pkgdir#./}/$name"
	[ "$pkgdir" = "." ] && kept="$corpus/root/$name"
	live="$cache/$pkg/$name"
	mkdir -p "$kept" "$live"
	cp -n "$kept"/* "$live"/ 2>/dev/null || true
	before=$(count "$kept")
	log="$logdir/$name.log"
	echo "-- $name in $pkgdir"
	status=ok
	start=$SECONDS
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$duration" "$pkgdir" >"$log" 2>&1; then
		status=FAIL
	fi
	secs=$((SECONDS - start))
	progress=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -n 1 || true)
	execs=$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' <<<"$progress")
	newcov=$(sed -n 's/.*new interesting: \([0-9]*\).*/\1/p' <<<"$progress")
	if [ "$status" = ok ] && ! grep -q 'now fuzzing' "$log"; then
		status="BASELINE-ONLY"
	fi
	cp -n "$live"/* "$kept"/ 2>/dev/null || true
	after=$(count "$kept")
	if [ "$status" != ok ]; then
		failed=$((failed + 1))
		tail -n 30 "$log"
	else
		grep -E 'gathering baseline coverage: [0-9]+/[0-9]+ completed, now fuzzing' "$log" | head -n 1 || true
		echo "$progress"
	fi
	summary+=("$(printf '%-34s %-22s %10s %8s %8s %6ss  %s' "$name" "$pkgdir" "${execs:-0}" "${newcov:-0}" "$((after - before))/$after" "$secs" "$status")")
done <<<"$targets"

echo
printf '%-34s %-22s %10s %8s %8s %7s  %s\n' target package execs "new cov" "kept" time status
printf '%s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
	echo "fuzz/run.sh: $failed of $ntargets targets failed or never got past baseline coverage" >&2
	echo "(BASELINE-ONLY: give more time, or a count such as 20000x, which always runs past the baseline)" >&2
	exit 1
fi
echo "fuzz/run.sh: $ntargets targets passed"
