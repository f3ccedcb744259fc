#!/bin/sh
# `make bench`'s results writer: joins the benchmarks' parts into one markdown file on stdout.
#
#   results.sh PARTS_DIR "BENCH..." "FAILED..."
#
# PARTS_DIR holds <bench>.md for each benchmark that ran (the tables each one appended through
# arbor_testkit::bench, every row "| figure | measured | baseline | target | met? |") and
# `times`, the wall time of each step as table rows. The summary counts the verdicts of every
# row and repeats the missed ones, so a reader sees first what is not at target.
set -eu
parts=$1
benches=$2
failed=${3:-}

[ -d "$parts" ] || { echo "results.sh: $parts is not a directory" >&2; exit 2; }

rows() { for bench in $benches; do [ -f "$parts/$bench.md" ] && cat "$parts/$bench.md"; done; return 0; }
met=$(rows | grep -c '| yes |$' || true)
missed=$(rows | grep -c '| \*\*no\*\* |$' || true)

echo "# Arbor benchmarks"
echo
settings=""
[ -n "${ARBOR_BENCH_LARGE:-}" ] && settings="$settings, ARBOR_BENCH_LARGE=$ARBOR_BENCH_LARGE"
[ -n "${ARBOR_BENCH_SCALE:-}" ] && settings="$settings, ARBOR_BENCH_SCALE=$ARBOR_BENCH_SCALE"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null || echo 'no commit')$settings"
echo
echo "## Summary"
echo
echo "Targets met: $met; missed: $missed."
if [ -n "$failed" ]; then
  echo
  echo "Benchmarks that failed (no figures):$failed."
fi
if [ "$missed" -gt 0 ]; then
  echo
  echo "| missed | measured | baseline (same run) | target | met? |"
  echo "|---|---|---|---|---|"
  rows | grep '| \*\*no\*\* |$'
fi
echo
rows
echo "## Run time"
echo
echo "| step | wall time |"
echo "|---|---|"
if [ -f "$parts/times" ]; then
  cat "$parts/times"
  echo "| total | $(awk -F'|' '{ sum += $3 } END { print sum }' "$parts/times") s |"
fi
