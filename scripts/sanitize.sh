#!/usr/bin/env bash
# Builds the CPU tests with AddressSanitizer and UndefinedBehaviorSanitizer
# and runs them: ctest -L cpu, without compile_all_test (hundreds of NVRTC
# compiles, far too slow under ASan; the normal build runs it) and the tests
# that need the installed or shared library (install_test, python_test,
# wheel_test: Python would need the ASan runtime preloaded). GPU tests are
# built but report themselves skipped without a GPU.
#
# The build is scripts/fuzz.sh's tree (clang-16, every object with
# -fsanitize=address,undefined and libFuzzer's coverage, UBSan findings
# fatal, no shipped kernels): run after fuzz.sh, only the tests and the CLI
# are compiled here, not the libraries a second time.
#
#   scripts/sanitize.sh                 every CPU test
#   scripts/sanitize.sh -R cache_test   extra arguments go to ctest
#
# Environment: TOPK_FUZZ_BUILD_DIR (default build-fuzz), TOPK_JOBS (default
# nproc), TOPK_FUZZ_CC / TOPK_FUZZ_CXX (default clang-16 / clang++-16).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${TOPK_JOBS:-$(nproc)}
# scripts/fuzz.sh's tree (it sets BUILD).
source scripts/instrumented-tree.sh
# The CPU tests and the binaries cli_test runs.
mapfile -t tests < <(cd tests && ls ./*_test.cpp | sed 's|^\./||; s|\.cpp$||' | grep -v -e '^gpu_' -e '^compile_all_test$')
cmake --build "$BUILD" -j"$JOBS" --target "${tests[@]}" topk-tune topk-tune-worker

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0}
ctest --test-dir "$BUILD" -L cpu -E '^(compile_all_test|install_test|python_test|wheel_test)$' --output-on-failure \
  -j"$JOBS" "$@"
