#!/usr/bin/env bash
# Kernel work (development aid): times the same shapes and variants with this
# build's topk-probe and, when present, with $B/bin/topk-probe-old (a probe
# built before the change), in one run on one GPU. Arguments go to both
# probes, e.g.
#   scripts/device/probe-compare.sh --shape f32:128x131072:2048:ranges --variant default
set -uo pipefail
source "$(dirname "$0")/env.sh"
for probe in topk-probe-old topk-probe; do
  [[ -x "$B/bin/$probe" ]] || continue
  echo "=== $probe"
  timeout 240 "$B/bin/$probe" "$@" --cubins /tmp/topk-tests/cubins >"$OUT/$probe.log" 2>&1
  echo "rc=$?"
  grep -vE "^device" "$OUT/$probe.log" | head -80
done
