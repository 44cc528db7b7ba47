#!/usr/bin/env bash
# scripts/onnx_runtime.sh — the oracle of the ONNX export tests (tests/onnx): ONNX Runtime and
# NumPy from PyPI in a virtual environment under the build folder (build/venv). It is never a
# dependency of the library; without it the runtime tests skip, saying why, unless
# KILN_REQUIRE_ONNX_RUNTIME=1 (CI) makes them fail. Re-running does nothing once it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${KILN_BUILD_DIR:-build}/venv"
if "$venv/bin/python" -c "import onnxruntime, numpy" >/dev/null 2>&1; then
  exit 0
fi
if ! python3 -m venv "$venv"; then
  echo "kiln: cannot make $venv (Debian: apt-get install python3-venv); the ONNX Runtime tests will skip" >&2
  [ "${KILN_REQUIRE_ONNX_RUNTIME:-0}" = 1 ] && exit 1 || exit 0
fi
echo "kiln: installing onnxruntime and numpy into $venv"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check onnxruntime numpy; then
  echo "kiln: pip could not install onnxruntime; the ONNX Runtime tests will skip" >&2
  [ "${KILN_REQUIRE_ONNX_RUNTIME:-0}" = 1 ] && exit 1 || exit 0
fi
