#!/usr/bin/env bash
# scripts/run.sh — the README's main command: installs what is missing (including Debian's
# Fashion-MNIST package, and its fortunes package for train_charlm), builds, and trains the
# MLP on Fashion-MNIST, ending with its test accuracy. Extra arguments go to train_mlp (try
# --help); the loss/accuracy log and the checkpoint land in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dataset-fashion-mnist fortunes
# Only the library and the program it runs: the tests and benchmarks are scripts/test.sh's.
KILN_TARGETS=train_mlp bash scripts/build.sh
build="${KILN_BUILD_DIR:-build}"
"$build/examples/train_mlp" --log "$build/mlp.csv" --checkpoint "$build/mlp.safetensors" "$@"
echo "plot the curves with: bash scripts/plot_log.sh $build/mlp.csv"
