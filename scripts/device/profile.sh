#!/usr/bin/env bash
# Nsight Compute profile of chosen variants (development aid): one launch
# each, the sections that explain a kernel's time (the first launch whose
# name matches NCU_KERNEL, a regex, default _kernel). Logs under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
CUB=$TOPK_TEST_TMP/cubins
cp -n "$B"/cubins/* $CUB/ 2>/dev/null || true
prof() {  # prof NAME SHAPE VARIANT
  echo "=== $1: $2 $3"
  ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
      --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis \
      --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_membar,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_sleeping,smsp__pcsamp_warps_issue_stalled_branch_resolving,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_imc_miss,smsp__warps_launched.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers \
      -k "regex:${NCU_KERNEL:-_kernel}" -c 1 --print-details all \
      "$B/bin/topk-probe" --shape "$2" --variant "$3" --cubins $CUB --no-verify 2>&1 |
    grep -vE "^==PROF==|^  *-+ *$" | sed -n '/Section:/,$p' | head -${4:-140}
}
while [[ $# -ge 3 ]]; do prof "$1" "$2" "$3"; shift 3; done
