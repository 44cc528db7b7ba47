#!/usr/bin/env bash
# scripts/test.sh — the README's test command: installs what is missing, builds, and runs
# every test (ctest, all labels: core, autograd, nn, optim, data, amp, examples, install).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
ctest --test-dir "${KILN_BUILD_DIR:-build}" --output-on-failure --parallel "$(nproc)" --timeout 900
