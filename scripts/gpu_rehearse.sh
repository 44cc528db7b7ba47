#!/usr/bin/env bash
# scripts/gpu_rehearse.sh — runs scripts/gpu_check.sh here, on a machine without a GPU, in the GPU
# machine's layout, so that the first run there (15 minutes of device time in all) is not spent on
# set-up: configure (cuDNN and NCCL found in the wheels), build, every test (GPU tests skip), the
# report with all its sections; the examples on --device cuda fail for want of a GPU, as expected.
# Run it before every change to the GPU path (cmake/KilnCuda.cmake, KilnNccl.cmake, core/cuda/,
# scripts/gpu_*.sh). Not in CI: a clean run takes 26-29 minutes here; CI already takes 25-37 of 50.
# Read next: scripts/gpu_check.sh, then Note [Libraries from wheels] in cmake/KilnCuda.cmake.
#   nice -n 15 bash scripts/gpu_rehearse.sh [--clean] [--head] [--wheel-cublas] [-- COMMAND...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Options:
#   --clean         start from an empty build folder (the wheels and the venv are kept)
#   --head          rehearse the last commit (exported to build-rehearse/head, as a fresh clone has
#                   it), not the working tree with its uncommitted changes; builds in build-head/
#   --wheel-cublas  hide the toolkit's cuBLAS too and take it from the nvidia-cublas wheel, as on a
#                   GPU image whose toolkit has none (KILN_CUBLAS_ROOT; a 420 MB wheel); builds in
#                   a folder of its own (build-wheel-cublas/, build-head-wheel-cublas/)
#   -- COMMAND...   run COMMAND in the layout instead of gpu_check.sh (a shell to look around:
#                   `-- bash`, or one configure: `-- cmake -S . -B build-rehearse/try ...`)
#
# The layout, as close as this machine allows (all in build-rehearse/):
# - python3 is a virtual environment (venv/) holding the wheels of the GPU image's PyTorch that the
#   build uses: nvidia-cudnn-cu13 and nvidia-nccl-cu13 at the toolkit's versions, from PyPI, cached
#   in wheels/. gpu_check.sh asks that python3 where cuDNN and NCCL are, as it will there.
# - In a private mount namespace (root; nothing outside it sees a change), /usr gets a read-only
#   overlay whose top layer holds whiteouts: the CUDA toolkit's own cuDNN and NCCL (library,
#   headers), /usr/local/include (links to the toolkit's headers, which the GPU image lacks), the
#   Debian packages that .gpu-deps replaces (Eigen, GoogleTest/GMock, Google Benchmark,
#   nlohmann-json, zlib's headers and link library, CLI11, the Fashion-MNIST files, the fortunes),
#   oneDNN and Open MPI vanish for CMake, the compiler and the loader alike.
# What it cannot reproduce: the GPU image's own system (its glibc and gcc, Python 3.12) and its
# /opt/torch/.venv path; the driver (there is none here, so nothing CUDA runs); the wheels of
# other NVIDIA libraries PyTorch brings (only those the build looks for are installed); its CMake,
# which is probably pip's 4.x there (configure under pip's CMake 4.4.5 was tried once, by hand:
# `-- bash -c 'PATH=<a venv with pip's cmake>/bin:$PATH cmake ...'`; this builds with Debian's 3.25).
# zlib's run-time library and OpenMP's stay, as the GPU image has them too.
root=$PWD
dir=$root/build-rehearse
cudnn_wheel=nvidia-cudnn-cu13==9.19.0.56  # the versions in the CUDA toolkit here (its dist-info)
nccl_wheel=nvidia-nccl-cu13==2.28.9
cublas_wheel=nvidia-cublas==13.1.0.3
multiarch=$(gcc -print-multiarch)

inside=0 clean=0 head=0 wheel_cublas=0
command=()
while (($#)); do
  case $1 in
    --inside) inside=1 ;;
    --clean) clean=1 ;;
    --head) head=1 ;;
    --wheel-cublas) wheel_cublas=1 ;;
    --) shift; command=("$@"); break ;;
    *) echo "usage: $0 [--clean] [--head] [--wheel-cublas] [-- COMMAND...]" >&2; exit 2 ;;
  esac
  shift
done
# The sources rehearsed (the working tree, which is what the device tool sends, or the last
# commit) and their build folder.
if ((head)); then
  src=$dir/head
  build=$dir/build-head
else
  src=$root
  build=$dir/build
fi
((wheel_cublas)) && build=$build-wheel-cublas

# What the overlay hides, as globs under /usr (a glob that matches nothing is skipped).
u=/usr/lib/$multiarch
cuda=$(readlink -f /usr/local/cuda)
hidden=(
  # the toolkit's cuDNN and NCCL: the GPU image has them only as wheels
  "$cuda"/lib/libcudnn* "$cuda"/lib/libnccl* "$cuda"/include/cudnn*.h "$cuda"/include/nccl.h
  "$cuda"/include/nccl_device*
  # /usr/local/include, which here holds only links to the toolkit's headers: the GPU image has
  # none, so a target that included cuda_runtime_api.h without linking CUDA::cudart built here
  # and failed there (distributed/nccl, on the first H200 run)
  /usr/local/include
  # Debian's packages that .gpu-deps replaces
  /usr/include/eigen3 /usr/share/eigen3 /usr/share/pkgconfig/eigen3.pc
  /usr/include/gtest /usr/include/gmock "$u"/cmake/GTest "$u"/libgtest* "$u"/libgmock*
  "$u"/pkgconfig/gtest*.pc "$u"/pkgconfig/gmock*.pc /usr/src/googletest /usr/src/gtest
  /usr/include/benchmark "$u"/cmake/benchmark "$u"/libbenchmark* "$u"/pkgconfig/benchmark.pc
  /usr/include/nlohmann /usr/share/cmake/nlohmann_json /usr/share/pkgconfig/nlohmann_json.pc
  /usr/include/zlib.h /usr/include/zconf.h "$u"/libz.a "$u"/libz.so "$u"/pkgconfig/zlib.pc
  /usr/include/CLI /usr/share/cmake/CLI11 /usr/share/pkgconfig/CLI11.pc
  /usr/share/datasets/fashion-mnist /usr/share/games/fortunes
  # oneDNN (and the OpenCL link library its CMake package wants)
  /usr/include/dnnl* /usr/include/oneapi "$u"/cmake/dnnl "$u"/libdnnl* "$u"/libOpenCL.so "$u"/pkgconfig/OpenCL.pc
  # Open MPI: headers, libraries, wrappers, launchers, pkg-config files
  "$u"/openmpi "$u"/fortran/gfortran-mod-*/openmpi /usr/include/"$multiarch"/mpi
  /usr/include/"$multiarch"/openmpi /usr/share/openmpi "$u"/libmpi* "$u"/libopen-pal* "$u"/libopen-rte*
  "$u"/liboshmem* "$u"/libompitrace* "$u"/libmca_common_* "$u"/pkgconfig/ompi*.pc "$u"/pkgconfig/mpi*.pc
  "$u"/pkgconfig/orte.pc /usr/bin/mpiCC* /usr/bin/mpic++* /usr/bin/mpicc* /usr/bin/mpicxx*
  /usr/bin/mpiexec* /usr/bin/mpif77* /usr/bin/mpif90* /usr/bin/mpifort* /usr/bin/mpijavac*
  /usr/bin/mpirun* /usr/bin/ompi* /usr/bin/orte* /usr/bin/osh*
)
if ((wheel_cublas)); then
  hidden+=("$cuda"/lib/libcublas* "$cuda"/include/cublas*.h /usr/local/include/cublas*.h)
fi

if ((!inside)); then
  # --- outside the namespace: what needs the network or writes to the tree -------------------------
  started=$SECONDS
  ((clean)) && rm -rf "$build"
  bash scripts/gpu_deps.sh
  if ((head)); then
    # A fresh export dates every file at the commit's time, so ninja would rebuild everything
    # each time HEAD moves; after the first export only the files that changed are rewritten.
    new=$(git rev-parse HEAD)
    old=$(cat "$src/.rehearsed-commit" 2>/dev/null || true)
    if ((clean)) || [ -z "$old" ] || ! git cat-file -e "$old^{commit}" 2>/dev/null; then
      rm -rf "$src"
      mkdir -p "$src"
      git archive "$new" | tar -x -C "$src"
    else
      git diff --name-only --no-renames --diff-filter=D "$old" "$new" | while read -r f; do rm -f "$src/$f"; done
      git diff --name-only --no-renames --diff-filter=d "$old" "$new" | while read -r f; do
        mkdir -p "$src/$(dirname "$f")"
        git show "$new:$f" >"$src/$f"
        if [ "$(git ls-tree "$new" -- "$f" | cut -c1-6)" = 100755 ]; then chmod +x "$src/$f"; fi
      done
    fi
    ln -sfn "$root/.gpu-deps" "$src/.gpu-deps"
    echo "$new" >"$src/.rehearsed-commit"
  fi
  mkdir -p "$dir/wheels"
  wheels=("$cudnn_wheel" "$nccl_wheel")
  ((wheel_cublas)) && wheels+=("$cublas_wheel")
  # pip download keeps what wheels/ already holds; --no-deps: cuDNN's wheel asks for
  # nvidia-cublas, which the toolkit here provides (or --wheel-cublas names).
  python3 -m pip download -q --no-deps --only-binary=:all: --dest "$dir/wheels" "${wheels[@]}"
  [ -x "$dir/venv/bin/python3" ] || python3 -m venv "$dir/venv"
  for w in "${wheels[@]}"; do
    "$dir/venv/bin/python3" -m pip install -q --no-index --no-deps --find-links "$dir/wheels" "$w"
  done
  # The same script, as root in a private mount namespace, does the rest.
  inner=(--inside)
  ((wheel_cublas)) && inner+=(--wheel-cublas)
  ((head)) && inner+=(--head)
  ((${#command[@]})) && inner+=(-- "${command[@]}")
  set +e
  unshare -m --propagation private bash "$0" "${inner[@]}"
  status=$?
  echo "kiln: rehearsal took $((SECONDS - started)) s (wall clock)"
  exit $status
fi

# --- inside the namespace: hide, check the hiding, run ---------------------------------------------
# Whiteouts (character devices 0/0) in an overlay's upper layers hide the same paths in the lower.
layer="$dir/hide"
rm -rf "$layer"
for path in "${hidden[@]}"; do
  [ -e "$path" ] || [ -L "$path" ] || continue  # an unmatched glob stays as written
  mkdir -p "$layer$(dirname "$path")"
  mknod "$layer$path" c 0 0
done
mount -t overlay overlay -o "lowerdir=$layer/usr:/usr" /usr ||
  { echo "kiln: cannot mount an overlay on /usr (needs root and overlayfs)" >&2; exit 1; }

export PATH="$dir/venv/bin:$PATH"
unset OUT  # the device tool's folder; the report goes to $build/report
problems=()
# The layout must hold before anything runs in it.
for path in /usr/include/eigen3/Eigen/Core /usr/include/zlib.h /usr/include/gtest/gtest.h \
            /usr/include/oneapi/dnnl/dnnl.hpp "$u/libdnnl.so" "$u/openmpi/lib/libmpi.so" \
            /usr/local/cuda/include/cudnn.h /usr/local/cuda/lib64/libcudnn.so.9 /usr/local/cuda/include/nccl.h \
            /usr/share/datasets/fashion-mnist /usr/include/CLI/CLI.hpp; do
  [ -e "$path" ] && problems+=("not hidden: $path")
done
command -v mpiexec >/dev/null && problems+=("not hidden: mpiexec")
python3 -c 'import nvidia.cudnn, nvidia.nccl' 2>/dev/null || problems+=("python3 ($(command -v python3)) has not the wheels")
if ((${#problems[@]})); then
  printf 'kiln: the layout is wrong: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "kiln: layout ready: python3 = $(command -v python3); hidden: ${#hidden[@]} globs under /usr"
cd "$src"
if ((${#command[@]})); then
  exec "${command[@]}"
fi

set +e
KILN_GPU_BUILD="$build" KILN_GPU_BUDGET_S=0 KILN_GPU_REHEARSAL=1 \
  KILN_GPU_COMMIT="$(git -C "$root" rev-parse --short HEAD)$( ((head)) || git -C "$root" diff --quiet HEAD || echo ' + uncommitted changes')" \
  bash scripts/gpu_check.sh >/dev/null
status=$?
set -e
report="$build/report/gpu-report.md"
cache="$build/CMakeCache.txt"

# --- what the rehearsal must show ----------------------------------------------------------------
check() {  # description, then a command that must succeed
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then echo "  ok    $what"; else echo "  FAIL  $what"; problems+=("$what"); fi
}
cached() { grep -E "^$1:[A-Z]+=" "$cache" | cut -d= -f2-; }
under() { [[ "$(cached "$1")" == "$2"* ]]; }
venv="$dir/venv"
deps="$src/.gpu-deps/usr"
echo "kiln: rehearsal checks"
check "gpu_check.sh finished (exit 0: built, no test failed)" test "$status" -eq 0
check "cuDNN from the wheel: $(cached KILN_CUDNN_LIBRARY)" under KILN_CUDNN_LIBRARY "$venv"
check "NCCL from the wheel: $(cached KILN_NCCL_LIBRARY)" under KILN_NCCL_LIBRARY "$venv"
if ((wheel_cublas)); then
  check "cuBLAS from the wheel: $(cached KILN_CUBLAS_LIBRARY)" under KILN_CUBLAS_LIBRARY "$venv"
fi
for package in Eigen3_DIR GTest_DIR benchmark_DIR nlohmann_json_DIR ZLIB_INCLUDE_DIR ZLIB_LIBRARY; do
  check "$package from .gpu-deps: $(cached $package)" under $package "$deps"
done
if grep -q "^CLI11_DIR:" "$cache"; then
  check "CLI11_DIR from .gpu-deps: $(cached CLI11_DIR)" under CLI11_DIR "$deps"
fi
check "no oneDNN" grep -q "oneDNN CPU route: OFF" "$build/report/gpu_check.log"
check "no MPI" grep -q "MPI backend: OFF" "$build/report/gpu_check.log"
for heading in "Machine and libraries" "Build" "Tests" "NCCL backend" "Examples on --device cuda" \
               "Memory plan" "Benchmarks" "Timings"; do
  check "report section: $heading" grep -q "^## $heading" "$report"
done
check "report: cuDNN and NCCL named at the top" grep -qE "^- Kiln .*cuDNN [0-9].*$venv" "$report"
check "report: every test passed" grep -qE "100% tests passed, 0 tests failed" "$report"
check "report: every example built" bash -c "! grep -q ': not built' '$report'"
# Without a GPU an example fails at its first CUDA call, saying so, or runs what needs none
# (pinned_pipeline trains on the CPU, --plan replays on a pretend GPU); any other failure (a flag
# gpu_check.sh passes that the program no longer takes, a missing file) would fail there too.
check "report: all 9 example runs, none failed but for want of a GPU" bash -c \
  "[ \$(grep -c '^- \`' '$report') -eq 9 ] && ! grep '^- \`.*\*\*failed' '$report' | grep -vqE 'NVIDIA driver|CUDA-capable device'"
check "report: the total time" grep -q "| \*\*total\*\* |" "$report"
echo "kiln: report: $report"
if ((${#problems[@]})); then
  echo "kiln: rehearsal FAILED: ${#problems[@]} problem(s)"
  exit 1
fi
echo "kiln: rehearsal passed"
