#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine (with the CUDA toolkit), builds
# everything and runs every test. Tests that need a GPU report themselves
# skipped where there is none.
#
# Then, unless TOPK_SKIP_EXTRA=1, a short run of every fuzz target
# (scripts/fuzz.sh, FUZZ_SECONDS each, default here 10), and with
# TOPK_SANITIZE=1 the CPU tests under ASan/UBSan (scripts/sanitize.sh: a
# second full build, about 11 minutes on 2 cores, which would take CI past
# its 20-minute budget; docs/TESTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=${TOPK_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"

if [[ "${TOPK_SKIP_EXTRA:-0}" != 1 ]]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh
fi
if [[ "${TOPK_SANITIZE:-0}" == 1 ]]; then
  ./scripts/sanitize.sh
fi
