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

# log TEXT: to stdout and the summary ($SUMMARY, default $OUT/summary.txt).
# run NAME TIMEOUT CMD...: output to $LOGDIR/NAME.log (default $OUT), the
# status and the last $TAIL lines to the summary.
SUMMARY=${SUMMARY:-$OUT/summary.txt}
touch "$SUMMARY"
log() { echo "$*" | tee -a "$SUMMARY"; }
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
