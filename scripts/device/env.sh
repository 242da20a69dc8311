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
# The bundle's worker, library and tools for the tuner, the Python package
# and the tests.
export TOPK_WORKER="$PWD/$B/bin/topk-tune-worker" TOPK_LIBRARY="$PWD/$B/lib/libtopk.so"
export TOPK_BIN_DIR="$PWD/$B/bin" PYTHONUNBUFFERED=1

# log TEXT: to stdout and the summary ($SUMMARY, default $OUT/summary.txt).
# run NAME TIMEOUT CMD...: output to $LOGDIR/NAME.log (default $OUT), the
# status and the last $TAIL lines to the summary.
SUMMARY=${SUMMARY:-$OUT/summary.txt}
touch "$SUMMARY"
log() { echo "$*" | tee -a "$SUMMARY"; }
# sanitize_kernels LIMIT ID...: memcheck and racecheck of gpu_kernels_test's
# sanitizer subset on the kernels whose ids hold each ID (its dtype's test).
sanitize_kernels() {
  local limit=$1 v f
  shift
  for v in "$@"; do
    case $v in *bf16*) f=BF16 ;; *f16*) f=F16 ;; *) f=F32 ;; esac
    TOPK_TEST_VARIANT=$v TOPK_TEST_SUBSET=sanitizer TAIL=3 run "memcheck-$v" "$limit" compute-sanitizer \
      --tool memcheck --error-exitcode 9 "$B/bin/gpu_kernels_test" --gtest_filter="*Every${f}*"
    TOPK_TEST_VARIANT=$v TOPK_TEST_SUBSET=sanitizer TAIL=3 run "racecheck-$v" "$limit" compute-sanitizer \
      --tool racecheck --racecheck-report hazard --error-exitcode 9 "$B/bin/gpu_kernels_test" \
      --gtest_filter="*Every${f}*"
  done
}
run() {
  local name=$1 limit=$2 dir=${LOGDIR:-$OUT}
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$dir/$name.log" 2>&1
  local rc=$?
  log "== $name: rc=$rc ($((SECONDS - t0)) s): $*"
  tail -n "${TAIL:-25}" "$dir/$name.log" | cut -c1-220 >>"$SUMMARY"
  return $rc
}
