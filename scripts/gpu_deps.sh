#!/usr/bin/env bash
# scripts/gpu_deps.sh — stages, into .gpu-deps/ (git-ignored), what the GPU machine lacks and
# cannot download: the Debian headers, libraries and CMake package files Kiln builds against
# (Eigen, GoogleTest, Google Benchmark, nlohmann-json, zlib, CLI11), the Fashion-MNIST files and
# the fortunes text. cuDNN and NCCL are not staged: the GPU machine has them in PyTorch's wheels.
# The device tool then carries the folder along:  carry: [".gpu-deps"]  (about 47 MiB of the
# 64 MiB that may travel). scripts/gpu_rehearse.sh builds against this folder alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dataset-fashion-mnist fortunes
deps=.gpu-deps
rm -rf "$deps"
mkdir -p "$deps"
multiarch=$(gcc -print-multiarch)
copy() {  # copy system paths into $deps, keeping their layout
  for p in "$@"; do
    mkdir -p "$deps$(dirname "$p")"
    cp -a "$p" "$deps$p"
  done
}
copy /usr/include/eigen3 /usr/share/eigen3 \
     /usr/include/nlohmann /usr/share/cmake/nlohmann_json \
     /usr/include/gtest /usr/include/gmock /usr/include/benchmark \
     /usr/include/zlib.h /usr/include/zconf.h \
     /usr/include/CLI /usr/share/cmake/CLI11 \
     "/usr/lib/$multiarch/cmake/GTest" "/usr/lib/$multiarch/cmake/benchmark" \
     "/usr/lib/$multiarch/libz.a"
copy /usr/lib/"$multiarch"/libgtest*.a /usr/lib/"$multiarch"/libgmock*.a \
     /usr/lib/"$multiarch"/libbenchmark*
mkdir -p "$deps/fashion-mnist"
cp /usr/share/datasets/fashion-mnist/*.gz "$deps/fashion-mnist/"
# train_charlm's text: the fortune topic files (the *.dat indexes and *.u8 links left out).
mkdir -p "$deps/fortunes"
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.*' -exec cp {} "$deps/fortunes/" \;
du -sh "$deps"
# What travels is this folder plus the working tree's files (about 2 MiB): 64 MiB in all.
deps_kib=$(du -sk "$deps" | cut -f1)
tree_kib=$(git ls-files -z | xargs -0 du -ck 2>/dev/null | tail -1 | cut -f1)
if [ $((deps_kib + tree_kib)) -ge $((64 * 1024)) ]; then
  echo "kiln: $deps ($((deps_kib / 1024)) MiB) and the tree ($((tree_kib / 1024)) MiB) are over the 64 MiB" \
       "that can travel to the GPU machine" >&2
  exit 1
fi
