#!/usr/bin/env bash
# scripts/gpu_check.sh — everything GPU-side in one run, for the GPU machine (one H200, 16 cores,
# 15 minutes of device time in all: this run is sized for 8, and stops its steps at that budget):
# configure with CUDA (sm_90), build with every core, run the whole test suite (the CUDA tests
# included), train the examples briefly on --device cuda, run the GPU benchmarks, and write
# gpu-report.md (commit it as docs/gpu-report.md) into $OUT, or <build>/report without $OUT.
# That machine has no network and no Debian packages: the build's dependencies come from
# .gpu-deps/ (scripts/gpu_deps.sh), cuDNN/NCCL/cuBLAS from python3's nvidia-* wheels where the
# CUDA toolkit lacks them. scripts/gpu_rehearse.sh runs this script here, in that layout.
#   bash scripts/gpu_deps.sh                    # here, once
#   device run: bash scripts/gpu_check.sh       # carry: [".gpu-deps"]
set -uo pipefail
cd "$(dirname "$0")/.."

# Settings from the environment:
#   KILN_GPU_BUILD      the build folder (build-gpu)
#   KILN_GPU_BUDGET_S   seconds the whole run may take (480): each step's timeout is cut to what
#                       is left, and a step with nothing left is reported as skipped, so the
#                       report is always complete before the device tool's own limit; 0: no budget
#   KILN_GPU_REHEARSAL  set by scripts/gpu_rehearse.sh: says so at the top of the report
#   KILN_GPU_COMMIT     the commit named in the report, where this folder is no git checkout
build="${KILN_GPU_BUILD:-build-gpu}"
budget="${KILN_GPU_BUDGET_S:-480}"
logs="$build/report"  # every log; packed into $OUT/gpu-logs.tar.gz at the end
out="${OUT:-$logs}"   # the report. $OUT brings back at most 8 files: the report and the logs' archive
mkdir -p "$logs" "$out"
report="$out/gpu-report.md"
log="$logs/gpu_check.log"
: >"$log"
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
jobs=$(nproc)
test_jobs=$((jobs < 8 ? jobs : 8))

# --- time: each section's seconds, and the budget -----------------------------------------------
timings=()
current=""
current_start=0
end_section() {
  [ -n "$current" ] || return 0
  local s=$(($(date +%s) - current_start))
  printf '\n_%s: %s s_\n' "$current" "$s" >>"$report"
  timings+=("| $current | $s |")
  current=""
}
section() {
  end_section
  current=$1
  current_start=$(date +%s)
  printf '\n## %s\n\n' "$1" >>"$report"
}
# CPU seconds (user + system) spent so far by the commands this script waited for: a step's CPU
# time over a machine's cores is about what it takes there. `times` must run in this shell, not
# in a $(...) subshell, which has waited for nothing: cpu_mark writes it down, cpu_read reads it.
cpu_mark() { times >"$logs/times.txt"; }
cpu_read() {
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$logs/times.txt"
}
# limit SECONDS: SECONDS, or less when the budget has less left (20 s kept for the report's end).
limit() {
  local want=$1 left
  if [ "$budget" -gt 0 ]; then
    left=$((budget - $(elapsed) - 20))
    [ "$left" -lt "$want" ] && want=$left
  fi
  [ "$want" -lt 1 ] && want=1  # never 0: timeout 0 would mean no limit at all
  echo "$want"
}

# --- where the dependencies are -----------------------------------------------------------------
extra=()
roots=()    # the KILN_*_ROOT settings among them, for the report
ld_dirs=()
if [ -d .gpu-deps/usr ]; then
  deps="$PWD/.gpu-deps/usr"
  multiarch=$(gcc -print-multiarch 2>/dev/null || true)
  lib="$deps/lib/${multiarch:-x86_64-linux-gnu}"
  # Exported, not only passed to this configure: ctest's install.find_package_consumer configures a
  # second project, whose find_package(Kiln) must find the same Eigen, zlib and nlohmann-json.
  export CMAKE_PREFIX_PATH="$deps:$lib/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  extra+=(-DEigen3_DIR="$deps/share/eigen3/cmake" -DZLIB_INCLUDE_DIR="$deps/include"
          -DZLIB_LIBRARY="$lib/libz.a")
  ld_dirs+=("$lib")  # libbenchmark.so
  export KILN_FASHION_MNIST="$PWD/.gpu-deps/fashion-mnist"
fi

# The CUDA toolkit KilnCuda.cmake will use: /usr/local/cuda's nvcc when there is one, else PATH's.
nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || echo nvcc)
cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v "$nvcc" || echo "$nvcc")")")")
in_toolkit() {  # a glob under the toolkit's include/ or lib/ folders
  compgen -G "$cuda_home/$1" >/dev/null || compgen -G "$cuda_home/targets/*/$1" >/dev/null ||
    compgen -G "$cuda_home/${1/#lib\//lib64/}" >/dev/null
}
wheel() {  # a python3 package's folder (nvidia.cudnn -> .../site-packages/nvidia/cudnn), or nothing
  python3 -c "import $1 as n; print(list(n.__path__)[0])" 2>/dev/null || true
}
# cuDNN, NCCL and cuBLAS: the toolkit's when it has them, else PyTorch's wheels (Note [Libraries
# from wheels] in cmake/KilnCuda.cmake). The wheels' lib folders go on LD_LIBRARY_PATH as well as
# into the build's RPATH: cuDNN 9 dlopens its parts (libcudnn_graph.so.9, ...) by name.
if ! in_toolkit include/cudnn.h && ! [ -e /usr/include/cudnn.h ]; then
  root=$(wheel nvidia.cudnn)
  [ -n "$root" ] && [ -e "$root/include/cudnn.h" ] && roots+=(-DKILN_CUDNN_ROOT="$root") && ld_dirs+=("$root/lib")
fi
if ! in_toolkit include/nccl.h; then
  root=$(wheel nvidia.nccl)
  [ -n "$root" ] && [ -e "$root/include/nccl.h" ] && roots+=(-DKILN_NCCL_ROOT="$root") && ld_dirs+=("$root/lib")
fi
if ! in_toolkit 'lib/libcublas.so*'; then
  for package in nvidia.cu13 nvidia.cublas; do
    root=$(wheel $package)
    if [ -n "$root" ] && compgen -G "$root/lib/libcublas.so*" >/dev/null; then
      roots+=(-DKILN_CUBLAS_ROOT="$root")
      ld_dirs+=("$root/lib")
      break
    fi
  done
fi
if ((${#ld_dirs[@]})); then
  joined=$(IFS=:; echo "${ld_dirs[*]}")
  export LD_LIBRARY_PATH="$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# --- configure first, so that the report opens with what was found -------------------------------
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${extra[@]}" "${roots[@]}" >>"$log" 2>&1
configured=$?
configure_s=$(elapsed)

{
  echo "# Kiln GPU check"
  echo
  echo "Written by \`scripts/gpu_check.sh\` on $(date -u +%Y-%m-%dT%H:%MZ) at commit" \
       "${KILN_GPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}; committed as \`docs/gpu-report.md\`."
  if [ -n "${KILN_GPU_REHEARSAL:-}" ]; then
    echo
    echo "**Rehearsal** (\`scripts/gpu_rehearse.sh\`) on a machine without a GPU, in the GPU machine's"
    echo "layout: every CUDA test skips and every example on \`--device cuda\` fails, by design."
  fi
  echo
  echo "## Machine and libraries"
  echo
  echo '```'
  if command -v nvidia-smi >/dev/null; then
    echo "GPU, driver:  $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  else
    echo "GPU, driver:  none (no nvidia-smi)"
  fi
  echo "libcuda:      $(ldconfig -p 2>/dev/null | grep -m1 -o '=> .*libcuda\.so\.1$' || echo 'not in the loader cache')"
  echo "nvcc:         $nvcc, $("$nvcc" --version 2>&1 | grep -o 'release [0-9.]*' || echo 'not found')"
  echo "cmake, gcc:   $(cmake --version | head -1 | grep -o '[0-9][0-9.]*'), $(gcc -dumpfullversion 2>&1)"
  echo "cores:        $jobs"
  echo "python3:      $(command -v python3) $(python3 -c 'import importlib.metadata as m
for p in ("nvidia-cudnn-cu13", "nvidia-nccl-cu13", "nvidia-cublas", "torch"):
    try: print(p, m.version(p), end="; ")
    except Exception: print(p, "absent", end="; ")' 2>&1)"
  echo "roots given:  ${roots[*]:-none}"
  echo '```'
  echo
  echo "What configure found (the libraries the build links):"
  echo
  grep -E "^-- Kiln " "$log" | sed 's/^-- /- /'
} >"$report"
timings+=("| Configure | $configure_s |")

section "Build"
cpu_mark
cpu_before=$(cpu_read)
if [ "$configured" -eq 0 ] && timeout "$(limit 100000)" cmake --build "$build" --parallel "$jobs" -- -k 0 >>"$log" 2>&1; then
  cpu_mark
  echo "Built with CUDA on $jobs cores: $(($(date +%s) - current_start)) s, $(($(cpu_read) - cpu_before)) CPU seconds." >>"$report"
  # What the dynamic loader resolves for the test programs, with this script's LD_LIBRARY_PATH: a
  # library 'not found' here fails every CUDA test before it starts.
  { echo; echo "Run-time libraries of kiln_core_tests and kiln_nccl_tests (ldd):"; echo '```'
    for program in kiln_core_tests kiln_nccl_tests; do ldd "$build/tests/$program" 2>&1; done |
      grep -E 'cudnn|cublas|nccl|cudart|libcuda\.|not found' | sed 's/ (0x[0-9a-f]*)$//' | sort -u
    echo '```'; } >>"$report"
else
  echo "**configure or build failed** (last lines of the log):" >>"$report"
  # -k 0 built everything it could: each failed file and its first errors, then the log's end.
  { echo '```'; grep -E '^FAILED: |error' "$log" | head -40; echo '...'; grep -v '^\[' "$log" | tail -15
    echo '```'; } >>"$report"
  end_section
  cat "$report"
  [ -n "${OUT:-}" ] && tar -czf "$OUT/gpu-logs.tar.gz" -C "$logs" .
  exit 1
fi

section "Tests"
tests_failed=0
cpu_mark
cpu_before=$(cpu_read)
# --output-on-failure: a test that fails once and passes on the rerun below still leaves its
# output (the first H200 run lost a train_ddp case's that way).
timeout "$(limit 420)" ctest --test-dir "$build" -j "$test_jobs" --timeout 300 --output-on-failure >"$logs/ctest.log" 2>&1
cpu_mark
grep -E "tests passed|tests failed" "$logs/ctest.log" >>"$report" ||
  echo "**ctest did not finish** within the budget" >>"$report"
echo "ctest -j $test_jobs: $(($(date +%s) - current_start)) s, $(($(cpu_read) - cpu_before)) CPU seconds." >>"$report"
# A GPU test skips where CUDA is not available; its name says Cuda, CUDA, Gpu or GPU (the device-
# parametrised instances, MemoryPlanOnGpu). On the GPU machine none of those may skip.
gpu_skipped=$(grep '\*\*\*Skipped' "$logs/ctest.log" | grep -E 'Cuda|CUDA|Gpu|GPU' | sed -E 's/^.*Test +#[0-9]+: ([^ ]+).*/\1/')
echo "Skipped: $(grep -c '\*\*\*Skipped' "$logs/ctest.log"), of which $(grep -c . <<<"$gpu_skipped") name CUDA or a GPU." >>"$report"
if [ -n "$gpu_skipped" ] && [ -z "${KILN_GPU_REHEARSAL:-}" ]; then
  { echo; echo "GPU tests that skipped:"; echo '```'; head -30 <<<"$gpu_skipped"; echo '```'; } >>"$report"
fi
# Anything but ctest's "100% tests passed, 0 tests failed" (a crash, a timeout, a cut run) fails.
if ! grep -q " 0 tests failed" "$logs/ctest.log"; then
  tests_failed=1
  { echo; echo "Failures (ctest's list):"; echo '```'
    sed -n '/The following tests FAILED/,$p' "$logs/ctest.log" | grep -E '^\s+[0-9]+ - ' | head -40; echo '```'; } >>"$report"
  timeout "$(limit 60)" ctest --test-dir "$build" --rerun-failed --output-on-failure 2>&1 | tail -150 >"$logs/failures.log"
fi

section "NCCL backend (tests/distributed/nccl, ranks as threads)"
grep -E "distributed (MPI|NCCL) backend" "$log" | sed 's/^-- /- /' >>"$report"
if [ -x "$build/tests/kiln_nccl_tests" ]; then
  timeout "$(limit 240)" "$build/tests/kiln_nccl_tests" >"$logs/nccl.log" 2>&1
  { echo '```'; grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Skipped|refus|Failure|error" "$logs/nccl.log" | head -30; echo '```'; } >>"$report"
fi

section "Examples on --device cuda"
run_example() {  # name, seconds, arguments...
  local name=$1 seconds
  seconds=$(limit "$2")
  shift 2
  if [ ! -x "$build/examples/$name" ]; then
    echo "- $name: not built" >>"$report"
  elif [ "$seconds" -lt 10 ]; then
    echo "- \`$name $*\`: skipped: the ${budget}-second budget is spent" >>"$report"
  elif timeout "$seconds" "$build/examples/$name" "$@" >"$logs/$name.log" 2>&1; then
    local summary
    summary=$(grep -E 'final|accuracy|bits/character|scale|bandwidth|GB/s|overlap|speed|Peak (allocated|reserved)|batch-size auto' "$logs/$name.log" | tail -4 | tr '\n' ';')
    echo "- \`$name $*\`: ${summary:-$(grep . "$logs/$name.log" | tail -1)}" >>"$report"
  else
    echo "- \`$name $*\`: **failed** (exit $?): $(tail -3 "$logs/$name.log" | tr '\n' ' ')" >>"$report"
  fi
}
run_example train_mlp 120 --device cuda --epochs 3
run_example train_cnn 150 --device cuda --epochs 2 --batch-size 128
# Profiled (steps 3-5 of each run, op tables in the log): Float16 autocast ran at 0.46x the
# Float32 speed on the first H200 run, and the tables say which ops lose it.
run_example amp_train 150 --device cuda --epochs 1 --batch-size 512 --profile "$logs/amp_profile"
run_example fgsm 120 --device cuda --epochs 1 --png "$logs/fgsm.png"
run_example pinned_pipeline 120 --device cuda --epochs 1
# The sequence models: attention, and the LSTM's fused step (core/cuda/rnn.cu).
run_example train_charlm 70 --device cuda --minutes 0.5 --text "$PWD/.gpu-deps/fortunes"
run_example train_charlm 70 --device cuda --minutes 0.5 --model lstm --text "$PWD/.gpu-deps/fortunes"

section "Memory plan against cuda::memory_stats (kiln::memory::plan)"
timeout "$(limit 120)" "$build/tests/kiln_memory_tests" --gtest_filter='MemoryPlanOnGpu.*' >"$logs/memory_plan.log" 2>&1
status=$?
if [ "$status" -eq 0 ] && grep -q '^\[  SKIPPED \]' "$logs/memory_plan.log"; then
  echo "- MemoryPlanOnGpu: skipped ($(grep -m1 -o 'CUDA not available.*\|no GPU.*' "$logs/memory_plan.log" || echo 'see the log'))" >>"$report"
elif [ "$status" -eq 0 ]; then
  echo "- planned peak = measured peak (MemoryPlanOnGpu): passed" >>"$report"
else
  { echo "- MemoryPlanOnGpu **failed** (exit $status):"; echo '```'; grep -vE '^\|' "$logs/memory_plan.log" | tail -30; echo '```'; } >>"$report"
fi
run_example train_cnn 60 --device cuda --plan
# The largest batch the plan says fits must then run without running out of memory.
run_example train_cnn 180 --device cuda --batch-size auto --epochs 1

section "Benchmarks (tests/bench/cuda)"
if [ -x "$build/tests/bench/bench_cuda" ]; then
  seconds=$(limit 240)
  if [ "$seconds" -ge 10 ]; then
    timeout "$seconds" "$build/tests/bench/bench_cuda" --benchmark_min_time=0.2 \
      --benchmark_out="$logs/bench_cuda.json" --benchmark_out_format=json >"$logs/bench_cuda.txt" 2>&1
    { echo '```'; grep -E "^BM_|[Ss]kip|error" "$logs/bench_cuda.txt" | head -60; echo '```'; } >>"$report"
  else
    echo "skipped: the ${budget}-second budget is spent" >>"$report"
  fi
else
  echo "bench_cuda: not built" >>"$report"
fi
end_section

{
  echo
  echo "## Timings"
  echo
  echo "| section | seconds |"
  echo "|---|---|"
  printf '%s\n' "${timings[@]}"
  echo "| **total** | **$(elapsed)** |"
  echo
  echo "Budget: ${budget} s (0: none). Logs: \`gpu-logs.tar.gz\` beside this report, or \`$logs/\`."
} >>"$report"
cat "$report"
[ -n "${OUT:-}" ] && tar -czf "$OUT/gpu-logs.tar.gz" -C "$logs" .
exit "$tests_failed"
