#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine (with the CUDA toolkit), builds
# everything and runs every test. Tests that need a GPU report themselves
# skipped where there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=${TOPK_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j"$(nproc)" "$@"
