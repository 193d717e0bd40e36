#!/usr/bin/env bash
# Runs every fuzz target of the core for a bounded time each (default 8 s; `make fuzz` runs
# longer: FUZZ_SECONDS=300 scripts/fuzz.sh). New inputs go to a scratch corpus, so the committed
# seeds in fuzz/corpus stay small; a crash leaves its input in fuzz/artifacts and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-8}"

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz (once per machine)" >&2
  cargo install cargo-fuzz >&2
fi
# cargo-fuzz passes -Z flags for its sanitizer-coverage build; this machine has only a stable
# toolchain, which accepts them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^lumo-userscripts-fuzz$')
cargo fuzz build -O >/dev/null 2>&1 || cargo fuzz build -O
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in $targets; do
  mkdir -p "$scratch/$t"
  out=$(cargo fuzz run -O "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=0 2>&1) || {
    echo "$out" | tail -40
    echo "fuzz: $t FAILED (input saved under fuzz/artifacts/$t)"
    exit 1
  }
  echo "fuzz: $t ok ($(echo "$out" | sed -n 's/^Done \([0-9]*\) runs.*/\1/p') runs in ${seconds} s)"
done
