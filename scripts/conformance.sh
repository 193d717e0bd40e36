#!/usr/bin/env bash
# Runs the official MCP conformance suite (server scenarios) against `lumo-bridge --http`.
# The suite needs Node 22 (fs.globSync); on Node 20 it is bundled with a small fs shim. Its client
# sends no bearer token, so a pass-through proxy adds it. Results: target/conformance/results.
# Usage: scripts/conformance.sh [extra conformance args, e.g. --scenario server-initialize]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${LUMO_BRIDGE_BIN:-target/debug/lumo-bridge}"
[ -x "$bin" ] || cargo build --quiet -p lumo-bridge
mkdir -p target/conformance
node_modules/.bin/esbuild node_modules/@modelcontextprotocol/conformance/dist/index.js --bundle \
  --platform=node --format=esm --packages=external --alias:fs=./scripts/conformance/fs-shim.mjs \
  --log-level=warning --outfile=target/conformance/cli.mjs
port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
http=$(port); proxy=$(port); ext=$(port); control=$(port)
export TOKEN="conformance-$(node -e 'console.log(require("crypto").randomBytes(24).toString("hex"))')"
state=$(mktemp -d)
"$bin" --http "$http" --port "$ext" --control-port "$control" --state-dir "$state" --token "$TOKEN" \
  2>target/conformance/bridge.log &
bridge=$!
node scripts/conformance/auth-proxy.mjs "$proxy" "$http" 2>/dev/null &
px=$!
trap 'kill $bridge $px 2>/dev/null; rm -rf "$state"' EXIT
for _ in $(seq 50); do grep -q "MCP over HTTP" target/conformance/bridge.log && break; sleep 0.1; done
rm -rf target/conformance/results
node target/conformance/cli.mjs server --url "http://127.0.0.1:$proxy/mcp" \
  -o target/conformance/results "$@"
