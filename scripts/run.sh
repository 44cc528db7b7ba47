#!/usr/bin/env bash
# scripts/run.sh — the README's main command: installs what is missing, builds, and runs
# Kiln's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
"${KILN_BUILD_DIR:-build}/examples/creation_paths"
