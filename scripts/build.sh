#!/usr/bin/env bash
# scripts/build.sh — configures (once) and builds Kiln in ./build with every core.
# Extra arguments go to cmake's configure step, e.g. -DKILN_CUDA=OFF. Re-running rebuilds
# only what changed; KILN_TARGETS names the targets to build (default: all of them).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${KILN_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ] || [ "$#" -gt 0 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
# KILN_TARGETS (e.g. "train_mlp") builds only those targets and what they need.
# shellcheck disable=SC2086  # a list of target names, split on purpose
cmake --build "$build_dir" --parallel "$(nproc)" ${KILN_TARGETS:+--target $KILN_TARGETS}
