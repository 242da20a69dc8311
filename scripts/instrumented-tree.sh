# Sourced by scripts/fuzz.sh and scripts/sanitize.sh (not run alone): the one
# configuration of their shared tree, so that the instrumented libraries are
# compiled once for both. Sets BUILD (TOPK_FUZZ_BUILD_DIR, default
# build-fuzz), checks for clang (TOPK_FUZZ_CC / TOPK_FUZZ_CXX, default
# clang-16 / clang++-16: 15 or newer for std::source_location) and
# configures the tree. Every object has -fsanitize=address,undefined and
# libFuzzer's coverage (CMakeLists.txt, TOPK_BUILD_FUZZ); no shipped kernels.
#
# -O1 (what ASan's documentation advises) and line tables only: on a 2-core
# machine the instrumented build took 660 s at -O2 -g, most of it the test
# sources, which take -O0 (TOPK_TEST_COMPILE_OPTIONS, tests/CMakeLists.txt);
# the libraries they test keep -O1.
BUILD=${TOPK_FUZZ_BUILD_DIR:-build-fuzz}
CC_BIN=${TOPK_FUZZ_CC:-clang-16}
CXX_BIN=${TOPK_FUZZ_CXX:-clang++-16}
if ! command -v "$CXX_BIN" >/dev/null; then
  echo "$(basename "$0"): $CXX_BIN not found (scripts/setup.sh installs clang-16 and libclang-rt-16-dev;" \
       "TOPK_FUZZ_CC / TOPK_FUZZ_CXX pick another clang)" >&2
  exit 1
fi
OPT_FLAGS="-O1 -gline-tables-only -DNDEBUG"
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="$OPT_FLAGS" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$OPT_FLAGS" -DTOPK_TEST_COMPILE_OPTIONS=-O0 \
  -DTOPK_BUILD_FUZZ=ON -DTOPK_SHIP_KERNELS=OFF -DTOPK_BUILD_TESTS=ON -DTOPK_BUILD_BENCH=OFF \
  -DTOPK_BUILD_TOOLS=ON >/dev/null
