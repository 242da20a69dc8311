#!/usr/bin/env bash
# Per-instruction profile of chosen variants (development aid): Nsight
# Compute's source page, one launch each, every SASS instruction with how
# often it ran and where warps stalled on it, as CSV under $OUT (NAME.csv).
#   scripts/device/profile-source.sh NAME SHAPE VARIANT [NAME SHAPE VARIANT]...
# NCU_EXTRA adds ncu options, e.g. NCU_EXTRA='--warp-sampling-interval 0' (more stall samples) or
# NCU_EXTRA='--section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables' (pipe
# utilisation, shared-memory bank conflicts); DETAILS caps the detail lines printed (30); KERNEL a
# regex of the kernel's name (topk_kernel; filter_cluster_kernel for the filter family's cluster mode).
set -uo pipefail
if [[ $# -eq 0 || $(($# % 3)) -ne 0 ]]; then
  echo "usage: $0 NAME SHAPE VARIANT [NAME SHAPE VARIANT]..." >&2
  exit 2
fi
source "$(dirname "$0")/env.sh"
while [[ $# -ge 3 ]]; do
  echo "=== $1: $2 $3"
  ncu --section SourceCounters --section SpeedOfLight --section InstructionStats --section WarpStateStats ${NCU_EXTRA:-} -k regex:${KERNEL:-topk_kernel} -c 1 \
      -o "/tmp/$1" -f "$B/bin/topk-probe" --shape "$2" --variant "$3" --cubins /tmp/topk-tests/cubins --no-verify \
      >"/tmp/$1.log" 2>&1
  echo "ncu rc=$?"; tail -3 "/tmp/$1.log"
  ncu -i "/tmp/$1.ncu-rep" --page source --print-source sass --csv >"$OUT/$1.csv" 2>&1
  echo "source page rc=$? ($(wc -l <"$OUT/$1.csv") lines)"
  ncu -i "/tmp/$1.ncu-rep" --page details 2>&1 | grep -E "Duration|Executed Ipc|Issue Slots Busy|Instructions|Memory Throughput|DRAM Throughput|Warp Cycles|stall|Stall|Pipe|Utilization|Bank|Shared|L1/TEX Hit|L2 Hit" | cut -c1-400 | head -${DETAILS:-30}
  shift 3
done
