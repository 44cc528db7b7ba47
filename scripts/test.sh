#!/usr/bin/env bash
# scripts/test.sh — the README's test command: installs what is missing, builds, and runs
# every test (ctest, all labels: core, autograd, nn, optim, data, amp, examples, onnx, install).
# The onnx tests' oracle, ONNX Runtime, goes into build/venv (scripts/onnx_runtime.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# chromium: headless, it draws the profiler's HTML page for a screenshot test; only the tests
# need it, so the first command (scripts/run.sh) does not install it.
bash scripts/setup.sh chromium
bash scripts/build.sh "$@"
bash scripts/onnx_runtime.sh
ctest --test-dir "${KILN_BUILD_DIR:-build}" --output-on-failure --parallel "$(nproc)" --timeout 900
