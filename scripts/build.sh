#!/usr/bin/env bash
# scripts/build.sh — configures (once) and builds Kiln in ./build with every core.
# Extra arguments go to cmake's configure step, e.g. -DKILN_CUDA=OFF. Re-running rebuilds
# only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${KILN_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ] || [ "$#" -gt 0 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$build_dir" --parallel "$(nproc)"
