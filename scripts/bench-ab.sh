#!/usr/bin/env bash
# A/B bench (not a test): the provider built at REV (A, default HEAD~1) against dist/ as built
# from the working tree (B), in turns in fresh browsers (bench/ab.mjs). Usage:
#   scripts/bench-ab.sh [REV]        (make bench-ab REV=…)
#   BENCH_NO_BUILD=1  measure dist/ as it is (B)
#   AB_ROUNDS=n AB_N=n AB_COLD=n     rounds (default 6), warm calls per scenario (default 300),
#                                    cold starts per round (default 10)
# REV's dist is built once in a temporary worktree and kept in target/ab/dist-<commit>; the
# worktrees share one cargo target directory (target/ab/cargo), so a later revision builds fast.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh test
rev=$(git rev-parse --verify "${1:-HEAD~1}^{commit}")
keep="target/ab/dist-$rev"
if [ ! -f "$keep/manifest.json" ]; then
  wt="target/ab/worktree-$rev"
  git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
  git worktree prune
  mkdir -p target/ab/cargo
  git worktree add --detach "$wt" "$rev" >&2
  # The worktree is removed however the build ends; only its dist/ is kept.
  trap 'git worktree remove --force "$wt" 2>/dev/null || true; git worktree prune' EXIT
  ln -s "$(pwd)/target/ab/cargo" "$wt/target"
  ln -s "$(pwd)/node_modules" "$wt/node_modules"
  echo "bench-ab: building $rev" >&2
  (cd "$wt" && scripts/build.sh >&2)
  rm -rf "$keep" && cp -r "$wt/dist" "$keep"
  git worktree remove --force "$wt" && git worktree prune
  trap - EXIT
fi
[ -n "${BENCH_NO_BUILD:-}" ] || scripts/build.sh >&2
node bench/ab.mjs "$keep" dist
