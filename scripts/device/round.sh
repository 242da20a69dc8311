#!/usr/bin/env bash
# One device call that checks a release candidate end to end, from a
# build-device/ tree (scripts/build-device-bundle.sh) whose cubins/ holds the
# sm_90 kernels of compile_all_test. Two phases:
#   1. timed, alone on the GPU: first-call latency in fresh processes
#      (first-call.sh) and the Python drop-in examples beside torch.topk;
#   2. correctness, concurrently (nothing timed): every kernel variant exact
#      (gpu_kernels_test), memcheck, the torch operators (torch.compile,
#      CUDA graphs), the Python API, 1000 random problems against torch.topk,
#      the C API, the tuner, and an interrupted tune (SIGTERM and SIGINT:
#      exit 130, no worker left, no scratch folder left, the cache resumes).
# Logs under $OUT (summary.txt first); DEADLINE_S (default 500) bounds the
# whole call: a stage still running then is killed and reported.
#   scripts/device/round.sh [split] [first-call] [examples] [py-host] [probe] [det] [correct] [legacy]
set -uo pipefail
source "$(dirname "$0")/env.sh"
START=$SECONDS
DEADLINE_S=${DEADLINE_S:-500}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
LOGDIR=/tmp/topk-round-logs  # packed into $OUT/logs.tgz (few files come back)
mkdir -p "$LOGDIR"
STAGES=${*:-first-call examples py-host probe correct}
want() { [[ " $STAGES " == *" $1 "* ]]; }
left() { echo $((DEADLINE_S - (SECONDS - START))); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1 | sed 's/^/gpu: /' | tee -a "$SUMMARY"
log "cubins carried: $(ls "$TOPK_TEST_TMP/cubins" | wc -l)"

# The kernel suite one test per process (a sticky CUDA error in one does not
# hide the others); a variant that fails with a CUDA error is then run alone
# under memcheck with line info.
if want split; then
  log "== split ($(left) s left)"
  for f in '*F32*' '*F16*' '*BF16*' '*Repeated*:*TestOnly*' '*Deterministic*'; do
    timeout 150 "$B/bin/gpu_kernels_test" --gtest_filter="$f" >"$LOGDIR/split.log" 2>&1
    echo "split $f rc=$?: $(grep -E "^\[[a-z0-9]+\] kernels|deterministic mode|CUDA error|PASSED|FAILED  \] [0-9]" "$LOGDIR/split.log" | tr '\n' ' ' | cut -c1-600)" | tee -a "$SUMMARY"
    bad=$(grep -oE "CUDA error, stopping: [a-z0-9_]+" "$LOGDIR/split.log" | head -n1 | awk '{print $4}')
    cat "$LOGDIR/split.log" >>"$LOGDIR/split-all.log"
    if [[ -n $bad ]]; then
      kernel=${bad%%_s[0-9]*}
      log "memcheck of $kernel ($bad)"
      TOPK_TEST_LINEINFO=1 TOPK_TEST_VARIANT=$kernel timeout 200 compute-sanitizer --tool memcheck --print-limit 5 \
        "$B/bin/gpu_kernels_test" --gtest_filter="$f" >"$LOGDIR/split-memcheck.log" 2>&1
      log "memcheck rc=$?"
      grep -E "Invalid|misaligned|Misaligned|at 0x|by thread|Address|ERROR SUMMARY|CUDA error" "$LOGDIR/split-memcheck.log" | head -30 |
        cut -c1-300 >>"$SUMMARY"
    fi
  done
  timeout 120 "$B/bin/gpu_tuner_test" >"$LOGDIR/split-tuner.log" 2>&1
  echo "split tuner rc=$?: $(grep -E "PASSED|FAILED  \] [0-9]" "$LOGDIR/split-tuner.log" | tr '\n' ' ')" | tee -a "$SUMMARY"
fi

# 1. Timed, alone.
if want first-call; then
  log "== first-call ($(left) s left)"
  timeout "$(left)" bash scripts/device/first-call.sh >"$LOGDIR/first-call.log" 2>&1
  log "first-call rc=$?"
fi
if want examples; then
  export TOPK_TUNE_DB=$TOPK_TEST_TMP/examples.db
  for ex in dsa_indexer sampler_topk moe_router; do
    TAIL=10 LOGDIR=$LOGDIR run "$ex" "$(($(left) < 90 ? $(left) : 90))" python3 "examples/python/$ex.py" --iters 50
  done
  unset TOPK_TUNE_DB
fi

# Python: the first call of five shapes per dtype in fresh processes (no
# tuning cache, an empty kernel directory: the shipped kernels), and the
# per-call host cost against torch.topk.
if want py-host; then
  log "== py-host ($(left) s left)"
  kd=$(mktemp -d /tmp/topk-py-kernels.XXXXXX)
  for dt in f32 f16 bf16; do
    TOPK_TUNE_KERNEL_DIR=$kd TOPK_TUNE_DB= timeout 120 python3 bench/python_host_cost.py first-call "$dt"
  done >"$LOGDIR/py-first-call.log" 2>&1
  log "py first-call rc=$?, kernel files written: $(ls "$kd" | wc -l)"
  cat "$LOGDIR/py-first-call.log" | cut -c1-200 >>"$SUMMARY"
  TOPK_TUNE_DB= timeout 120 python3 bench/python_host_cost.py overhead >"$LOGDIR/py-overhead.log" 2>&1
  log "py overhead rc=$?"
  cut -c1-400 "$LOGDIR/py-overhead.log" >>"$SUMMARY"
fi

# The eight target shapes' winners timed by this build's probe and by
# $B/bin/topk-probe-old (built before a refactor), one after the other on
# each shape: a refactor must leave each within a few percent.
if want probe && [[ -x $B/bin/topk-probe-old ]]; then
  log "== probe: old and new ($(left) s left)"
  while read -r shape new old; do
    for p in old new; do
      id=$new
      probe=topk-probe
      [[ $p == old ]] && id=$old && probe=topk-probe-old
      timeout 60 "$B/bin/$probe" --shape "$shape" --variant "$id" --cubins "$TOPK_TEST_TMP/cubins-$p" \
        >>"$LOGDIR/probe-$p.log" 2>&1
      echo "$p $shape $id rc=$?: $(grep -E "^ *[0-9.]+ us|median|us " "$LOGDIR/probe-$p.log" | tail -n1 | cut -c1-150)" |
        tee -a "$SUMMARY"
    done
  done <<'SHAPES'
f32:64x32768:2048:ranges radix_f32_b1024_r11_h0_s1024_c2_t1_m1 radix_f32_b1024_r11_s1024_c2_t1_m1_i0
f32:1x131072:2048:ranges radix_f32_b512_r11_h0_s4096_c16_t1_m1 radix_f32_b512_r11_s4096_c16_t1_m1_i0
f32:1x524288:2048:ranges radix_f32_b1024_r11_h0_s4096_c16_t1_m1 radix_f32_b1024_r11_s4096_c16_t1_m1_i0
f32:128x131072:2048:ranges radix_f32_b1024_r11_h0_s8192_c1_t1_m0 radix_f32_b1024_r11_s8192_c1_t1_m0_i0
bf16:128x201088:64:values:rotate:dist=logits radix_bf16_b1024_r11_h0_s1024_c1_t1_m0 radix_bf16_b1024_r11_s1024_c1_t1_m0_i0
f32:256x128256:1024:values:rotate:dist=logits radix_f32_b1024_r11_h0_s4096_c1_t1_m0 radix_f32_b1024_r11_s4096_c1_t1_m0_i0
f32:4096x256:8:rotate warp_f32_b256_i8_l1 radix_f32_b256_r1_s0_c0_t1_m0_i8
bf16:16384x256:8:rotate warp_bf16_b128_i8_l0 radix_bf16_b128_r1_s0_c0_t0_m0_i8
SHAPES
fi

# The cost of deterministic mode: each target shape's winner timed without
# and with its tie pass, on normal data and on the tie-heavy inputs (a
# plateau of zeros, 16 distinct values), in one probe process per shape.
if want det; then
  log "== det: deterministic mode's cost ($(left) s left)"
  while read -r shape id; do
    base=${shape%%:dist=*}
    dist=normal
    [[ $shape == *dist=logits* ]] && dist=logits
    args=()
    for d in $dist plateau distinct16; do
      args+=(--shape "$base:dist=$d" --shape "$base:deterministic:dist=$d")
    done
    timeout "$(($(left) < 90 ? $(left) : 90))" "$B/bin/topk-probe" "${args[@]}" --variant "$id" \
      --cubins "$TOPK_TEST_TMP/cubins-new" >>"$LOGDIR/det.log" 2>&1
    echo "det $shape $id rc=$?" | tee -a "$SUMMARY"
  done <<'SHAPES'
f32:64x4096:128:ranges default
f32:64x32768:2048:ranges radix_f32_b1024_r11_h0_s1024_c2_t1_m1
f32:1x131072:2048:ranges radix_f32_b512_r11_h0_s4096_c16_t1_m1
f32:1x524288:2048:ranges radix_f32_b1024_r11_h0_s4096_c16_t1_m1
f32:128x131072:2048:ranges radix_f32_b1024_r11_h0_s8192_c1_t1_m0
bf16:128x201088:64:values:rotate:dist=logits radix_bf16_b1024_r11_h0_s1024_c1_t1_m0
f32:256x128256:1024:values:rotate:dist=logits radix_f32_b1024_r11_h0_s4096_c1_t1_m0
f32:4096x256:8:rotate warp_f32_b256_i8_l1
bf16:16384x256:8:rotate warp_bf16_b128_i8_l0
SHAPES
  grep -E "^[a-z0-9]+ [0-9]+x|^  [a-z]+_.* us" "$LOGDIR/det.log" | cut -c1-160 >>"$SUMMARY"
  # The CLI: two small shapes tuned, then verify --deterministic.
  db=$TOPK_TEST_TMP/det.db
  timeout 120 "$B/bin/topk-tune" tune --db "$db" --shape f32:8x4096:64 --shape bf16:16x20000:700:smallest \
    --budget 3 >"$LOGDIR/det-tune.log" 2>&1
  log "det tune rc=$?"
  timeout 120 "$B/bin/topk-tune" verify --db "$db" --deterministic >"$LOGDIR/det-verify.log" 2>&1
  log "det verify rc=$?"
  cut -c1-220 "$LOGDIR/det-verify.log" >>"$SUMMARY"
fi

# 2. Correctness, concurrently.
interrupt() {  # SIGNAL: tune a shape, send SIGNAL to topk-tune alone after 10 s
  local sig=$1 db=$TOPK_TEST_TMP/interrupt.db
  "$B/bin/topk-tune" tune --db "$db" --shape f32:64x32768:2048:ranges --budget 120 --no-resume &
  local pid=$!
  sleep 10
  local workers
  workers=$(pgrep -P "$pid" -d, topk-tune-worke || true)
  kill "-$sig" "$pid"
  wait "$pid"
  local rc=$?
  sleep 1
  local alive=""
  # A killed worker whose parent exited may stay a zombie (State Z) until
  # the container's init reaps it: alive means any other state.
  for w in ${workers//,/ }; do
    local state
    state=$(awk '/^State:/ {print $2}' "/proc/$w/status" 2>/dev/null)
    [[ -n $state && $state != Z ]] && alive+="$w($state) "
  done
  local scratch
  scratch=$(ls -d "${TMPDIR:-/tmp}/topk-tune-$pid"* 2>/dev/null | wc -l)
  local n
  n=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from measurements').fetchone()[0])" "$db" 2>&1)
  echo "interrupt $sig: rc=$rc workers before=[$workers] alive after=[$alive] scratch folders left=$scratch measurements kept=$n"
  [[ $rc == 130 && -z $alive && $scratch == 0 ]]
}
if want correct; then
  log "== correct ($(left) s left)"
  lim=$(($(left) - 15))
  pids=()
  job() {  # NAME CMD...: in the background, bounded by the deadline
    local name=$1
    shift
    (timeout "$lim" "$@" >"$LOGDIR/$name.log" 2>&1; echo "== $name: rc=$?" >"$LOGDIR/$name.rc") &
    pids+=($!)
  }
  want split || job kernels "$B/bin/gpu_kernels_test"  # split ran it already, one test per process
  job ops python3 python/tests/gpu_test_ops.py -v
  job api python3 python/tests/gpu_test_api.py -v
  job random python3 python/tests/gpu_test_topk.py --count "${RANDOM_COUNT:-1000}"
  job c_api "$B/bin/gpu_c_api_test"
  job interrupt bash -c "$(declare -f interrupt); B=$B TOPK_TEST_TMP=$TOPK_TEST_TMP; interrupt TERM && interrupt INT"
  want split || wait "${pids[0]}"  # memcheck after the kernels test: it reuses its cubins
  lim=$(($(left) - 10))
  job memcheck env TOPK_TEST_SUBSET=sanitizer compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*:*Deterministic*'
  job racecheck env TOPK_TEST_SUBSET=sanitizer compute-sanitizer --tool racecheck --racecheck-report hazard \
    --error-exitcode 9 "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*:*Deterministic*'
  [[ -x $B/bin/gpu_tuner_test ]] && job tuner "$B/bin/gpu_tuner_test"
  wait
  for f in kernels ops api random c_api interrupt memcheck racecheck tuner; do
    [[ -f $LOGDIR/$f.rc ]] || continue
    cat "$LOGDIR/$f.rc" | tee -a "$SUMMARY"
    grep -E "^\[  (PASSED|FAILED) |FAIL|^OK|^Ran |mismatch|problems|ERROR SUMMARY|RACECHECK SUMMARY|interrupt |checked|exact" "$LOGDIR/$f.log" |
      head -12 | cut -c1-200 >>"$SUMMARY"
  done
fi
# A cache written by the CLI of an earlier release ($B/bin/topk-tune-old and
# its worker) read by this build: show, verify and dispatch.
if want legacy; then
  log "== legacy ($(left) s left)"
  SUMMARY=$LOGDIR/legacy-summary.txt LOGDIR=$LOGDIR timeout "$(left)" bash scripts/device/family-check.sh legacy \
    >"$LOGDIR/legacy.log" 2>&1
  log "legacy rc=$?"
  cut -c1-200 "$LOGDIR/legacy-summary.txt" >>"$SUMMARY"
fi
log "round: $((SECONDS - START)) s"
tar czf "$OUT/logs.tgz" -C "$LOGDIR" . 2>/dev/null
