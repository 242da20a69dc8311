#!/usr/bin/env bash
# Warp-per-row kernel work (development aid): every warp kernel checked on
# the GPU, then the MoE shapes timed with this build's probe and, when
# present, with $B/bin/topk-probe-old (a probe built before the change), in
# the same run. Logs under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
cp -n "$B"/cubins/* /tmp/topk-tests/cubins/ 2>/dev/null || true
TOPK_TEST_SUBSET=warp timeout 300 "$B/bin/gpu_kernels_test" --gtest_filter='*Every*' >"$OUT/warp-test.log" 2>&1
echo "warp test rc=$?"
grep -E "kernels [0-9]|FAIL|PASSED|FAILED" "$OUT/warp-test.log" | head -20
args=()
for dt in f32 bf16; do
  for b in 64 128 256 512; do args+=(--variant "radix_${dt}_b${b}_r1_s0_c0_t0_m0_i8"); done
done
shapes=(--shape f32:4096x256:8:rotate --shape bf16:16384x256:8:rotate --shape f32:16384x256:8:rotate
        --shape bf16:4096x256:8:rotate)
for probe in topk-probe-old topk-probe; do
  [[ -x "$B/bin/$probe" ]] || continue
  echo "=== $probe"
  timeout 200 "$B/bin/$probe" "${shapes[@]}" "${args[@]}" --variant default --cubins /tmp/topk-tests/cubins \
    >"$OUT/$probe.log" 2>&1
  grep -vE "^device" "$OUT/$probe.log" | head -60
done
