#!/usr/bin/env bash
# The end-to-end acceptance runs of the issues, on a GPU machine, from a
# build-device/ tree built elsewhere (scripts/build-device-bundle.sh). Logs
# go to $LOGS and are packed into $OUT/logs.tgz; the tuning cache stays in
# .device-state/ for later stages and is copied to $OUT/dsa.db.
#   scripts/device/acceptance.sh STAGE...
# Stages: tune resume kill targets verify compare report bench python gpu-tests kernels
#         nearest (after kill: its resumed cache is the tuned grid) adversarial cost api
set -uo pipefail
source "$(dirname "$0")/env.sh"
LOGS=/tmp/topk-logs
mkdir -p "$LOGS" .device-state
T="$PWD/$B/bin/topk-tune"
DB="$PWD/.device-state/dsa.db"
GRID=${GRID:-/tmp/kill.db}  # the kill stage's cache: the dsa preset, tuned after five kills
LOGDIR=$LOGS  # run() writes its logs there (env.sh)
# The measurement keys of a cache, one per line, sorted (no line at all when
# there are none: an empty line would count as a measurement).
keys() { sql "$1" "SELECT device||'|'||variant_id||'|'||problem_key||'|'||input_dist||'|'||l2_mode FROM measurements" | sed '/^$/d' | sort; }
sql() { python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print('\n'.join('|'.join(map(str,r)) for r in c.execute(sys.argv[2])))" "$@"; }

# tune_targets NAME DB BUDGET: the nine target shapes, tuned into a fresh DB
# (DSA L2-hot, sampling on logits, MoE), logs NAME-dsa, NAME-sampling, NAME-moe.
tune_targets() {
  local name=$1 db=$2 budget=$3
  rm -f "$db" "$db-wal" "$db-shm"
  TAIL=8 run "$name-dsa" 300 "$T" tune --db "$db" --l2 hot --budget "$budget" --shape f32:64x4096:128:ranges \
    --shape f32:64x32768:2048:ranges \
    --shape f32:1x131072:2048:ranges --shape f32:1x524288:2048:ranges --shape f32:128x131072:2048:ranges
  TAIL=6 run "$name-sampling" 300 "$T" tune --db "$db" --l2 rotate --dist logits --budget "$budget" \
    --shape bf16:128x201088:64:values --shape f32:256x128256:1024:values
  TAIL=6 run "$name-moe" 300 "$T" tune --db "$db" --l2 rotate --budget "$budget" --shape f32:4096x256:8 \
    --shape bf16:16384x256:8
}

for stage in "$@"; do
  case $stage in
    tune)  # the dsa preset, uninterrupted, with the test-only faults injected
      rm -f "$DB" "$DB-wal" "$DB-shm"
      TAIL=40 run tune 900 "$T" tune --preset dsa --budget "${BUDGET:-15}" --db "$DB" --inject-faults crash,hang --timeout 20
      log "outcomes: $(sql "$DB" "SELECT outcome, COUNT(*) FROM measurements GROUP BY outcome" | tr '\n' ' ')"
      log "faults: $(sql "$DB" "SELECT variant_id, outcome FROM measurements WHERE variant_id LIKE 'test_fault_%'" | tr '\n' ' ')"
      log "winners: $(sql "$DB" "SELECT COUNT(*) FROM winners")" ;;
    resume)  # the same command again: nothing measured twice
      before=$(sql "$DB" "SELECT COUNT(*), MAX(id) FROM measurements")
      run resume 600 "$T" tune --preset dsa --budget "${BUDGET:-15}" --db "$DB"
      log "measurements (count|max id) before: $before after: $(sql "$DB" "SELECT COUNT(*), MAX(id) FROM measurements")" ;;
    kill)  # SIGKILL a dsa tune at random moments five times, resume each time
      K=$GRID
      rm -f $K $K-wal $K-shm /tmp/kill-keys-*
      for i in 1 2 3 4 5; do
        "$T" tune --preset dsa --budget "${KILL_BUDGET:-3}" --db $K >"$LOGS/kill-$i.log" 2>&1 &
        pid=$!
        s=$((RANDOM % 20 + 6))
        sleep $s
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        pkill -9 -f topk-tune-worker 2>/dev/null
        sleep 1
        keys $K >/tmp/kill-keys-$i
        log "kill $i after ${s}s: integrity=$(sql $K 'PRAGMA integrity_check') measurements=$(wc -l </tmp/kill-keys-$i)"
      done
      run kill-final 600 "$T" tune --preset dsa --budget "${KILL_BUDGET:-3}" --db $K
      keys $K >/tmp/kill-keys-final
      lost=0
      for i in 1 2 3 4 5; do
        lost=$((lost + $(comm -23 /tmp/kill-keys-$i /tmp/kill-keys-final | wc -l)))
        comm -23 /tmp/kill-keys-$i /tmp/kill-keys-final | sed "s/^/  missing after kill $i: /" | tee -a "$SUMMARY"
      done
      cp /tmp/kill-keys-* "$LOGS/" 2>/dev/null
      log "after resume: integrity=$(sql $K 'PRAGMA integrity_check') measurements=$(wc -l </tmp/kill-keys-final) winners=$(sql $K 'SELECT COUNT(*) FROM winners') lost_finished_measurements=$lost" ;;
    targets)  # tune the nine target shapes into a fresh cache (compare then times them)
      tune_targets targets "$DB" "${BUDGET:-10}" ;;
    verify)  # winners re-checked and re-timed in a fresh process
      TAIL=40 run verify 600 "$T" verify --db "$DB" ;;
    compare)  # the target table: the runtime against torch.topk, same tensors, same run; DSA also L2-flushed
      TAIL=34 run compare 600 python3 bench/compare_torch.py --db "$DB" --l2-flush --json "$LOGS/compare.json" \
        --baselines-out "$LOGS/torch_baselines.jsonl"
      run import-baselines 120 "$T" import "$LOGS/torch_baselines.jsonl" --db "$DB" ;;
    report)
      run report 120 "$T" report --db "$DB" --out "$LOGS/report"
      cp "$LOGS/report/report.html" "$OUT/report.html" 2>/dev/null
      cp "$LOGS/report/report.md" "$OUT/report.md" 2>/dev/null ;;
    bench)
      TAIL=60 run bench 600 "$B/bin/topk-bench" --db "$DB" --preset "${BENCH_PRESETS:-dsa,sampling,moe}" \
        --benchmark_min_time="${BENCH_MIN_TIME:-0.05}" ${BENCH_FILTER:+--benchmark_filter="$BENCH_FILTER"} \
        --benchmark_out="$LOGS/bench.json" --benchmark_out_format=json
      cp "$LOGS/bench.json" "$OUT/bench.json" 2>/dev/null ;;
    python)  # 1000 random problems against torch.topk through the Python package
      TOPK_TUNE_DB="$DB" TAIL=30 run python 600 python3 python/tests/gpu_test_topk.py --count 1000 ;;
    gpu-tests | kernels)  # kernels: only what a kernel change needs (every variant exact, sanitizers)
      mkdir -p "$TOPK_TEST_TMP"
      tests=(gpu_kernels_test gpu_tuner_test gpu_c_api_test)
      [[ $stage == kernels ]] && tests=(gpu_kernels_test)
      for t in "${tests[@]}"; do TAIL=12 run "$t" 600 "$B/bin/$t"; done
      TOPK_TEST_SUBSET=sanitizer TAIL=6 run memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*'
      TOPK_TEST_SUBSET=sanitizer TAIL=6 run racecheck 300 compute-sanitizer --tool racecheck --racecheck-report hazard \
        --error-exitcode 9 "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*' ;;
    nearest)  # ten untuned shapes: nearest dispatch from the grid against tuning each shape
      E=/tmp/exact.db
      rm -f $E $E-wal $E-shm
      # shellcheck disable=SC2046
      TAIL=6 run nearest-tune 400 "$T" tune --db $E --l2 hot --budget "${KILL_BUDGET:-3}" \
        $(python3 bench/nearest_vs_tuned.py --print-shapes)
      TAIL=16 run nearest 300 python3 bench/nearest_vs_tuned.py --grid-db "$GRID" --exact-db $E \
        --json "$LOGS/nearest.json" ;;
    adversarial)  # the target shapes' winners on all-equal, few-distinct and tied data
      # ADV_DB: an existing cache with the nine shapes (the targets stage's); else they are tuned here.
      A=${ADV_DB:-/tmp/adversarial.db}
      [[ -z "${ADV_DB:-}" ]] && tune_targets adversarial-tune $A "${KILL_BUDGET:-3}"
      TAIL=14 run adversarial 300 python3 bench/adversarial.py --db $A --json "$LOGS/adversarial.json" ;;
    cost)  # host cost of MakePlan and Plan::Run
      TAIL=20 run cost 300 "$B/bin/topk-runtime-cost" --dir /tmp ;;
    api)  # the Python API on the GPU: graph capture and replay, streams, threads
      TAIL=12 run api 300 python3 python/tests/gpu_test_api.py -v ;;
    *) log "unknown stage $stage" ;;
  esac
done
[[ -f "$DB" ]] && sql "$DB" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null && cp "$DB" "$OUT/dsa.db"
tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null
tail -c 9000 "$SUMMARY"
