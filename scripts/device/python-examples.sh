#!/usr/bin/env bash
# The Python side on a GPU machine: the torch operator tests
# (python/tests/gpu_test_ops.py), the drop-in examples under examples/python
# (each checked against torch.topk, timed beside it), and the wheel
# (scripts/wheel.sh, skipped where no python3 has setuptools, wheel, venv
# and pip). Uses the bundle's libtopk (scripts/build-device-bundle.sh, $B).
# Logs: $OUT/python-examples/NAME.log, the summary in $OUT/summary.txt.
#   scripts/device/python-examples.sh [--iters N]
set -uo pipefail
source "$(dirname "$0")/env.sh"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
# A fresh cache of its own: kernels are compiled at plan time (default
# dispatch), so the numbers are those of an untuned install.
export TOPK_TUNE_DB=${TOPK_TUNE_DB:-$TOPK_TEST_TMP/python-examples.db}
LOGDIR=$OUT/python-examples
mkdir -p "$LOGDIR"
iters=50
[[ ${1:-} == --iters ]] && iters=${2:?--iters N}
log "python: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
fails=0
TAIL=30 run gpu_test_ops 600 python3 python/tests/gpu_test_ops.py -v || fails=$((fails + 1))
for ex in dsa_indexer sampler_topk moe_router; do
  TAIL=12 run "$ex" 300 python3 "examples/python/$ex.py" --iters "$iters" || fails=$((fails + 1))
done
TAIL=10 run wheel 120 bash scripts/wheel.sh "$B" "$TOPK_TEST_TMP/wheel"
rc=$?
[[ $rc == 0 || $rc == 77 ]] || fails=$((fails + 1))
log "python-examples: $fails failed"
exit $((fails > 0))
