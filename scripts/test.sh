#!/usr/bin/env bash
# Runs every test: the native core tests, then the real-browser tests against a fresh build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh test

echo "== lints (clippy, native and wasm32; the lint set is in src/lib.rs)"
cargo clippy --quiet --all-targets -- -D warnings
cargo clippy --quiet --target wasm32-unknown-unknown --lib -- -D warnings
cargo clippy --quiet -p lumo-probe --target wasm32-unknown-unknown -- -D warnings

echo "== the registered runtime is its readable source minified (src/scripts/runtime.js)"
node scripts/minify-runtime.mjs --check

echo "== native tests (cargo test)"
cargo test --quiet

echo "== bridge: native unit and integration tests (the real binary), then the MCP TS SDK client"
cargo test --quiet -p lumo-bridge
LUMO_BRIDGE_BIN=target/debug/lumo-bridge node --test tests/bridge/

echo "== fuzz (bounded; FUZZ_SECONDS=${FUZZ_SECONDS:-8} per target)"
scripts/fuzz.sh

echo "== build"
scripts/build.sh
# A test-only variant that can be made to trap, for the recovery test.
LUMO_FEATURES=test-trap LUMO_OUT=target/dist-trap scripts/build.sh >/dev/null

echo "== bridge: the official MCP conformance suite (server scenarios) against --http, with the"
echo "   extension connected from headless Chromium"
LUMO_BRIDGE_BIN=target/debug/lumo-bridge timeout 300 scripts/conformance.sh \
  --suite all --expected-failures scripts/conformance/expected-failures.yml >target/conformance.log 2>&1 \
  || { tail -40 target/conformance.log; exit 1; }
grep '^conformance' target/conformance.log
sed -n '/SUMMARY/,/^Total/p' target/conformance.log

echo "== real-browser tests (headless Chromium)"
node tests/e2e/run.mjs
