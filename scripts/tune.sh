#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine (with the CUDA toolkit and an NVIDIA
# GPU), builds topk-tune and tunes this GPU: by default the DSA-indexer
# preset into the default cache ($TOPK_TUNE_DB, else ~/.cache/topk-tune/
# tuning.db), then writes a report. Extra arguments go to `topk-tune tune`
# (e.g. --preset sampling, --shapes my.json, --budget 20).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD=${TOPK_BUILD_DIR:-build}
# The release build's shipped architectures (runtime/CMakeLists.txt's
# default), also in a tree that scripts/test.sh configured with fewer.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTOPK_BUILD_TESTS=OFF -DTOPK_BUILD_BENCH=OFF -UTOPK_SHIP_ARCHS
cmake --build "$BUILD" -j"$(nproc)" --target topk-tune topk-tune-worker
"$BUILD/bin/topk-tune" tune "$@"
"$BUILD/bin/topk-tune" report --out topk-report
echo "report: $(pwd)/topk-report/report.html"
