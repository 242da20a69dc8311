#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine (with the CUDA toolkit), builds
# everything and runs every test. Tests that need a GPU report themselves
# skipped where there is none.
#
# Then, unless TOPK_SKIP_EXTRA=1, a short run of every fuzz target
# (scripts/fuzz.sh, FUZZ_SECONDS each, default here 10) and the CPU tests
# under ASan/UBSan (scripts/sanitize.sh), which share one clang build of the
# instrumented libraries (docs/TESTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# setup.sh installed Debian's torch: the torch operators' fake-tensor tests
# must run, not skip (python/tests/test_ops.py).
export TOPK_REQUIRE_TORCH=1
BUILD=${TOPK_BUILD_DIR:-build}
# The CPU tests' own sources at -O0 (tests/CMakeLists.txt says why); the
# libraries and tools they test are the Release build.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTOPK_TEST_COMPILE_OPTIONS=-O0
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"

if [[ "${TOPK_SKIP_EXTRA:-0}" != 1 ]]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh
  ./scripts/sanitize.sh
fi
