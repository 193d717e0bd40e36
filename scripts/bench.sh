#!/usr/bin/env bash
# The bench (not a test): builds dist/ and the bridge, then measures the provider against a
# no-logic baseline provider in headless Chromium (bench/run.mjs). Prints the tables and goals and
# writes bench/out/<timestamp>.json and bench/out/latest.json (bench/bridge.mjs: bridge-*.json).
#   BENCH_NO_BUILD=1  measure dist/ and target/bridge/lumo-bridge as they are (LUMO_DIST=path,
#                     LUMO_BRIDGE_BIN=path measure other builds)
#   BENCH_QUICK=1     smoke run with tiny sample counts, for editing the bench; not for numbers
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh test
# The bridge too (bench/bridge.mjs times it; cargo is a no-op when it is fresh).
[ -n "${BENCH_NO_BUILD:-}" ] || scripts/build.sh
node bench/run.mjs
# try_script next to a bare chrome.userScripts.execute of the same code, as a ratio.
node bench/try.mjs
# A document-start script carrying 200 KB of GM values next to the same with @grant none.
node bench/gm-values.mjs
# The bridge round trip (MCP SDK stdio client → lumo-bridge → extension) beside the port's.
node bench/bridge.mjs
# What holding webRequest costs the browser's own requests (the provider beside the baseline).
node bench/web-requests.mjs
