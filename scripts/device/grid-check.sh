#!/usr/bin/env bash
# One device call for the grid family (a row over many CTAs of the grid,
# generator/grid.cpp):
#   kernels  every grid kernel exact in every dtype, each launch-argument
#            value and both recoveries (gpu_kernels_test, workspace left zero);
#   det      every family's deterministic cases, the grid family's included;
#   capi     the C API tests (the workspace contract);
#   python   the Python API tests (a workspace per stream);
#   sanitize memcheck and racecheck on SANITIZE_KERNELS' variants (default the
#            smallest fp32 and bf16 kernels and the 1 x 524288 default's);
#   probe    PROBE_SHAPES (SHAPE|ID...): the default beside the ids on
#            normal, shifted, plateau and 16-valued rows, each verified exact
#            first, L2-hot and (ROTATE=1) rotated;
#   compare  the target table through the Python package, nothing tuned (the
#            defaults), torch.topk on the same tensors in the same run, DSA
#            also L2-flushed;
#   adversarial  the target shapes' defaults on the four inputs, torch.topk
#            beside them;
#   tune     a short tune of the one-row DSA shapes into a fresh cache: which
#            family won.
# Logs under $OUT; the summary is printed.
#   scripts/device/grid-check.sh [kernels] [det] [capi] [python] [sanitize] [probe] [compare] [adversarial] [tune]
set -uo pipefail
source "$(dirname "$0")/env.sh"
: >"$SUMMARY"
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(kernels det capi python probe compare)
PROBE_SHAPES=${PROBE_SHAPES:-"f32:1x524288:2048:ranges|resident_f32_b1024_g1024_i16_s16_c16 grid_f32_b256_i4_g128_s256_c4096 grid_f32_b512_i2_g128_s1024_c4096
f32:1x131072:2048:ranges|resident_f32_b512_g512_i16_c16 grid_f32_b256_i2_g64_s256_c4096 grid_f32_b512_i1_g128_s256_c4096"}

for stage in "${stages[@]}"; do
  case $stage in
    kernels)
      for f in F32 F16 BF16; do
        TOPK_TEST_VARIANT=grid_ TAIL=4 run "kernels-$f" 300 "$B/bin/gpu_kernels_test" --gtest_filter="*Every${f}*"
      done ;;
    det) TAIL=5 run det 400 "$B/bin/gpu_kernels_test" --gtest_filter="*Deterministic*" ;;
    capi) TAIL=6 run capi 200 "$B/bin/gpu_c_api_test" ;;
    python) TOPK_TUNE_DB= TAIL=8 run python-api 300 python3 python/tests/gpu_test_api.py -v ;;
    sanitize)
      # SANITIZE_KERNELS: the kernels checked (each with every launch-argument
      # value and both recoveries); memcheck and racecheck on each.
      sanitize_kernels 300 ${SANITIZE_KERNELS:-grid_f32_b512_i1 grid_f32_b512_i2 grid_bf16_b512_i1} ;;
    probe)
      while IFS='|' read -r shape ids; do
        [[ -z ${shape// /} ]] && continue
        for mode in hot ${ROTATE:+rotate}; do
          args=()
          for d in normal shifted plateau distinct16; do
            s="$shape:dist=$d"
            [[ $mode == rotate ]] && s="$shape:rotate:dist=$d"
            args+=(--shape "$s")
          done
          vs=(--variant default)
          for id in $ids; do vs+=(--variant "$id"); done
          timeout 240 "$B/bin/topk-probe" "${args[@]}" "${vs[@]}" --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/probe.log" 2>&1
          echo "rc=$?" >>"$OUT/probe.log"
        done
      done <<<"$PROBE_SHAPES"
      log "--- probe (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|rror" "$OUT/probe.log" | grep -vE "^device|^rc=0" | head -80 >>"$SUMMARY" ;;
    compare)
      TOPK_TUNE_DB= TAIL=30 run compare 400 python3 bench/compare_torch.py --l2-flush --json "$OUT/compare.json" ;;
    adversarial)
      TOPK_TUNE_DB= TAIL=30 run adversarial 400 python3 bench/adversarial.py --torch --dists shifted,plateau,distinct16 \
        --reps 20 ;;
    tune)
      rm -f /tmp/grid.db*
      TAIL=10 run tune 400 "$B/bin/topk-tune" tune --db /tmp/grid.db --l2 hot --budget "${BUDGET:-20}" \
        --shape f32:1x131072:2048:ranges --shape f32:1x524288:2048:ranges
      TAIL=10 run show 60 "$B/bin/topk-tune" show --db /tmp/grid.db ;;
    *) log "unknown stage $stage" ;;
  esac
done
cat "$SUMMARY"
