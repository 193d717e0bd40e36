#!/usr/bin/env bash
# Installs what the build and the tests need, only when it is missing, so a fresh machine works
# and a prepared one pays a few milliseconds. Usage: ensure-tools.sh [build|test]
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-build}"

log() { echo "ensure-tools: $*" >&2; }

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  log "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown >&2
fi

# clippy: `make test` lints before it tests.
if [ "$what" = test ] && ! cargo clippy --version >/dev/null 2>&1; then
  log "adding the clippy component"
  rustup component add clippy >&2
fi

# wasm-bindgen-cli must match the wasm-bindgen crate in Cargo.lock exactly: the generated glue
# and the crate's ABI change between versions.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ -z "$want" ]; then
  log "Cargo.lock names no wasm-bindgen version"; exit 1
fi
if [ "$have" != "$want" ]; then
  log "installing wasm-bindgen-cli $want (have: ${have:-none}); this takes ~10 minutes once per machine"
  # Without --locked: with it, one of its dependencies fails to resolve.
  cargo install wasm-bindgen-cli --version "$want" >&2
fi

# wasm-pack builds the module (scripts/build.sh). It checks crates.io for a newer version of itself
# unless its stamp file (next to the binary) is younger than 24 h; keeping the stamp fresh keeps
# every build off the network.
wp_want=0.15.1
if [ "$(wasm-pack --version 2>/dev/null | awk '{print $2}')" != "$wp_want" ]; then
  log "installing wasm-pack $wp_want; this takes ~8 minutes once per machine"
  cargo install wasm-pack --version "$wp_want" --locked >&2 || cargo install wasm-pack --version "$wp_want" >&2
fi
printf 'created %s\nversion %s' "$(date -Iseconds)" "$wp_want" >"$(dirname "$(command -v wasm-pack)")/wasm-pack.stamp"

# npm dependencies (wasm-opt from binaryen, esbuild; the MCP SDK and playwright-core for tests).
# Installed again only when package-lock.json's *content* changed: a checkout or merge touches its
# mtime, and a needless `npm ci` empties node_modules under any other run using it.
lock_sha=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f node_modules/.package-lock.json ] || [ "$(cat node_modules/.lumo-lock-sha 2>/dev/null)" != "$lock_sha" ]; then
  log "installing npm dependencies"
  npm ci --no-audit --no-fund >&2
  echo "$lock_sha" >node_modules/.lumo-lock-sha
fi

if [ "$what" = test ]; then
  if [ ! -x /usr/lib/chromium/chromium ] && [ ! -x /usr/bin/chromium ]; then
    log "installing Debian's chromium"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2
  fi
fi
