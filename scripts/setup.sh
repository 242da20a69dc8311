#!/usr/bin/env bash
# Installs what the build needs on a fresh Debian or Ubuntu machine that has
# the CUDA toolkit (nvcc, NVRTC, the driver API stub) under /usr/local/cuda.
# Idempotent: a machine that has everything installs nothing.
set -euo pipefail

pkgs=(build-essential cmake pkg-config git python3
      libsqlite3-dev sqlite3 nlohmann-json3-dev libcli11-dev
      libgtest-dev libbenchmark-dev
      # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes
      # (libclang_rt.fuzzer-x86_64.a). Debian 12's default clang (14) lacks
      # __builtin_source_location, so libstdc++'s std::source_location (used
      # by cache/) does not compile with it; clang 16 is in bookworm too.
      clang-16 libclang-rt-16-dev
      # scripts/wheel.sh (ctest wheel_test): builds the Python wheel offline
      # and installs it into a venv
      python3-setuptools python3-wheel python3-venv python3-pip
      # python/tests/test_ops.py: the torch operators on meta and fake
      # tensors (Debian's torch is CPU-only, which is all those tests need)
      python3-torch
      # report_test's ReportBrowserTest renders the report in headless
      # Chromium and checks what a reader sees (skipped without it)
      chromium)
# Extra packages for a step (TOPK_SETUP_EXTRA="imagemagick", say).
if [[ -n "${TOPK_SETUP_EXTRA:-}" ]]; then
  read -r -a extra <<<"$TOPK_SETUP_EXTRA"
  pkgs+=("${extra[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -x "$cuda/bin/nvcc" ]]; then
  echo "setup: the CUDA toolkit was not found at $cuda (set CUDA_HOME)" >&2
  exit 1
fi
echo "setup: ok (CUDA toolkit at $cuda)"
