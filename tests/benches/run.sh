#!/bin/sh
# `make bench`'s runner: runs one benchmark that `cargo bench --no-run --message-format=json`
# built, as `cargo bench` runs it (`<executable> --bench`, from its package's directory), without
# asking cargo again. `cargo bench --bench NAME` resolves features for NAME's package alone,
# unlike the build of every benchmark at once, and so rebuilt dependencies before some
# benchmarks (minutes on two cores, counted in the run's time budget).
#
#   run.sh BUILT_JSON NAME
set -eu
built=$1
name=$2

[ -f "$built" ] || { echo "run.sh: $built is missing (build the benchmarks first)" >&2; exit 2; }
artifact=$(grep '"reason":"compiler-artifact"' "$built" | grep '"kind":\["bench"\]' \
  | grep "\"name\":\"$name\"" | tail -n 1)
executable=$(printf '%s\n' "$artifact" | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
manifest=$(printf '%s\n' "$artifact" | sed -n 's/.*"manifest_path":"\([^"]*\)".*/\1/p')
[ -n "$executable" ] && [ -n "$manifest" ] \
  || { echo "run.sh: no benchmark named $name in $built" >&2; exit 2; }
cd "$(dirname "$manifest")"
exec "$executable" --bench
