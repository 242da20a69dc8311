#!/usr/bin/env bash
# Several A/B experiments in one device call (development aid). Each line of
# AB_ROUND is DEFINE|VARIANT|DTYPES|SHAPE...: first every kernel whose id
# holds VARIANT is checked exact in each of DTYPES (F32 F16 BF16,
# gpu_kernels_test as built), then each SHAPE's default is timed by
# topk-probe (the tuner's timing, each verified exact first) as built and
# with --define DEFINE (a switch of the templates that restores the old
# path). Logs in $LOGDIR (default $OUT), the summary in $SUMMARY.
#   AB_ROUND='TOPK_AB_X|grid_|F32 BF16|f32:1x131072:2048:ranges' scripts/device/ab-round.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
: >"$SUMMARY"
LOGDIR=${LOGDIR:-$OUT}
mkdir -p "$LOGDIR"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1 | sed 's/^/gpu: /' >>"$SUMMARY"
n=0
while IFS='|' read -r def variant dtypes shapes; do
  [[ -z ${def// /} ]] && continue
  n=$((n + 1))
  log "=== $n: $def (variants $variant)"
  for f in $dtypes; do
    TOPK_TEST_VARIANT=$variant TAIL=3 run "ab$n-kernels-$f" 400 "$B/bin/gpu_kernels_test" --gtest_filter="*Every${f}*"
  done
  for shape in $shapes; do
    for d in "" "$def"; do
      echo "--- ${d:-as built}" >>"$LOGDIR/ab$n.log"
      timeout 120 "$B/bin/topk-probe" --shape "$shape" --variant default ${d:+--define "$d"} \
        --cubins "$TOPK_TEST_TMP/cubins" >>"$LOGDIR/ab$n.log" 2>&1
      echo "rc=$?" >>"$LOGDIR/ab$n.log"
    done
  done
  grep -E "^---|^\S|  \S+ +[0-9.]+ us|WRONG|rror" "$LOGDIR/ab$n.log" | grep -vE "^device|^rc=0|best:" >>"$SUMMARY"
done <<<"${AB_ROUND:-}"
cat "$SUMMARY"
