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
# libraries and tools they test are the Release build. The tests load and
# check the shipped sm_80 and sm_90 kernels (compile_all_test,
# kernel_store_test, the GPU tests on sm_90), so this build ships those two
# and leaves out sm_100 and sm_120, half of the shipped-kernel step
# (docs/TESTING.md); TOPK_TEST_SHIP_ARCHS overrides it, e.g. with the
# release build's "sm_80;sm_90;sm_100;sm_120".
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTOPK_TEST_COMPILE_OPTIONS=-O0 \
  -DTOPK_SHIP_ARCHS="${TOPK_TEST_SHIP_ARCHS:-sm_80;sm_90}"
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"

if [[ "${TOPK_SKIP_EXTRA:-0}" != 1 ]]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} ./scripts/fuzz.sh
  ./scripts/sanitize.sh
fi
