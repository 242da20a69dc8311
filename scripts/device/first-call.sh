#!/usr/bin/env bash
# First-call latency of a new process (issue "Out of the box for PyTorch
# users"), on a GPU machine, from a build-device/ tree
# (scripts/build-device-bundle.sh). Every line is a fresh process running
# topk-first-call (Library::Open, MakePlan, one Run) for five shapes in f32,
# f16 and bf16:
#   shipped   the kernels compiled into libtopk, empty kernel directory
#   nvrtc     shipped kernels off, empty kernel directory (the NVRTC wait)
#   persist   shipped kernels off, the directory the nvrtc run filled
#             (a second process's first call)
#   default   no option, no TOPK_TUNE_KERNEL_DIR: the XDG location is used
# Writes $OUT/first-call.jsonl and the summary.
#   scripts/device/first-call.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
FC="$PWD/$B/bin/topk-first-call"
J="$OUT/first-call.jsonl"
: >"$J"
SCRATCH=$(mktemp -d /tmp/topk-first-call.XXXXXX)
SHAPES=("1 128256 50" "64 32768 2048" "4096 256 8" "16 4096 64" "128 201088 64")
unset TOPK_TUNE_KERNEL_DIR TOPK_TUNE_DB

one() {  # MODE DTYPE BATCH N K ARGS...: one fresh process, one JSON line tagged with MODE
  local mode=$1
  shift
  local line
  line=$(timeout 120 "$FC" "$@" 2>>"$OUT/first-call.stderr") || line="{\"error\": \"rc $?\"}"
  echo "{\"mode\": \"$mode\", ${line#\{}" | tee -a "$J"
}

for dt in f32 f16 bf16; do
  for s in "${SHAPES[@]}"; do
    read -r b n k <<<"$s"
    tag="$dt-${b}x$n-k$k"
    one shipped "$dt" "$b" "$n" "$k" --kernel-dir "$SCRATCH/shipped-$tag"
    one nvrtc "$dt" "$b" "$n" "$k" --no-shipped --kernel-dir "$SCRATCH/nvrtc-$tag"
    one persist "$dt" "$b" "$n" "$k" --no-shipped --kernel-dir "$SCRATCH/nvrtc-$tag"
  done
done
# The default location under a fresh XDG_CACHE_HOME: compiled once (shipped
# off), then served from $XDG_CACHE_HOME/topk-tune/kernels.
XDG_CACHE_HOME="$SCRATCH/xdg" one xdg-first f32 1 100000 7 --no-shipped
XDG_CACHE_HOME="$SCRATCH/xdg" one xdg-second f32 1 100000 7 --no-shipped
log "kernel files under XDG_CACHE_HOME: $(ls "$SCRATCH/xdg/topk-tune/kernels" 2>/dev/null | wc -l)"
# Sorted output adds the shipped row sort.
one shipped-sorted bf16 32 50000 100 --sorted --kernel-dir "$SCRATCH/sorted"

python3 - "$J" <<'PY' | tee -a "$SUMMARY"
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
errors = [r for r in rows if "error" in r]
by = collections.defaultdict(list)
for r in rows:
    if "error" not in r:
        by[r["mode"]].append(r)
for mode, rs in by.items():
    ms = sorted(r["first_call_ms"] for r in rs)
    print(f"{mode:15s} n={len(rs):2d} first call ms: min {ms[0]:8.1f} median {ms[len(ms)//2]:8.1f} max {ms[-1]:8.1f}"
          f"  without NVRTC: {sum(r['no_nvrtc'] for r in rs)}/{len(rs)}")
print(f"errors: {len(errors)}")
for r in errors:
    print("  ", r)
PY
rm -rf "$SCRATCH"
