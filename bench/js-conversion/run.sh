#!/usr/bin/env bash
# Builds the measuring wasm (its own target dir) and prints the medians. Measures, asserts nothing.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-unknown-unknown --quiet
wasm-bindgen --target nodejs --out-dir pkg target/wasm32-unknown-unknown/release/js_conversion.wasm
# wasm-bindgen's nodejs glue is CommonJS; the repository's package.json says "module".
echo '{"type": "commonjs"}' > pkg/package.json
node bench.mjs
