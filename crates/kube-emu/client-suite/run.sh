#!/usr/bin/env bash
# Runs a client test suite that nobody here wrote against arbor-kube-emu: the cluster tests of
# the published `kube`, `kube-client` and `kube-runtime` crates (the tests their sources mark
# `#[ignore = "needs cluster ..."]`), plus their ordinary unit tests.
#
# The sources are never copied into this repository. The script fetches the published crates
# into CARGO_HOME with `cargo fetch` on a throw-away manifest, unpacks the `.crate` archives
# under target/client-suite/src, starts an emulator (TLS, like a real cluster) and runs
# `cargo test` in each crate with KUBECONFIG pointing at it. Build products stay in
# target/client-suite, so a second run only rebuilds what changed.
#
# Usage: crates/kube-emu/client-suite/run.sh   (or `make client-suite`)
# Environment: KUBE_SUITE_VERSION (default: the `kube` version in Cargo.lock),
#              ARBOR_KUBE_EMU (a prebuilt emulator binary; default: build this checkout's),
#              CLIENT_SUITE_TARGET_DIR (default target/client-suite),
#              CARGO (default cargo), KEEP_SUITE_LOGS=1 keeps the logs and the kubeconfig.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../../.." && pwd)
cargo=${CARGO:-cargo}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
version=${KUBE_SUITE_VERSION:-$(awk '/^name = "kube"$/ {getline; gsub(/"/, "", $3); print $3; exit}' "$repo/Cargo.lock")}
[ -n "$version" ] || { echo "client-suite: no kube version in $repo/Cargo.lock" >&2; exit 2; }
suite_target=${CLIENT_SUITE_TARGET_DIR:-$repo/target/client-suite}
sources="$suite_target/src"

# Tests that need a kubelet: a container that really runs (phase Running, ContainersReady),
# its output, exec into it. The emulator has no kubelet and does not pretend to be one: a pod
# that says Running with no process behind it would make `exec` and `logs` answers up.
# Each entry: a test name (a substring, as `cargo test --skip` takes it) and why it is out.
kubelet_tests=(
  "pod_can_await_conditions|waits for a busybox pod's phase Running and ContainersReady"
  "pod_can_exec_and_write_to_stdin|execs into a running busybox container (pods/exec)"
  "can_get_pod_logs_and_evict|reads what the container printed (pods/log), then evicts it"
)
# Left out for other reasons; the kubelet-debug tests are not even built (feature off).
other_skips=(
  "event_recorder_attaches_events_without_namespace|reads ComponentStatus \"scheduler\": kube-apiserver probes a real scheduler; the emulator has none to report"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/arbor-client-suite.XXXXXX")
emu_pid=""
cleanup() {
  if [ -n "$emu_pid" ]; then kill "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true; fi
  if [ "${KEEP_SUITE_LOGS:-}" = 1 ]; then echo "client-suite: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "client-suite: kube $version, sources in $sources"

# 1. The published sources, through cargo's own registry client.
mkdir -p "$work/fetch/src" "$sources"
cat >"$work/fetch/Cargo.toml" <<EOF
[package]
name = "arbor-client-suite-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
kube = { version = "=$version", default-features = false }
kube-client = { version = "=$version", default-features = false }
kube-runtime = { version = "=$version", default-features = false }

[workspace]
EOF
: >"$work/fetch/src/lib.rs"
"$cargo" fetch -q --manifest-path "$work/fetch/Cargo.toml"

# Publishing drops path-only dev-dependencies: upstream, kube-client's and kube-runtime's tests
# use the `kube` facade of the same workspace (`kube = { path = "../kube", ... }` in their
# Cargo.toml.orig). Restore that edge to the unpacked `kube`, and patch the crate under test
# into the graph so `kube` builds on it, as in the upstream workspace.
restore_kube_dev_dependency() {
  local dir=$1 crate=$2 features=$3
  cat >>"$dir/Cargo.toml" <<EOF

[dev-dependencies.kube]
path = "../kube-$version"
features = [$features]

[patch.crates-io]
$crate = { path = "." }
EOF
}
for crate in kube kube-client kube-runtime; do
  dir="$sources/$crate-$version"
  [ -e "$dir/.arbor-client-suite" ] && continue
  rm -rf "$dir"
  archive=$(find "$cargo_home/registry/cache" -name "$crate-$version.crate" -print -quit)
  [ -n "$archive" ] || { echo "client-suite: $crate-$version.crate not in $cargo_home/registry/cache" >&2; exit 2; }
  tar -xzf "$archive" -C "$sources"
  # Its own workspace root: target/client-suite lies inside Arbor's workspace directory.
  printf '\n[workspace]\n' >>"$dir/Cargo.toml"
  case $crate in
    kube-client) restore_kube_dev_dependency "$dir" "$crate" '"derive", "client", "ws"' ;;
    kube-runtime) restore_kube_dev_dependency "$dir" "$crate" '"derive", "client", "runtime"' ;;
  esac
  # The crate's own Cargo.lock pins what its authors tested with. When the registry no longer
  # offers one of those versions (a yanked release), resolve against this repository's
  # Cargo.lock instead: the versions Arbor builds with, plus what the dev-dependencies add.
  if ! (cd "$dir" && "$cargo" metadata -q --format-version 1 >/dev/null 2>"$work/$crate.lock.err"); then
    echo "client-suite: $crate's published Cargo.lock does not resolve ($(grep -m1 '^error' "$work/$crate.lock.err")); seeding it from Arbor's Cargo.lock"
    cp "$repo/Cargo.lock" "$dir/Cargo.lock"
  fi
  touch "$dir/.arbor-client-suite"
done

# 2. The emulator, as its own process.
# ARBOR_KUBE_EMU names a prebuilt binary instead (say, an older commit's, for a before/after).
emu_bin=${ARBOR_KUBE_EMU:-}
if [ -z "$emu_bin" ]; then
  "$cargo" build -q -p arbor-kube-emu --bin arbor-kube-emu --manifest-path "$repo/Cargo.toml"
  emu_bin="${CARGO_TARGET_DIR:-$repo/target}/debug/arbor-kube-emu"
fi
# As a real cluster: TLS, and RBAC with kube's bootstrap policy (cluster-admin, ...) where the
# binary has it (`--authorization rbac`); the kubeconfig's user is the emulator's admin.
emu_args=(--tls)
if "$emu_bin" --help 2>/dev/null | grep -q -- '--authorization'; then
  emu_args+=(--authorization rbac)
fi
"$emu_bin" "${emu_args[@]}" --kubeconfig-out "$work/kubeconfig" >"$work/emu.out" 2>"$work/emu.log" &
emu_pid=$!
for _ in $(seq 1 100); do
  grep -q '^listening on ' "$work/emu.out" 2>/dev/null && break
  kill -0 "$emu_pid" 2>/dev/null || { cat "$work/emu.log" >&2; exit 2; }
  sleep 0.1
done
grep -q '^listening on ' "$work/emu.out" || { echo "client-suite: the emulator did not start" >&2; exit 2; }
echo "client-suite: emulator $emu_bin ${emu_args[*]} at $(sed 's/^listening on //' "$work/emu.out")"

# 3. The suites, one test at a time: the cluster tests share the `default` namespace.
skip_args=()
for entry in "${kubelet_tests[@]}" "${other_skips[@]}"; do skip_args+=(--skip "${entry%%|*}"); done
export KUBECONFIG="$work/kubeconfig"
export CARGO_TARGET_DIR="$suite_target"
unset RUST_LOG

total_pass=0 total_fail=0 cluster_pass=0 cluster_fail=0
failures=()
# run <label> <crate dir> <features> <libtest args...>: adds to the totals.
run() {
  local label=$1 dir=$2 features=$3
  shift 3
  local log="$work/${label// /-}.log"
  (cd "$dir" && "$cargo" test -q --lib --features "$features" -- --test-threads=1 "$@") >"$log" 2>&1 || true
  local summary
  summary=$(grep -E '^test result: ' "$log" | tail -n 1 || true)
  if [ -z "$summary" ]; then
    echo "client-suite: $label did not run; the end of its log:" >&2
    tail -n 30 "$log" >&2
    exit 2
  fi
  local passed failed
  passed=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$summary")
  failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$summary")
  printf '  %-22s %4d passed %4d failed\n' "$label" "$passed" "$failed"
  total_pass=$((total_pass + passed)) total_fail=$((total_fail + failed))
  if [[ $label == *cluster* ]]; then
    cluster_pass=$((cluster_pass + passed)) cluster_fail=$((cluster_fail + failed))
  fi
  local name
  while read -r name; do
    [ -n "$name" ] && failures+=("$label: $name")
  done < <(sed -nE 's/^(test )?([^ ]+) (\.\.\.|---) FAILED$/\2/p' "$log")
  if [ "$failed" != 0 ]; then
    # What the emulator answered, from each failure's output.
    sed -n '/^failures:$/,/^test result/p' "$log" | grep -E '^(---- |Error: |  left|  right|thread )' \
      | sed 's/^/      /' | cut -c1-240 | head -n 80
  fi
}

for crate in kube kube-client kube-runtime; do
  case $crate in
    # What the crates gate their cluster tests on: derive + runtime (the CRD test), ws
    # (attach), unstable-client (client_ext's fetch/list tests). Not openssl-tls (a second TLS
    # stack for one test of the same list call) and not kubelet-debug (needs a kubelet).
    kube) features="client,rustls-tls,ring,derive,runtime,ws,admission,jsonpatch" ;;
    kube-client) features="client,config,rustls-tls,ring,ws,jsonpatch,unstable-client" ;;
    kube-runtime) features="" ;;
  esac
  echo "client-suite: $crate (features: ${features:-default})"
  run "$crate unit" "$sources/$crate-$version" "$features" "${skip_args[@]}"
  run "$crate cluster" "$sources/$crate-$version" "$features" --ignored "${skip_args[@]}"
done

echo
echo "left out, need a kubelet:"
for entry in "${kubelet_tests[@]}"; do printf '  %-36s %s\n' "${entry%%|*}" "${entry#*|}"; done
echo "left out, other reasons:"
for entry in "${other_skips[@]}"; do printf '  %-36s %s\n' "${entry%%|*}" "${entry#*|}"; done
if [ ${#failures[@]} -gt 0 ]; then
  echo "failed:"
  printf '  %s\n' "${failures[@]}"
fi
echo
echo "client-suite: cluster tests $cluster_pass passed, $cluster_fail failed; all tests $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
