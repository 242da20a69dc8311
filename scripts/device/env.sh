# Sourced by the device scripts (not run alone): the repository root as the
# working folder, the bundle built by scripts/build-device-bundle.sh ($B),
# the folder whose files come back ($OUT), the tests' scratch folder and the
# library path the bundle's binaries need.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${TOPK_BUNDLE:-build-device}
OUT=${OUT:-/tmp/topk-out}
export TOPK_TEST_TMP=/tmp/topk-tests
mkdir -p "$OUT" "$TOPK_TEST_TMP/cubins"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
