#!/usr/bin/env bash
# scripts/setup.sh — installs the Debian packages Kiln needs, only those that are missing.
# Extra package names given as arguments are installed too (e.g. dataset-fashion-mnist).
set -euo pipefail

# libdnnl-dev is oneDNN, the CPU's fast route; its CMake package looks for OpenCL (Debian
# builds it with the OpenCL GPU runtime), whose headers and library link come with
# ocl-icd-opencl-dev. libopenmpi-dev and openmpi-bin (mpirun) are kiln::distributed's MPI
# backend and the launcher its tests run under. libonnx-dev and libprotobuf-dev are what
# kiln::onnx::export_model writes and checks models with; python3-venv lets
# scripts/onnx_runtime.sh put the tests' ONNX Runtime into the build folder. libpng-dev reads
# back the screenshot that the profiler's test takes of its HTML page (scripts/test.sh adds
# chromium, which takes it).
packages=(cmake g++ ninja-build pkg-config libeigen3-dev libgtest-dev libgmock-dev
          libbenchmark-dev zlib1g-dev nlohmann-json3-dev libdnnl-dev ocl-icd-opencl-dev
          libopenmpi-dev openmpi-bin libcli11-dev libonnx-dev libprotobuf-dev python3-venv libpng-dev "$@")
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "kiln: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
