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
#   adversarial  the target shapes' defaults on normal, shifted, plateau and
#            16-valued inputs, torch.topk beside them
#   kernels  every kernel of every family exact in every dtype
#   suite    the C API, tuner and Python GPU tests, the deterministic cases
#   defaults DEFAULT_SHAPES (SHAPE|ID...): the default beside the ids, on
#            normal and shifted rows, each verified exact first
#   ab       AB_SHAPES' defaults built as they are and with --define AB_DEFINE
#            (a switch of the templates), each verified exact first; with
#            AB_VARIANT, first every kernel whose id holds it exact (f32)
#   det-cost the defaults of DET_SHAPES with and without deterministic mode
#   sanitize memcheck and racecheck, programmatic launches, on
#            SANITIZE_KERNELS (default a grid, a filter and a warp kernel)
#   profile  Nsight Compute on the defaults of PROFILE_SHAPES (default the
#            one-row DSA shapes)
#   bench    topk-bench (the C++ runtime, no torch) on the one-row DSA shapes,
#            its defaults beside the CUB baseline
#   cli      tune --json on a grid and a resident shape (every stderr line
#            must be a JSON object), then verify --deterministic --json on
#            that cache: the config each winner runs in deterministic mode
#   presets  tune PRESETS (default the dsa, sampling and moe presets) into a fresh cache
#            (BUDGET seconds a shape, default 3) and write the report: which
#            family won where
# Logs under $OUT; the summary is printed.
#   scripts/device/launch-check.sh [pdl] [probe] [compare] [adversarial] [kernels] [suite] [defaults] [ab] [det-cost] [sanitize] [profile] [bench] [cli] [presets]
set -uo pipefail
source "$(dirname "$0")/env.sh"
: >"$SUMMARY"
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
    adversarial)
      TOPK_TUNE_DB= TAIL=30 run adversarial 400 python3 bench/adversarial.py --torch \
        --dists shifted,plateau,distinct16 --reps 20 ;;
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
    defaults)
      while IFS='|' read -r shape ids; do
        [[ -z ${shape// /} ]] && continue
        vs=(--variant default)
        for id in $ids; do vs+=(--variant "$id"); done
        timeout 120 "$B/bin/topk-probe" --shape "$shape:dist=normal" --shape "$shape:dist=shifted" "${vs[@]}" \
          --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/defaults.log" 2>&1
        echo "rc=$?" >>"$OUT/defaults.log"
      done <<<"${DEFAULT_SHAPES:-}"
      log "--- defaults (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|rror" "$OUT/defaults.log" | grep -vE "^device|^rc=0|best:" | head -60 \
        >>"$SUMMARY" ;;
    ab)
      # One experiment of scripts/device/ab-round.sh, its summary appended.
      log "--- ab (us)"
      AB_ROUND="$AB_DEFINE|${AB_VARIANT:-}|${AB_VARIANT:+F32}|${AB_SHAPES:-f32:1x524288:2048:ranges f32:1x131072:2048:ranges}" \
        OUT="$OUT" LOGDIR="${LOGDIR:-$OUT}" SUMMARY="$OUT/ab-summary.txt" bash scripts/device/ab-round.sh >/dev/null 2>&1
      cat "$OUT/ab-summary.txt" >>"$SUMMARY" ;;
    det-cost)
      for shape in ${DET_SHAPES:-f32:1x524288:2048:ranges f32:1x131072:2048:ranges f32:64x32768:2048:ranges \
                     f32:4096x256:8:rotate}; do
        timeout 120 "$B/bin/topk-probe" --shape "$shape" --shape "$shape:deterministic" --variant default \
          --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/det-cost.log" 2>&1
        echo "rc=$?" >>"$OUT/det-cost.log"
      done
      log "--- deterministic cost (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|rror" "$OUT/det-cost.log" | grep -vE "^device|^rc=0|best:" >>"$SUMMARY" ;;
    sanitize)
      sanitize_kernels 200 ${SANITIZE_KERNELS:-grid_f32_b512_i1 filter_f32_b512_u2_r11 warp_f32_b128_i8} ;;
    profile)
      # PROFILE_SHAPES: the default of each shape, one launch under Nsight
      # Compute (the first launch of a top-k kernel, not the tie pass or sort).
      args=()
      for shape in ${PROFILE_SHAPES:-f32:1x131072:2048:ranges f32:1x524288:2048:ranges}; do
        args+=("$shape" "$shape" default)
      done
      NCU_KERNEL='(grid_topk|filter|filter_cluster|resident|resident_cluster|topk|warp)_kernel' TAIL=0 \
        run profile "${PROFILE_LIMIT:-300}" bash scripts/device/profile.sh "${args[@]}"
      log "--- profile (per shape: duration, throughput, stalls)"
      grep -E "^=== |Duration|Memory Throughput|Compute \(SM\) Throughput|Executed Ipc A|Issue Slots Busy|Achieved Occupancy|Registers Per|pcsamp_warps_issue_stalled_(barrier|long_scoreboard|wait|short_scoreboard|membar|not_selected|mio_throttle|math_pipe)" \
        "$OUT/profile.log" >>"$SUMMARY" ;;
    bench)
      TAIL=12 run bench 300 "$B/bin/topk-bench" --preset dsa \
        --benchmark_filter='dsa/f32/1x(131072|524288)/k2048/(default|cub)' ;;
    cli)
      rm -f /tmp/cli.db*
      timeout 300 "$B/bin/topk-tune" --json tune --db /tmp/cli.db --budget 2 --shape f32:1x131072:2048:ranges \
        --shape f32:64x4096:128:ranges >"$OUT/cli-tune.json" 2>"$OUT/cli-tune.err"
      log "--- cli: tune --json rc=$?: $(python3 -c 'import json, sys
def obj(line):
    try:
        return json.loads(line) if isinstance(json.loads(line), dict) else None
    except ValueError:
        return None
lines = [l for l in open(sys.argv[1]) if l.strip()]
bad = [l.strip()[:100] for l in lines if obj(l) is None]
print(len(lines), "stderr lines,", len(bad), "not JSON objects; events:",
      sorted({obj(l).get("event") for l in lines if obj(l) is not None}), *bad[:3])' "$OUT/cli-tune.err" 2>&1)"
      timeout 300 "$B/bin/topk-tune" --json verify --db /tmp/cli.db --deterministic >"$OUT/cli-verify.json" \
        2>"$OUT/cli-verify.err"
      log "--- cli: verify --deterministic rc=$?: $(python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
for w in j.get("winners", []):
    print(w["winner"], "->", w.get("deterministic_variant"), w["result"], w.get("now_us"), w.get("deterministic_us"))
' "$OUT/cli-verify.json" 2>&1)" ;;
    presets)
      rm -f /tmp/presets.db*
      for preset in ${PRESETS:-dsa sampling moe}; do
        TAIL=6 run "tune-$preset" "${TUNE_LIMIT:-190}" "$B/bin/topk-tune" tune --db /tmp/presets.db --budget "${BUDGET:-3}" \
          --preset "$preset"
      done
      TAIL=4 run report 60 "$B/bin/topk-tune" report --db /tmp/presets.db --out "$OUT/report"
      log "--- winners by family"
      grep -oE '\b(radix|warp|filter|resident|grid)_[a-z0-9_]+' "$OUT/report/report.md" | cut -d_ -f1 | sort | uniq -c \
        >>"$SUMMARY" ;;
    *) log "unknown stage $stage" ;;
  esac
done
cat "$SUMMARY"
