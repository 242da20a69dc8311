#!/usr/bin/env bash
# A row over the grid (bench/grid_probe.cu, docs/PERFORMANCE.md "A row over
# the grid"): the probe on the latency-bound DSA shapes at several CTAs a
# row, beside the library's tuned winners of those shapes (topk-probe) in
# the same run on the same GPU. Needs $B/bin/topk-grid-probe (the bench
# target topk-grid-probe, which scripts/build-device-bundle.sh copies).
#   GRID_CONFIGS="n:k:batch:ctas:block[:sample] ..." overrides the probe's list
#   (sample: the probe's --sample, 1024 when left out, "e" after it for
#   --early 1, "s" for --sync 1, e.g. 512e, 512s, and a seventh field for
#   --sample-stop); GRID_ARGS adds arguments to every probe run (e.g.
#   "--trace 1", or "--rotate 1" for inputs read from memory);
#   GRID_BASELINE="shape=variant ..." overrides the library's winners
#   (topk-probe shapes, ":rotate" for inputs from memory; " " for none).
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$SUMMARY"
configs=${GRID_CONFIGS:-"524288:2048:1:128:256:256s 524288:2048:1:64:512:512s 524288:2048:1:64:512:512
131072:2048:1:64:256:256s 131072:2048:1:32:256:256s 131072:2048:1:16:512:512
32768:2048:64:2:1024:1024s 32768:2048:64:2:1024:1024 4096:128:64:1:512:512"}
for c in $configs; do
  IFS=: read -r n k batch ctas block sample stop <<<"$c"
  sample=${sample:-1024}
  sel=(--sample "${sample%[es]}")
  [[ $sample == *e ]] && sel+=(--early 1)
  [[ $sample == *s ]] && sel+=(--sync 1)
  [[ -n ${stop:-} ]] && sel+=(--sample-stop "$stop")
  # shellcheck disable=SC2086
  run "grid_${batch}x${n}_k${k}_g${ctas}_b${block}_s${sample}${stop:+_t$stop}" 120 "$B/bin/topk-grid-probe" --batch "$batch" \
    --n "$n" --k "$k" --ctas "$ctas" --block "$block" "${sel[@]}" ${GRID_ARGS:-}
done
# The library's winners of these shapes (the target table's), same run.
winners=${GRID_BASELINE:-"f32:1x524288:2048:ranges=resident_f32_b1024_g1024_i16_s16_c16
f32:1x131072:2048:ranges=resident_f32_b512_g512_i16_c16
f32:64x32768:2048:ranges=filter_f32_b1024_u2_r11_s1_g1
f32:64x4096:128:ranges=resident_f32_b1024_g1024_i4"}
for w in $winners; do
  shape=${w%=*}  # the last "=": a shape may hold one (dist=logits)
  shape_name=${shape//:/_}
  run "baseline_${shape_name//=/-}" 200 "$B/bin/topk-probe" --shape "$shape" --variant "${w##*=}" \
    --cubins /tmp/topk-tests/cubins
done
