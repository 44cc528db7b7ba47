#!/usr/bin/env bash
# scripts/sanitize.sh — builds the library and test suites with AddressSanitizer +
# UndefinedBehaviorSanitizer (in ./build-asan, optimised at -O1 to keep the build short) and
# runs every test under them. Any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir="${KILN_ASAN_BUILD_DIR:-build-asan}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1" \
    -DKILN_SANITIZE=ON -DKILN_CUDA=OFF -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$build_dir" --parallel "$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" --timeout 900 -E '^install\.'
