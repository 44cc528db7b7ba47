#!/usr/bin/env bash
# scripts/gpu_check.sh — everything GPU-side in one run, for a machine with a GPU (sized for
# under 8 minutes on one H200 with 16 cores): configure with CUDA (sm_90), build with every
# core, run the whole test suite (the CUDA tests included), train the examples briefly on
# --device cuda, run the GPU benchmarks, and write a summary to $OUT/gpu_report.md (or
# build-gpu/report/ without $OUT). Machines without network get their dependencies from
# .gpu-deps/ (scripts/gpu_deps.sh stages it here; the device tool carries it).
#   bash scripts/gpu_deps.sh                    # here, once
#   device run: bash scripts/gpu_check.sh       # carry: [".gpu-deps"]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build-gpu/report}"
mkdir -p "$out"
report="$out/gpu_report.md"
log="$out/gpu_check.log"
: >"$log"
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
section() { printf '\n## %s (at %ss)\n\n' "$1" "$(elapsed)" >>"$report"; }

extra=()
if [ -d .gpu-deps/usr ]; then
  deps="$PWD/.gpu-deps/usr"
  lib="$deps/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
  extra=(-DCMAKE_PREFIX_PATH="$deps;$lib/cmake" -DEigen3_DIR="$deps/share/eigen3/cmake"
         -DZLIB_INCLUDE_DIR="$deps/include" -DZLIB_LIBRARY="$lib/libz.a")
  export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  export KILN_FASHION_MNIST="$PWD/.gpu-deps/fashion-mnist"
fi

# NCCL: the CUDA toolkit's if it has one, else the nvidia-nccl wheel PyTorch brings along.
if ! [ -e /usr/local/cuda/include/nccl.h ]; then
  nccl_root=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
  [ -n "$nccl_root" ] && [ -e "$nccl_root/include/nccl.h" ] && extra+=(-DKILN_NCCL_ROOT="$nccl_root")
fi

{
  echo "# Kiln GPU check"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  nvcc --version 2>&1 | tail -1
  echo '```'
} >"$report"

section "Build"
if cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
     "${extra[@]}" >>"$log" 2>&1 && cmake --build build-gpu --parallel "$(nproc)" >>"$log" 2>&1; then
  echo "configured and built with CUDA in $(elapsed)s" >>"$report"
else
  echo "**build failed** (last lines of the log):" >>"$report"
  { echo '```'; tail -40 "$log"; echo '```'; } >>"$report"
  cat "$report"
  exit 1
fi

section "Tests"
ctest --test-dir build-gpu -j 8 --timeout 300 >"$out/ctest.log" 2>&1
grep -E "tests passed|tests failed" "$out/ctest.log" >>"$report"
echo "CUDA tests run (not skipped): $(grep -cE 'Cuda.*Passed|Cuda.*Failed' "$out/ctest.log")" >>"$report"
if grep -q "(Failed)\|(Timeout)\|Exception" "$out/ctest.log"; then
  { echo; echo "Failures:"; echo '```'; grep -E "\(Failed\)|\(Timeout\)|Exception" "$out/ctest.log" | head -40; echo '```'; } >>"$report"
  ctest --test-dir build-gpu --rerun-failed --output-on-failure 2>&1 | tail -150 >"$out/failures.log"
fi

section "NCCL backend (tests/distributed/nccl, ranks as threads)"
grep -E "distributed (MPI|NCCL) backend" "$log" | sed 's/^-- /- /' >>"$report"
if [ -x build-gpu/tests/kiln_nccl_tests ]; then
  timeout 240 build-gpu/tests/kiln_nccl_tests >"$out/nccl.log" 2>&1
  { echo '```'; grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Skipped|refus|Failure|error" "$out/nccl.log" | head -30; echo '```'; } >>"$report"
fi

section "Examples on --device cuda"
run_example() {  # name, seconds, arguments...
  local name=$1 limit=$2
  shift 2
  if [ ! -x "build-gpu/examples/$name" ]; then
    echo "- $name: not built" >>"$report"
    return
  fi
  if timeout "$limit" "build-gpu/examples/$name" "$@" >"$out/$name.log" 2>&1; then
    echo "- \`$name $*\`: $(grep -E 'final|accuracy|bits/character|scale|bandwidth|GB/s|overlap|speed|Peak (allocated|reserved)|batch-size auto' "$out/$name.log" | tail -4 | tr '\n' ';')" >>"$report"
  else
    echo "- \`$name $*\`: **failed** (exit $?): $(tail -3 "$out/$name.log" | tr '\n' ' ')" >>"$report"
  fi
}
run_example train_mlp 120 --device cuda --epochs 3
run_example train_cnn 150 --device cuda --epochs 2 --batch-size 128
run_example amp_train 150 --device cuda --epochs 1 --batch-size 512
run_example fgsm 120 --device cuda --epochs 1 --png "$out/fgsm.png"
run_example pinned_pipeline 120 --device cuda --epochs 1
# The sequence models: attention, and the LSTM's fused step (core/cuda/rnn.cu).
run_example train_charlm 100 --device cuda --minutes 1 --text "$PWD/.gpu-deps/fortunes"
run_example train_charlm 100 --device cuda --minutes 1 --model lstm --text "$PWD/.gpu-deps/fortunes"

section "Memory plan against cuda::memory_stats (kiln::memory::plan)"
if timeout 120 build-gpu/tests/kiln_memory_tests --gtest_filter='MemoryPlanOnGpu.*' >"$out/memory_plan.log" 2>&1; then
  echo "- planned peak = measured peak (MemoryPlanOnGpu): passed" >>"$report"
else
  { echo "- MemoryPlanOnGpu **failed**:"; echo '```'; grep -vE '^\|' "$out/memory_plan.log" | tail -30; echo '```'; } >>"$report"
fi
run_example train_cnn 60 --device cuda --plan
# The largest batch the plan says fits must then run without running out of memory.
run_example train_cnn 180 --device cuda --batch-size auto --epochs 1

section "Benchmarks (tests/bench/cuda)"
if [ -x build-gpu/tests/bench/bench_cuda ]; then
  timeout 240 build-gpu/tests/bench/bench_cuda --benchmark_min_time=0.2 \
    --benchmark_out="$out/bench_cuda.json" --benchmark_out_format=json >"$out/bench_cuda.txt" 2>&1
  { echo '```'; grep -E "^BM_" "$out/bench_cuda.txt"; echo '```'; } >>"$report"
fi
printf '\nTotal: %ss\n' "$(elapsed)" >>"$report"
cat "$report"
