#!/usr/bin/env bash
# Where a row's time goes (development aid): times a variant with the kernel
# stopped at each phase boundary (TOPK_STOP_AT in radix/trace.cuh), from the
# setup to the full kernel, one topk-probe run per stop. The difference between
# consecutive stops is what that phase adds.
#   STOPS=12 scripts/device/phase-times.sh SHAPE VARIANT [SHAPE VARIANT]...
set -uo pipefail
if [[ $# -eq 0 || $(($# % 2)) -ne 0 ]]; then
  echo "usage: $0 SHAPE VARIANT [SHAPE VARIANT]..." >&2
  exit 2
fi
source "$(dirname "$0")/env.sh"
STOPS=${STOPS:-12}
mkdir -p /tmp/topk-phase-cubins
while [[ $# -ge 2 ]]; do
  echo "=== $1 $2"
  full=$("$B/bin/topk-probe" --shape "$1" --variant "$2" --cubins /tmp/topk-phase-cubins | grep -E "^  radix" | awk '{print $2}')
  for ((s = 0; s < STOPS; ++s)); do
    t=$("$B/bin/topk-probe" --shape "$1" --variant "$2" --cubins /tmp/topk-phase-cubins --no-verify \
          --define "TOPK_STOP_AT=$s" | grep -E "^  radix" | awk '{print $2}')
    echo "stop $s: ${t:-?} us"
  done
  echo "full (verified): ${full:-?} us"
  shift 2
done
