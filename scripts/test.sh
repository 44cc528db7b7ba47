#!/usr/bin/env bash
# scripts/test.sh — the README's test command: installs what is missing, builds, and runs
# every test (ctest, all labels: core, autograd, nn, optim, data, amp, examples, onnx, install).
# The onnx tests' oracle, ONNX Runtime, goes into build/venv (scripts/onnx_runtime.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
bash scripts/onnx_runtime.sh
ctest --test-dir "${KILN_BUILD_DIR:-build}" --output-on-failure --parallel "$(nproc)" --timeout 900
