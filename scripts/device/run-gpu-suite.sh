#!/usr/bin/env bash
# Runs the GPU tests and benchmarks from a build-device/ tree built elsewhere and
# writes the logs under $OUT (summary.txt plus logs.tgz). Builds nothing.
#   scripts/device/run-gpu-suite.sh [stage ...]   (default: every stage)
set -uo pipefail
source "$(dirname "$0")/env.sh"
LOGS=/tmp/topk-logs
mkdir -p "$LOGS"
cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null || true
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

stage() {  # stage NAME TIMEOUT_S CMD...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== $name: $*" | tee -a "$SUMMARY"
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc ($((SECONDS - t0)) s)" | tee -a "$SUMMARY"
  grep -E "^\[(  PASSED|  FAILED|  SKIPPED) |FAIL |\] kernels|compiled or|ERROR SUMMARY|RACECHECK SUMMARY|best:|^\| " \
    "$LOGS/$name.log" | head -80 >>"$SUMMARY"
}

want() { [[ $# -eq 0 ]] || [[ " ${STAGES} " == *" $1 "* ]]; }
STAGES="$*"
want_stage() { [[ -z "$STAGES" ]] || [[ " $STAGES " == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$LOGS/nvidia-smi.txt" 2>&1
cat "$LOGS/nvidia-smi.txt" >>"$SUMMARY"

want_stage kernels && stage kernels 420 "$B/bin/gpu_kernels_test"
want_stage memcheck && TOPK_TEST_SUBSET=sanitizer stage memcheck 300 \
  compute-sanitizer --tool memcheck --error-exitcode 9 "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*'
want_stage racecheck && TOPK_TEST_SUBSET=sanitizer stage racecheck 300 \
  compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 "$B/bin/gpu_kernels_test" \
  --gtest_filter='*F32*'
want_stage probe && stage probe 300 "$B/bin/topk-probe" --targets --cubins "$TOPK_TEST_TMP/cubins"
want_stage torch && stage torch 240 python3 bench/compare_torch.py --torch-only
for t in gpu_tuner_test gpu_runtime_test; do
  want_stage "$t" && [[ -x "$B/bin/$t" ]] && stage "$t" 480 "$B/bin/$t"
done

tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
tail -c 6000 "$SUMMARY"
