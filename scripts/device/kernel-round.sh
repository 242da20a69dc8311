#!/usr/bin/env bash
# One device call for a kernel change (development aid): every variant exact
# (gpu_kernels_test), the target shapes' variants timed by the probe built
# before the change and by this one (probe-compare.sh), and CTA 0's phase
# trace of chosen variants (TOPK_TRACE). Logs under $OUT. ROUND picks the
# variants compared: "cluster" (the single long rows' cluster kernels and a
# few others, the default), "c1" (the one-CTA kernels of the batched shapes),
# or both ("cluster c1").
#   ROUND=c1 scripts/device/kernel-round.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
if [[ ${SKIP_EXACT:-0} != 1 ]]; then
  timeout 500 "$B/bin/gpu_kernels_test" >"$OUT/gpu_kernels_test.log" 2>&1
  echo "gpu_kernels_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)|tests ran' "$OUT/gpu_kernels_test.log" | tr '\n' ' ')"
  grep -E "FAILED|wrong" "$OUT/gpu_kernels_test.log" | head -5
  # Where the named kernels spill (SASS around each local-memory access), from
  # the cubins gpu_kernels_test just compiled (before the old probe adds its
  # own), when cuobjdump is there.
  CUOBJDUMP=/usr/local/cuda/bin/cuobjdump
  if [[ -x $CUOBJDUMP ]]; then
    for kern in ${SASS:-kernel_f32_b1024_r11_cN_i0}; do
      # The store's .kernel files (jit::SerializeKernel): a magic, then
      # length-prefixed fields: key, hash, arch, options, compiler, lowered
      # name, log, cubin.
      python3 - "$kern" /tmp/topk-tests/cubins /tmp/topk-sass.cubin <<'PY' || continue
import glob, struct, sys
for path in glob.glob(sys.argv[2] + "/*.kernel"):
    b = open(path, "rb").read()[8:]
    fields = []
    for _ in range(8):
        n = struct.unpack_from("<Q", b)[0]
        fields.append(b[8:8 + n])
        b = b[8 + n:]
    if fields[0].decode() == sys.argv[1]:
        open(sys.argv[3], "wb").write(fields[7])
        sys.exit(0)
sys.exit(1)
PY
      $CUOBJDUMP -sass /tmp/topk-sass.cubin >"$OUT/$kern.sass" 2>&1
      echo "=== $kern: $(grep -cE 'STL|LDL' "$OUT/$kern.sass") local-memory instructions (SASS in $kern.sass)"
    done
  fi
fi
variant_args() {  # VARIANT... -> args=(--variant V ...)
  args=()
  for v in "$@"; do args+=(--variant "$v"); done
}
cmp() {  # SHAPE VARIANT...: the probe before the change, this one, and this one with $DEFINE
  local shape=$1 args
  shift
  variant_args "$@"
  scripts/device/probe-compare.sh --shape "$shape" "${args[@]}" 2>&1 | grep -E "===|rc=|us"
  if [[ -n ${DEFINE:-} ]]; then
    echo "=== topk-probe --define $DEFINE"
    "$B/bin/topk-probe" --shape "$shape" "${args[@]}" --define "$DEFINE" --cubins /tmp/topk-define-cubins 2>&1 |
      grep -E "us|WRONG"
  fi
}
if [[ ${ROUND:-cluster} == *cluster* ]]; then
  cmp f32:1x131072:2048:ranges radix_f32_b512_r8_s1024_c16_t3_m1_i0 radix_f32_b512_r8_s4096_c16_t3_m1_i0 \
    radix_f32_b512_r11_s4096_c16_t2_m1_i0 radix_f32_b512_r8_s4096_c8_t3_m1_i0 radix_f32_b1024_r8_s4096_c16_t3_m1_i0 \
    radix_f32_b256_r8_s4096_c16_t3_m1_i0 radix_f32_b512_r8h_s4096_c16_t4_m1_i0 radix_f32_b512_r8_s4096_c16_t1_m1_i0
  cmp f32:1x524288:2048:ranges radix_f32_b1024_r8_s4096_c16_t3_m1_i0 radix_f32_b1024_r11_s4096_c16_t2_m1_i0 \
    radix_f32_b512_r8_s4096_c16_t3_m1_i0 radix_f32_b1024_r8_s1024_c16_t3_m1_i0 radix_f32_b1024_r8_s4096_c8_t3_m1_i0 \
    radix_f32_b1024_r8h_s4096_c16_t4_m1_i0 radix_f32_b1024_r11_s4096_c16_t1_m1_i0 radix_f32_b512_r11_s4096_c16_t2_m1_i0 \
    radix_f32_b512_r11_s4096_c8_t2_m1_i0
  cmp f32:64x32768:2048:ranges radix_f32_b1024_r11_s4096_c1_t1_m0_i0 radix_f32_b512_r11_s4096_c2_t2_m1_i0 \
    radix_f32_b1024_r11_s4096_c2_t2_m1_i0 radix_f32_b512_r8_s4096_c2_t3_m1_i0 radix_f32_b256_r11_s4096_c2_t2_m1_i0 \
    radix_f32_b512_r11_s4096_c4_t2_m1_i0
  cmp f32:128x131072:2048:ranges radix_f32_b1024_r11_s4096_c1_t1_m0_i0 radix_f32_b1024_r11_s4096_c2_t2_m1_i0 \
    radix_f32_b1024_r11_s8192_c1_t1_m0_i0
  cmp "bf16:128x201088:64:values:rotate:dist=logits" radix_bf16_b1024_r11_s4096_c1_t1_m0_i0 \
    radix_bf16_b1024_r11_s4096_c2_t1_m1_i0 radix_bf16_b1024_r11_s1024_c1_t1_m0_i0
  cmp "f32:256x128256:1024:values:rotate:dist=logits" radix_f32_b1024_r11_s8192_c1_t1_m0_i0 \
    radix_f32_b1024_r11_s4096_c1_t1_m0_i0
fi
if [[ ${ROUND:-cluster} == *c1* ]]; then
  cmp f32:64x32768:2048:ranges radix_f32_b1024_r11_s4096_c1_t1_m0_i0 radix_f32_b1024_r11_s4096_c1_t1_m1_i0 \
    radix_f32_b512_r11_s4096_c1_t1_m1_i0 radix_f32_b1024_r11_s1024_c2_t1_m1_i0
  cmp f32:128x131072:2048:ranges radix_f32_b1024_r11_s8192_c1_t1_m0_i0 radix_f32_b1024_r11_s4096_c1_t1_m0_i0 \
    radix_f32_b512_r11_s8192_c1_t1_m0_i0 radix_f32_b512_r11_s4096_c1_t1_m1_i0
  cmp "bf16:128x201088:64:values:rotate:dist=logits" radix_bf16_b1024_r11_s1024_c1_t1_m0_i0 \
    radix_bf16_b1024_r11_s4096_c1_t1_m0_i0 radix_bf16_b512_r11_s1024_c1_t1_m0_i0
  cmp "f32:256x128256:1024:values:rotate:dist=logits" radix_f32_b1024_r11_s8192_c1_t1_m0_i0 \
    radix_f32_b1024_r11_s4096_c1_t1_m0_i0 radix_f32_b512_r11_s8192_c1_t1_m0_i0
  # Adversarial rows: the speculation fails on them.
  cmp "f32:128x131072:2048:ranges:dist=few_distinct" radix_f32_b1024_r11_s8192_c1_t1_m0_i0
  cmp "bf16:128x201088:64:values:dist=all_equal" radix_bf16_b1024_r11_s1024_c1_t1_m0_i0
  cmp "f32:256x128256:1024:values:dist=all_equal" radix_f32_b1024_r11_s8192_c1_t1_m0_i0
fi
trace() {  # SHAPE VARIANT...
  local shape=$1 args
  shift
  variant_args "$@"
  "$B/bin/topk-probe" --shape "$shape" "${args[@]}" --define TOPK_TRACE --cubins /tmp/topk-trace-cubins 2>&1 |
    grep -E "us|trace"
}
if [[ ${ROUND:-cluster} == *cluster* ]]; then
  echo "=== traces (CTA 0; b<i> = phase boundary i, see radix/trace.cuh)"
  trace f32:64x32768:2048:ranges radix_f32_b512_r11_s4096_c2_t2_m1_i0
  trace f32:1x131072:2048:ranges radix_f32_b512_r8_s1024_c16_t3_m1_i0 radix_f32_b512_r8_s4096_c16_t3_m1_i0 \
    radix_f32_b512_r11_s4096_c16_t2_m1_i0 radix_f32_b512_r8_s4096_c8_t3_m1_i0
  trace f32:1x524288:2048:ranges radix_f32_b1024_r8_s4096_c16_t3_m1_i0 radix_f32_b1024_r11_s4096_c16_t2_m1_i0
fi
