#!/bin/sh
# A dependency of the binaries must have the same features whether or not tests are built:
# `make test` and `make bench` build the binaries and the tests (benchmarks) of the workspace,
# and a dev-dependency that turns on another feature of a shared crate (tokio's `test-util`,
# proptest's `bit-set` did) makes cargo compile that crate and every crate above it twice, one
# copy per feature set: minutes on the two-core CI machine.
#
# Fails naming each crate whose feature set differs, and the dev-dependency chain to look at.
set -eu
cargo=${CARGO:-cargo}
features() {
  $cargo tree -q --workspace -e "$1" -f '{p} {f}' --prefix none | sed 's/ (\*)$//' | sort -u
}
normal=$(mktemp)
with_tests=$(mktemp)
trap 'rm -f "$normal" "$with_tests"' EXIT
features normal,build > "$normal"
features normal,build,dev > "$with_tests"
# A package of the binaries' graph whose feature set under tests is not one it has without.
differing=$(awk 'NR == FNR { known[$0] = 1; package[$1 " " $2] = 1; next }
  ($1 " " $2) in package && !($0 in known)' "$normal" "$with_tests")
if [ -n "$differing" ]; then
  echo "one-feature-set: building the tests changes the features of these dependencies of the binaries:" >&2
  printf '%s\n' "$differing" | sed 's/^/  /' >&2
  echo "  (cargo tree --workspace -e features,normal,build,dev -i <crate> shows which dev-dependency turns them on)" >&2
  exit 1
fi
echo "one-feature-set: the binaries' dependencies have one feature set with and without tests"
