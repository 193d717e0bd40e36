#!/usr/bin/env bash
# Runs the official MCP conformance suite (server scenarios) against `lumo-bridge --http`, with the
# real extension connected to that bridge from headless Chromium (scripts/conformance/extension.mjs:
# the user's click on the connect page, a tool call answered by the extension before the suite, the
# link still up after it). Needs a build (dist/). LUMO_CONFORMANCE_NO_EXTENSION=1 skips Chromium.
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
# Four distinct ports, taken together (one at a time, a closed port can come back twice).
read -r http proxy ext control < <(node --input-type=module \
  -e 'import { freePorts } from "./tests/lib/ports.mjs"; console.log((await freePorts(4)).join(" "))')
export TOKEN="conformance-$(node -e 'console.log(require("crypto").randomBytes(24).toString("hex"))')"
state=$(mktemp -d)
log=target/conformance/bridge.log
"$bin" --http "$http" --port "$ext" --control-port "$control" --state-dir "$state" --token "$TOKEN" \
  2>"$log" &
bridge=$!
node scripts/conformance/auth-proxy.mjs "$proxy" "$http" 2>/dev/null &
px=$!
browser=
trap 'kill $bridge $px $browser 2>/dev/null; rm -rf "$state" target/conformance/browser.fifo' EXIT
trap 'exit 1' TERM INT
for _ in $(seq 50); do grep -q "MCP over HTTP" "$log" && break; sleep 0.1; done

if [ -z "${LUMO_CONFORMANCE_NO_EXTENSION:-}" ]; then
  rm -f target/conformance/browser.fifo && mkfifo target/conformance/browser.fifo
  node scripts/conformance/extension.mjs "$log" "$http" >target/conformance/browser.fifo &
  browser=$!
  read -r -t 90 ready <target/conformance/browser.fifo || true
  [ "${ready:-}" = connected ] || { echo "conformance: the extension did not connect" >&2; exit 1; }
  echo "conformance: the extension is connected to the bridge (headless Chromium)"
fi

rm -rf target/conformance/results
status=0
node target/conformance/cli.mjs server --url "http://127.0.0.1:$proxy/mcp" \
  -o target/conformance/results "$@" || status=$?
if [ -n "$browser" ]; then
  kill -USR2 "$browser"
  wait "$browser" || status=1
  browser=
fi
exit "$status"
