#!/usr/bin/env bash
# Builds the CPU tests with AddressSanitizer and UndefinedBehaviorSanitizer
# (-fsanitize=address,undefined -fno-omit-frame-pointer, UBSan findings
# fatal) in their own build directory and runs them: ctest -L cpu, without
# compile_all_test, install_test, python_test (see below; compile_all_test compiles hundreds of kernels with NVRTC, far too slow
# under ASan; the normal build runs it). GPU tests are not built.
#
#   scripts/sanitize.sh                 every CPU test
#   scripts/sanitize.sh -R cache_test   extra arguments go to ctest
#
# Environment: TOPK_ASAN_BUILD_DIR (default build-asan), TOPK_JOBS (default
# nproc), TOPK_SANITIZE (default address,undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${TOPK_ASAN_BUILD_DIR:-build-asan}
JOBS=${TOPK_JOBS:-$(nproc)}
SAN=${TOPK_SANITIZE:-address,undefined}

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOPK_SANITIZE="$SAN" \
  -DTOPK_BUILD_TESTS=ON -DTOPK_BUILD_BENCH=OFF -DTOPK_BUILD_TOOLS=ON >/dev/null
# The CPU tests only (and the CLI binaries cli_test runs).
# The CLI tests come last: they need the CLI built too, the others only the
# libraries.
mapfile -t tests < <(cd tests && ls ./*_test.cpp | sed 's|^\./||; s|\.cpp$||' |
  grep -v -e '^gpu_' -e '^compile_all_test$' -e '^cli_test$' -e '^report_test$')
cmake --build "$BUILD" -j"$JOBS" --target "${tests[@]}"
cmake --build "$BUILD" -j"$JOBS" --target report_test cli_test topk-tune topk-tune-worker

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0}
# install_test and python_test need the installed / shared library, which
# this build does not make (and Python would need the ASan runtime
# preloaded); the normal build runs them.
ctest --test-dir "$BUILD" -L cpu -E '^(compile_all_test|install_test|python_test)$' --output-on-failure -j"$JOBS" "$@"
