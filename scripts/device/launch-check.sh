#!/usr/bin/env bash
# One device call for programmatic dependent launch (gen::Arch::programmatic,
# jit::LaunchShape::programmatic, await_prior_grids in templates/topk/types.cuh):
#   pdl      chains of two plans with no host wait, the second reading the
#            first's values (gpu_kernels_test); the Python graph of torch
#            copies and top-k calls, both launch modes (gpu_test_api.py)
#   probe    PROBE_SHAPES' defaults with plain and programmatic launches, one
#            process each shape, the tuner's timing (CUDA-graph replays)
#   compare  the target table through the Python package, nothing tuned,
#            torch.topk and plain launches (--plain-too) on the same tensors
#            in the same run, DSA also L2-flushed
#   kernels  every kernel of every family exact in every dtype
#   suite    the C API, tuner and Python GPU tests, the deterministic cases
# Logs under $OUT; the summary is printed.
#   scripts/device/launch-check.sh [pdl] [probe] [compare] [kernels] [suite]
set -uo pipefail
source "$(dirname "$0")/env.sh"
: >"$SUMMARY"
export TOPK_WORKER="$PWD/$B/bin/topk-tune-worker" TOPK_LIBRARY="$PWD/$B/lib/libtopk.so" PYTHONUNBUFFERED=1
export TOPK_BIN_DIR="$PWD/$B/bin"
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(pdl probe compare)
PROBE_SHAPES=${PROBE_SHAPES:-"f32:64x4096:128:ranges f32:64x32768:2048:ranges f32:1x131072:2048:ranges
f32:1x524288:2048:ranges f32:128x131072:2048:ranges f32:4096x256:8:rotate bf16:16384x256:8:rotate"}

for stage in "${stages[@]}"; do
  case $stage in
    pdl)
      TAIL=8 run pdl-chain 300 "$B/bin/gpu_kernels_test" --gtest_filter='*Programmatic*'
      TOPK_TUNE_DB= TAIL=6 run pdl-python 300 python3 python/tests/gpu_test_api.py -v -k programmatic ;;
    probe)
      for shape in $PROBE_SHAPES; do
        timeout 120 "$B/bin/topk-probe" --shape "$shape" --variant default --launch both \
          --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/probe.log" 2>&1
        echo "rc=$?" >>"$OUT/probe.log"
      done
      log "--- probe (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|rror" "$OUT/probe.log" | grep -vE "^device|^rc=0|best:" | head -60 >>"$SUMMARY" ;;
    compare)
      TOPK_TUNE_DB= TAIL=32 run compare 500 python3 bench/compare_torch.py --l2-flush --plain-too \
        --json "$OUT/compare.json" ;;
    kernels)
      for f in F32 F16 BF16; do
        TAIL=4 run "kernels-$f" 500 "$B/bin/gpu_kernels_test" --gtest_filter="*Every${f}*"
      done ;;
    suite)
      TAIL=5 run det 400 "$B/bin/gpu_kernels_test" --gtest_filter="*Deterministic*:*Repeated*:*TestOnly*"
      TAIL=6 run capi 200 "$B/bin/gpu_c_api_test"
      TAIL=6 run tuner 300 "$B/bin/gpu_tuner_test"
      TOPK_TUNE_DB= TAIL=8 run python-api 300 python3 python/tests/gpu_test_api.py
      TOPK_TUNE_DB= TAIL=4 run python-topk 300 python3 python/tests/gpu_test_topk.py --count 500 ;;
    *) log "unknown stage $stage" ;;
  esac
done
cat "$SUMMARY"
