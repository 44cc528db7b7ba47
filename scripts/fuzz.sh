#!/usr/bin/env bash
# scripts/fuzz.sh — builds the libFuzzer targets with clang 16 (./build-fuzz) and runs each
# for a while (default 300 s each). Usage: bash scripts/fuzz.sh [seconds] [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh clang-16 libclang-rt-16-dev libomp-16-dev
seconds="${1:-300}"
shift || true
build_dir="${KILN_FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$build_dir/build.ninja" ]; then
  CXX=clang++-16 cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_FUZZ=ON \
    -DKILN_CUDA=OFF -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$build_dir" --parallel "$(nproc)"
targets=("$@")
if ((${#targets[@]} == 0)); then
  for t in "$build_dir"/tests/fuzz/fuzz_*; do targets+=("$(basename "$t")"); done
fi
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  mkdir -p "$corpus"
  echo "== $t for ${seconds}s"
  seeds=()
  if [ -d "tests/fuzz/seeds/$t" ]; then seeds=("tests/fuzz/seeds/$t"); fi
  "$build_dir/tests/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=10 \
    -print_final_stats=1 "$corpus" "${seeds[@]}" 2>&1 | grep -E "^(stat::|#[0-9]+ +DONE|==[0-9]+==ERROR|SUMMARY)" || true
done
