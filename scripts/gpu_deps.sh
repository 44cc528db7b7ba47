#!/usr/bin/env bash
# scripts/gpu_deps.sh — stages, into .gpu-deps/ (git-ignored), what the GPU machine lacks and
# cannot download: the Debian headers, libraries and CMake package files Kiln builds against
# (Eigen, GoogleTest, Google Benchmark, nlohmann-json, zlib), the Fashion-MNIST files and the
# fortunes text.
# The device tool then carries the folder along:  carry: [".gpu-deps"]  (about 45 MiB).
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
