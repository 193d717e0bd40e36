#!/usr/bin/env bash
# Where the worker's CPU goes per call (not a test): builds dist/ (unless BENCH_NO_BUILD is set),
# then samples a named copy of it with V8's profiler (bench/profile.mjs says how to read it).
#   scripts/profile.sh [probe|ping|status|write ...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh test
[ -n "${BENCH_NO_BUILD:-}" ] || LUMO_NO_BRIDGE=1 scripts/build.sh
node bench/profile.mjs "$@"
