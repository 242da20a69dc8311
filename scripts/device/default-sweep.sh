#!/usr/bin/env bash
# The evidence for the built-in defaults of untuned many-row shapes: for each
# dtype, grids of batch x n x k (SWEEP_F32, SWEEP_F16, SWEEP_BF16: grids
# "BATCHES|NS|KS" separated by ';', an empty string skips the dtype),
# topk-probe times the built-in default and a few one-CTA filter configs
# (SWEEP_<DT>_IDS) on normal and shifted (normal + 100) rows, each verified
# exact first, L2-hot. One probe process per dtype and input, so the kernels
# compile once. Logs under $OUT (sweep-<dtype>-<input>.log); the summary
# ends with one line per shape: the default's normal/shifted time, then
# each filter config's.
#   scripts/device/default-sweep.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
: >"$SUMMARY"
SWEEP_F32=${SWEEP_F32-"16 64 256|16384 32768 131072 262144|8 256 2048"}
SWEEP_F16=${SWEEP_F16-""}
SWEEP_BF16=${SWEEP_BF16-"16 64 256|32768 131072 262144|8 64 1024"}
SWEEP_F32_IDS=${SWEEP_F32_IDS:-"filter_f32_b256_u2_r8_s2_g1 filter_f32_b512_u2_r11_s2_g1 filter_f32_b1024_u2_r11_s1_g1 filter_f32_b512_u1_r11_s2_g1"}
SWEEP_F16_IDS=${SWEEP_F16_IDS:-"filter_f16_b512_u1_r11_s2_g1 filter_f16_b1024_u1_r8_s1_g1"}
SWEEP_BF16_IDS=${SWEEP_BF16_IDS:-"filter_bf16_b512_u1_r11_s2_g1 filter_bf16_b1024_u1_r8_s1_g1"}
LIMIT=${LIMIT:-240}

sweep() {
  local dt=$1 grids=$2 ids=$3 grid batches ns ks b n k d f
  [[ -z $grids ]] && return
  for d in normal shifted; do
    local args=()
    IFS=';' read -ra gs <<<"$grids"
    for grid in "${gs[@]}"; do
      IFS='|' read -r batches ns ks <<<"$grid"
      for b in $batches; do
        for n in $ns; do
          for k in $ks; do
            ((k <= n)) && args+=(--shape "$dt:${b}x$n:$k:dist=$d")
          done
        done
      done
    done
    local vs=(--variant default)
    for f in $ids; do vs+=(--variant "$f"); done
    local t0=$SECONDS
    timeout "$LIMIT" "$B/bin/topk-probe" "${args[@]}" "${vs[@]}" --cubins "$TOPK_TEST_TMP/cubins" \
      >"$OUT/sweep-$dt-$d.log" 2>&1
    log "== sweep $dt $d: rc=$? ($((SECONDS - t0)) s), $((${#args[@]} / 2)) shapes, $(grep -cE ' us  \[p10' "$OUT/sweep-$dt-$d.log") timings"
    grep -E "WRONG|rror" "$OUT/sweep-$dt-$d.log" | head -5 >>"$SUMMARY"
  done
}

sweep f32 "$SWEEP_F32" "$SWEEP_F32_IDS"
sweep f16 "$SWEEP_F16" "$SWEEP_F16_IDS"
sweep bf16 "$SWEEP_BF16" "$SWEEP_BF16_IDS"

# One line per shape: the default (its id shortened) normal/shifted, then
# every filter config normal/shifted, us.
python3 - "$OUT" >>"$SUMMARY" <<'EOF'
import collections, glob, re, sys
times = collections.defaultdict(dict)
for path in sorted(glob.glob(sys.argv[1] + "/sweep-*-*.log")):
    dist = path.rsplit("-", 1)[1][:-4]
    shape = None
    for line in open(path):
        m = re.match(r"^(\w+) (\d+)x(\d+) k=(\d+)", line)
        if m:
            shape = (m[1], int(m[2]), int(m[3]), int(m[4]))
            continue
        m = re.match(r"^  (\S+)\s+([\d.]+) us", line)
        if m and shape:
            times[shape][(m[1], dist)] = float(m[2])
print("--- shape: default normal/shifted | filter configs normal/shifted (us)")
for shape in sorted(times):
    t = times[shape]
    ids = sorted({i for i, _ in t}, key=lambda i: (i.startswith("filter"), i))
    cells = ["%s %s/%s" % (i.split("_", 2)[2], t.get((i, "normal"), "-"), t.get((i, "shifted"), "-")) for i in ids]
    print("%s %dx%d k%d: %s" % (shape[0], shape[1], shape[2], shape[3], " | ".join(cells)))
EOF
cat "$SUMMARY"
