#!/usr/bin/env bash
# scripts/sanitize.sh — the memory-safety suite, run by CI after the main suite (.ci/run):
#   1. every test under AddressSanitizer + UndefinedBehaviorSanitizer (./build-asan, -O1 to
#      keep the build short; the oneDNN route included, CUDA off). The distributed tests run
#      without leak checking: Open MPI leaves its own allocations behind at exit, from
#      plugins it has already unloaded (so no suppression can name them); memory errors and
#      undefined behaviour are still checked there;
#   2. the threaded tests (the DataLoader and the device prefetcher: label `data`) under
#      ThreadSanitizer (./build-tsan). OpenMP runs one thread there: libgomp is not
#      instrumented, so its own synchronisation would be reported as races.
# Any sanitizer report fails the run. Prints how long each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DKILN_CUDA=OFF
        -DKILN_BUILD_BENCHMARKS=OFF -DKILN_BUILD_EXAMPLES=OFF)

start=$SECONDS
asan_dir="${KILN_ASAN_BUILD_DIR:-build-asan}"
[ -f "$asan_dir/build.ninja" ] || cmake -S . -B "$asan_dir" "${common[@]}" -DKILN_SANITIZE=ON >/dev/null
cmake --build "$asan_dir" --parallel "$(nproc)"
KILN_BUILD_DIR="$asan_dir" bash scripts/onnx_runtime.sh  # the onnx tests' ONNX Runtime
built=$SECONDS
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$asan_dir" --output-on-failure --parallel "$(nproc)" --timeout 900 -E '^install\.' \
  -LE '^distributed$'
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir "$asan_dir" --output-on-failure --timeout 900 -L '^distributed$'
echo "kiln: ASan+UBSan: build $((built - start)) s, tests $((SECONDS - built)) s"

start=$SECONDS
tsan_dir="${KILN_TSAN_BUILD_DIR:-build-tsan}"
[ -f "$tsan_dir/build.ninja" ] || cmake -S . -B "$tsan_dir" "${common[@]}" -DKILN_TSAN=ON >/dev/null
cmake --build "$tsan_dir" --parallel "$(nproc)" --target kiln_data_tests
built=$SECONDS
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" OMP_NUM_THREADS=1 \
  ctest --test-dir "$tsan_dir" --output-on-failure --parallel "$(nproc)" --timeout 900 -L '^data$'
echo "kiln: TSan: build $((built - start)) s, tests $((SECONDS - built)) s"
