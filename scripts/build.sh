#!/usr/bin/env bash
# Builds dist/: the unpacked extension to load in Chrome. Prints its path and extension id.
# Then builds the native MCP bridge (bridge/) and prints its path; LUMO_NO_BRIDGE=1 skips it.
# For tests only: LUMO_FEATURES=test-trap LUMO_OUT=target/dist-trap builds a variant elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh build
dist="${LUMO_OUT:-dist}"
features="${LUMO_FEATURES:-}"

# wasm-pack drives cargo and wasm-bindgen; its settings are in Cargo.toml
# ([package.metadata.wasm-pack]). `--mode no-install` makes it use the pinned wasm-bindgen-cli that
# ensure-tools.sh installed and download nothing; wasm-opt runs below from npm's binaryen, because
# the one wasm-pack would fetch is not pinned.
out=target/bindgen${features:+-$features}
rm -rf "$out"
CARGO_TARGET_DIR="target${features:+/variant-$features}" \
  wasm-pack --log-level warn build --mode no-install --release --target web --no-typescript --no-pack \
  --out-dir "$out" . -- --quiet ${features:+--features "$features"}
# Features rustc enables by default for wasm32; wasm-opt must be told about them.
node_modules/.bin/wasm-opt -Oz --strip-debug --strip-producers \
  --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  "$out/lumo_userscripts_bg.wasm" -o "$out/lumo_userscripts_opt.wasm"

rm -rf "$dist" && mkdir -p "$dist/wasm"
cp manifest.json "$dist/"
cp extension/* "$dist/"
cp "$out/lumo_userscripts.js" "$dist/wasm/"
# The options page's code editor (CodeMirror 6 from package-lock.json), one minified ES module;
# built every time (~0.3 s), never committed. esbuild emits no eval, so the page CSP stays strict.
node_modules/.bin/esbuild bundle/codemirror.mjs --bundle --minify --format=esm --target=chrome138 \
  --log-level=warning --outfile="$dist/codemirror.js"
# The loader (extension/sw.js) fetches and compiles this after the worker's first turn.
cp "$out/lumo_userscripts_opt.wasm" "$dist/wasm/lumo_userscripts_bg.wasm"
node scripts/extension-id.mjs manifest.json "$dist"

# The native bridge: its own profile (no LTO) keeps the tokio/rmcp tree affordable to build.
# Test variants (LUMO_OUT set) skip it.
if [ -z "${LUMO_NO_BRIDGE:-}" ] && [ -z "${LUMO_OUT:-}" ]; then
  cargo build --quiet --profile bridge -p lumo-bridge
  echo "Bridge: $(pwd)/target/bridge/lumo-bridge"
fi
