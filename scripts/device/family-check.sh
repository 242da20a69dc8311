#!/usr/bin/env bash
# One device call for a change of the family layer (generator, jit, dispatch)
# that must not change what the kernels compute or how fast they run:
#   1. the issue-6 shapes, each with its tuned winner and the default, timed
#      by the probe built before the change ($B/bin/topk-probe-old) and by
#      this build's, alternating, twice each, in this one run;
#   2. the GPU tests (every variant exact, the test-only family, the tuner,
#      the C API) and memcheck / racecheck on the F32 and BF16 subsets
#      (NO_SANITIZERS=1: the tests alone);
#   3. the Python 1000-problem check against torch.topk;
#   4. a cache written by the CLI built before the change ($B/bin/*-old),
#      read by this build: show, verify (winners re-checked), and dispatch
#      through the Python package;
#   5. (filter) the eight shapes on normal, shifted (+100), plateau (70%
#      zeros) and 16-valued inputs: the radix winner against filter-family
#      variants, each verified exact first, in the same run;
#   6. (cluster) the filter family's cluster mode: the long-row shapes on the
#      four inputs, radix winners beside cluster variants (timed alone,
#      first), then every clustered binary exact in every dtype and the
#      sanitizers on its subset (NO_RACECHECK=1: memcheck only);
#   7. (resident) the resident family beside the default on the four inputs
#      (RESIDENT_SHAPES), then its kernels exact in every dtype and the
#      sanitizers on its subset (NO_TESTS=1: timings only); (resident-sweep)
#      every enumerated resident config beside the default on normal rows;
#   8. (det) every family's deterministic cases, and the mode's cost;
#   9. (resident-shared) resident kernels with shared-memory keys beside the
#      default on the four inputs (SHARED_SHAPES), then exact and sanitized;
#  10. (ab) AB_SHAPES' variants by the earlier build's probe and this one's
#      (or the probes and arguments of AB_RUNS);
#  11. (one-cta) the one-CTA filter kernel's variants (ONECTA_SHAPES; by
#      default each many-row target shape's with an open start and a guessed
#      one, _g1) beside the default on the four inputs, then every filter
#      kernel exact in every dtype (each with every launch-argument value) and
#      the sanitizers on its subset;
#  12. (defaults) the built-in defaults, nothing tuned: bench/adversarial.py
#      through the library with an empty cache (the target shapes on the
#      four inputs, torch.topk beside them), then topk-probe on DEFAULT_SHAPES
#      (SHAPE|ID...: the default beside the ids, e.g. the radix default it
#      replaced) on the four inputs, each verified exact first.
#  13. (tune-short) a short tune of many-short-row shapes (TUNE_SHORT) into
#      a fresh cache and its winners (which family won, against the default);
#      (radix-waves) the radix default's 2-CTA clusters at 31-33 rows beside
#      4-CTA ones (WAVE_SHAPES) on the four inputs.
#  14. (checks) every kernel whose id holds CHECK_TEXT exact and sanitized
#      (KERNEL_DTYPES, MEMCHECK_FILTER, RACE_VARIANT, RACE_FILTER narrow it).
# Logs under $OUT; the summary is printed.
#   scripts/device/family-check.sh [probe] [tests] [python] [legacy] [filter] [cluster] [cluster-phases] [resident] [resident-sweep] [resident-shared] [ab] [det] [one-cta] [defaults] [tune-short] [radix-waves] [checks]   (default: the first five)
set -uo pipefail
source "$(dirname "$0")/env.sh"
: >"$SUMMARY"
TAIL=${TAIL:-12}
stages=("$@")
[[ ${#stages[@]} -eq 0 ]] && stages=(probe tests python legacy filter)
FILTERS_F32=${FILTERS_F32:-"filter_f32_b512_u2_r11_s2 filter_f32_b512_u1_r8_s4 filter_f32_b256_u2_r11_s4 filter_f32_b1024_u1_r11_s2"}
FILTERS_BF16=${FILTERS_BF16:-"filter_bf16_b512_u1_r11_s2 filter_bf16_b512_u2_r8_s2 filter_bf16_b256_u2_r11_s4 filter_bf16_b1024_u1_r11_s2"}

# shape|winner id (docs/PERFORMANCE.md's issue-6 table; ids of the earlier
# release, which both probes parse)
PAIRS=(
  "f32:64x32768:2048:ranges|radix_f32_b1024_r11_s1024_c2_t1_m1_i0"
  "f32:1x131072:2048:ranges|radix_f32_b512_r11_s4096_c16_t1_m1_i0"
  "f32:1x524288:2048:ranges|radix_f32_b1024_r11_s4096_c16_t1_m1_i0"
  "f32:128x131072:2048:ranges|radix_f32_b1024_r11_s8192_c1_t1_m0_i0"
  "bf16:128x201088:64:values:rotate:dist=logits|radix_bf16_b1024_r11_s1024_c1_t1_m0_i0"
  "f32:256x128256:1024:values:rotate:dist=logits|radix_f32_b1024_r11_s4096_c1_t1_m0_i0"
  "f32:4096x256:8:rotate|radix_f32_b256_r1_s0_c0_t1_m0_i8"
  "bf16:16384x256:8:rotate|radix_bf16_b128_r1_s0_c0_t0_m0_i8"
)

# four_inputs SHAPE: in ARGS, --shape arguments for SHAPE on the four inputs
# the filter stages compare (normal, or logits for a logits shape; shifted;
# plateau; 16 distinct values).
four_inputs() {
  local base=${1%%:dist=*} d dd
  ARGS=()
  for d in normal shifted plateau distinct16; do
    dd=$d
    [[ $d == normal && $1 == *dist=logits* ]] && dd=logits
    ARGS+=(--shape "$base:dist=$dd")
  done
}

# probe_four LOG TITLE FIRST LINES: for each line SHAPE|ID ID... of LINES
# (further |-separated fields are ids too), topk-probe on SHAPE's four
# inputs with FIRST (unless empty) and the ids, into $OUT/LOG.log; then
# the times under TITLE in the summary.
probe_four() {
  local log=$1 title=$2 first=$3 lines=$4 shape ids f
  while IFS='|' read -r shape ids; do
    [[ -z ${shape// /} ]] && continue
    four_inputs "$shape"
    local vs=()
    [[ -n $first ]] && vs+=(--variant "$first")
    for f in ${ids//|/ }; do vs+=(--variant "$f"); done
    timeout 200 "$B/bin/topk-probe" "${ARGS[@]}" "${vs[@]}" --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/$log.log" 2>&1
    echo "rc=$?" >>"$OUT/$log.log"
  done <<<"$lines"
  log "--- $title (us)"
  grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|compile|rror" "$OUT/$log.log" | grep -vE "^device|^rc=0" | head -120 >>"$SUMMARY"
}

# kernel_checks NAME TEXT RACE_FILTER: every kernel whose id contains TEXT
# exact in every dtype, then memcheck on its sanitizer subset and, unless
# NO_RACECHECK is set, racecheck on the tests RACE_FILTER selects.
kernel_checks() {
  local name=$1 text=$2 race=$3 f
  # KERNEL_DTYPES: the dtypes checked exact (default all three);
  # MEMCHECK_FILTER: the memcheck's tests (default the F32 and BF16 subsets).
  for f in ${KERNEL_DTYPES:-F32 F16 BF16}; do
    TOPK_TEST_VARIANT=$text TAIL=5 run "$name-kernels-$f" 200 "$B/bin/gpu_kernels_test" --gtest_filter="*Every${f}*"
  done
  TOPK_TEST_VARIANT=$text TOPK_TEST_SUBSET=sanitizer TAIL=6 run "$name-memcheck" 240 compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$B/bin/gpu_kernels_test" --gtest_filter="${MEMCHECK_FILTER:-*F32*:*BF16*}"
  [[ -n ${NO_RACECHECK:-} ]] && return
  # RACE_VARIANT=TEXT, RACE_FILTER=GTEST: a narrower racecheck (it is slow).
  TOPK_TEST_VARIANT=${RACE_VARIANT:-$text} TOPK_TEST_SUBSET=sanitizer TAIL=6 run "$name-racecheck" 240 \
    compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 "$B/bin/gpu_kernels_test" \
    --gtest_filter="${RACE_FILTER:-$race}"
}

for stage in "${stages[@]}"; do
  case $stage in
    probe)
      for round in 1 2; do
        for pair in "${PAIRS[@]}"; do
          shape=${pair%%|*} id=${pair##*|}
          for probe in topk-probe-old topk-probe; do
            [[ -x "$B/bin/$probe" ]] || { log "missing $B/bin/$probe"; continue; }
            timeout 240 "$B/bin/$probe" --shape "$shape" --variant "$id" --variant default \
              --cubins "/tmp/topk-tests/cubins-$probe" >>"$OUT/probe-$probe.log" 2>&1
            echo "rc=$?" >>"$OUT/probe-$probe.log"
          done
        done
        log "== probe round $round done"
      done
      for probe in topk-probe-old topk-probe; do
        log "--- $probe (us per variant: round 1, round 2)"
        grep -E "^\S|  \S+ +[0-9.]+ us" "$OUT/probe-$probe.log" | grep -vE "^device|^rc=0" | head -80 >>"$SUMMARY"
      done ;;
    tests)
      for t in gpu_kernels_test gpu_tuner_test gpu_c_api_test; do TAIL=14 run "$t" 600 "$B/bin/$t"; done
      [[ -n ${NO_SANITIZERS:-} ]] && continue  # a change outside the kernels: the tests alone
      TOPK_TEST_SUBSET=sanitizer TAIL=6 run memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*:*TestOnlyFamily*'
      TOPK_TEST_SUBSET=sanitizer TAIL=6 run racecheck 300 compute-sanitizer --tool racecheck \
        --racecheck-report hazard --error-exitcode 9 "$B/bin/gpu_kernels_test" --gtest_filter='*F32*:*BF16*' ;;
    python)
      TOPK_TUNE_DB= TAIL=20 run python 600 python3 python/tests/gpu_test_topk.py --count 1000
      TOPK_TUNE_DB= TAIL=20 run python-api 300 python3 python/tests/gpu_test_api.py -v ;;
    legacy)
      L=/tmp/legacy.db
      rm -f $L $L-wal $L-shm
      if [[ -x "$B/bin/topk-tune-old" ]]; then
        TOPK_WORKER="$PWD/$B/bin/topk-tune-worker-old" TAIL=6 run legacy-tune 300 "$B/bin/topk-tune-old" tune \
          --db $L --budget 4 --shape f32:64x4096:128 --shape f32:4096x256:8 --shape bf16:8x65536:64:values
        log "ids written by the earlier release: $(python3 -c "import sqlite3; print(' '.join(r[0] for r in sqlite3.connect('$L').execute('SELECT variant_id FROM winners')))")"
        TAIL=12 run legacy-show 60 "$B/bin/topk-tune" show --db $L
        TAIL=14 run legacy-verify 300 "$B/bin/topk-tune" verify --db $L
        TAIL=8 run legacy-dispatch 120 python3 -c "
import sys; sys.path.insert(0, 'python')
import topk_tune
lib = topk_tune.Library(cache_path='$L', write_back=False)
for dt, b, n, k, values in (('f32', 64, 4096, 128, False), ('f32', 4096, 256, 8, False), ('bf16', 8, 65536, 64, True),
                            ('f32', 48, 4096, 100, False)):
    p = lib.plan(dt, batch=b, n=n, k=k, values=values)
    print(dt, b, n, k, p.dispatch, p.variant)
"
      else
        log "missing $B/bin/topk-tune-old: legacy stage skipped"
      fi ;;
    filter)  # ONLY=REGEX limits the shapes
      for pair in "${PAIRS[@]}"; do
        shape=${pair%%|*} id=${pair##*|}
        [[ -n "${ONLY:-}" && ! $shape =~ $ONLY ]] && continue
        ids=(--variant "$id")
        if [[ $shape == bf16* ]]; then fl=$FILTERS_BF16; else fl=$FILTERS_F32; fi
        for f in $fl; do ids+=(--variant "$f"); done
        four_inputs "$shape"
        timeout 300 "$B/bin/topk-probe" "${ARGS[@]}" "${ids[@]}" --cubins /tmp/topk-tests/cubins-topk-probe \
          >>"$OUT/filter.log" 2>&1
        echo "rc=$?" >>"$OUT/filter.log"
      done
      log "--- filter family against the radix winners (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|compile" "$OUT/filter.log" | grep -vE "^device|^rc=0" | head -150 >>"$SUMMARY" ;;
    cluster)
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      CLUSTER_SHAPES=${CLUSTER_SHAPES:-"f32:1x131072:2048:ranges|radix_f32_b512_r11_h0_s4096_c16_t1_m1|filter_f32_b512_u1_r11_s1_c16 filter_f32_b512_u1_r11_s1_c16_p2048 filter_f32_b512_u1_r11_s2_c16_p1024
f32:1x524288:2048:ranges|radix_f32_b1024_r11_h0_s4096_c16_t1_m1|filter_f32_b512_u1_r11_s1_c16 filter_f32_b512_u2_r11_s1_c16_p2048_m25 filter_f32_b1024_u2_r11_s1_c16_p2048
f32:64x32768:2048:ranges|radix_f32_b1024_r11_h0_s1024_c2_t1_m1|filter_f32_b1024_u1_r11_s2_c2_p2048 filter_f32_b512_u1_r11_s2_c2
bf16:8x201088:64:values:dist=logits|default|filter_bf16_b1024_u1_r11_s1_c8_p2048"}
      probe_four cluster "cluster mode against the radix winners" "" "$CLUSTER_SHAPES"
      kernel_checks cluster _s1_c2 '*F32*' ;;
    resident)
      # The resident family: timed beside the default (radix) on the four
      # inputs, each variant verified exact first; then every resident
      # kernel exact in every dtype, and the sanitizers on its subset.
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      RESIDENT_SHAPES=${RESIDENT_SHAPES:-"f32:64x4096:128|resident_f32_b512_g512_i8 resident_f32_b1024_g1024_i4
f32:64x4096:512|resident_f32_b1024_g1024_i4
f32:1x8192:2048|resident_f32_b1024_g1024_i8
f32:64x16384:2048|resident_f32_b1024_g1024_i16
bf16:4096x1024:32|resident_bf16_b512_g128_i8 resident_bf16_b256_g256_i4 resident_bf16_b1024_g256_i4"}
      probe_four resident "resident family against the default" default "$RESIDENT_SHAPES"
      [[ -n ${NO_TESTS:-} ]] && continue
      TOPK_TEST_VARIANT=resident_ TAIL=5 run resident-deterministic 200 "$B/bin/gpu_kernels_test" --gtest_filter='*Deterministic*'
      kernel_checks resident resident_ '*F32*:*BF16*' ;;
    one-cta)
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      ONECTA_SHAPES=${ONECTA_SHAPES:-"f32:128x131072:2048:ranges|filter_f32_b1024_u2_r8_s2 filter_f32_b1024_u2_r8_s2_g1 filter_f32_b1024_u2_r11_s2_g1 filter_f32_b512_u2_r8_s2_g1 filter_f32_b512_u2_r11_s2_g1
bf16:128x201088:64:values:rotate:dist=logits|filter_bf16_b1024_u1_r8_s2 filter_bf16_b1024_u1_r8_s2_g1 filter_bf16_b1024_u1_r11_s2_g1 filter_bf16_b512_u1_r8_s4_g1
f32:256x128256:1024:values:rotate:dist=logits|filter_f32_b1024_u2_r8_s2 filter_f32_b1024_u2_r8_s2_g1 filter_f32_b1024_u2_r11_s2_g1 filter_f32_b512_u2_r8_s2_g1"}
      probe_four one-cta "one-CTA filter variants against the default" default "$ONECTA_SHAPES"
      [[ -n ${NO_TESTS:-} ]] || kernel_checks one-cta filter_ '*F32*' ;;
    checks)
      # CHECK_TEXT's kernels (default filter_) exact, then the sanitizers
      # (kernel_checks' variables narrow them).
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      kernel_checks checks "${CHECK_TEXT:-filter_}" '*F32*:*BF16*' ;;
    resident-shared)
      # Resident kernels with keys in shared memory past the registers: timed
      # beside the default and the register-only resident winners on the four
      # inputs (each verified exact first), then every such kernel exact in
      # every dtype and the sanitizers on its subset.
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      SHARED_SHAPES=${SHARED_SHAPES:-"f32:1x524288:2048:ranges|resident_f32_b1024_g1024_i16_s16_c16 resident_f32_b1024_g1024_i16_s48_c8
f32:1x131072:2048:ranges|resident_f32_b1024_g1024_i16_c8 resident_f32_b1024_g1024_i16_s16_c4 resident_f32_b1024_g1024_i16_s48_c2
f32:64x32768:2048:ranges|resident_f32_b1024_g1024_i16_c2 resident_f32_b1024_g1024_i16_s16
f32:128x131072:2048:ranges|filter_f32_b512_u2_r11_s2 resident_f32_b1024_g1024_i16_s48_c2
bf16:128x201088:64:values:rotate:dist=logits|filter_bf16_b512_u1_r11_s2 resident_bf16_b1024_g1024_i16_s48_c4
f32:256x128256:1024:values:rotate:dist=logits|filter_f32_b512_u2_r11_s2 resident_f32_b1024_g1024_i16_s48_c2"}
      probe_four resident-shared "resident keys in shared memory against the default" default "$SHARED_SHAPES"
      [[ -n ${NO_TESTS:-} ]] && continue
      kernel_checks resident-shared i16_s '*F32*:*BF16*' ;;
    ab)
      # A kernel change timed against the build before it, in one run: for
      # each line SHAPE|ID... of AB_SHAPES, the ids on the four inputs by each
      # line PROBE|ARGS of AB_RUNS (default: $B/bin/topk-probe-old, the
      # earlier build, then this build's topk-probe; ARGS e.g. --define X),
      # alternating, AB_ROUNDS times (2); each verified exact first, each run
      # its cubins.
      AB_SHAPES=${AB_SHAPES:-"f32:1x524288:2048:ranges|resident_f32_b1024_g1024_i16_s16_c16 default
f32:1x131072:2048:ranges|resident_f32_b1024_g1024_i16_c8 resident_f32_b512_g512_i16_c16
f32:64x32768:2048:ranges|resident_f32_b1024_g1024_i16_c2
f32:1x16384:1024|resident_f32_b512_g512_i8_c4"}
      AB_RUNS=${AB_RUNS:-"topk-probe-old|
topk-probe|"}
      for round in $(seq "${AB_ROUNDS:-2}"); do
        while IFS='|' read -r shape ids; do
          [[ -z ${shape// /} ]] && continue
          four_inputs "$shape"
          vs=()
          for f in $ids; do vs+=(--variant "$f"); done
          n=0
          while IFS='|' read -r probe extra; do
            [[ -z ${probe// /} ]] && continue
            n=$((n + 1))
            [[ -x "$B/bin/$probe" ]] || { log "missing $B/bin/$probe"; continue; }
            mkdir -p "$TOPK_TEST_TMP/cubins-ab$n"
            # shellcheck disable=SC2086  # ARGS: words
            timeout 150 "$B/bin/$probe" "${ARGS[@]}" "${vs[@]}" $extra --cubins "$TOPK_TEST_TMP/cubins-ab$n" \
              >>"$OUT/ab-$n.log" 2>&1
            echo "rc=$?" >>"$OUT/ab-$n.log"
          done <<<"$AB_RUNS"
        done <<<"$AB_SHAPES"
      done
      n=0
      while IFS='|' read -r probe extra; do
        [[ -z ${probe// /} ]] && continue
        n=$((n + 1))
        log "--- run $n: $probe $extra (us; the shapes in order, then again)"
        grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|compile|rror" "$OUT/ab-$n.log" | grep -vE "^device|^rc=0" | head -100 >>"$SUMMARY"
      done <<<"$AB_RUNS" ;;
    det)
      # Deterministic mode: every family's deterministic cases (same index set
      # over 20 calls, lowest indices win), then its cost on DET_SHAPES: each
      # id timed plain and deterministic, on normal rows and on 16 distinct
      # values (many ties at the k-th), each verified exact first.
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      TAIL=6 run det-all 300 "$B/bin/gpu_kernels_test" --gtest_filter='*Deterministic*'
      DET_SHAPES=${DET_SHAPES:-"f32:64x4096:128|default
f32:64x32768:2048:ranges|resident_f32_b1024_g1024_i16_c2 default
f32:1x131072:2048:ranges|resident_f32_b1024_g1024_i16_c8 default"}
      while IFS='|' read -r shape ids; do
        [[ -z ${shape// /} ]] && continue
        vs=()
        for f in $ids; do vs+=(--variant "$f"); done
        for d in normal distinct16; do
          timeout 150 "$B/bin/topk-probe" --shape "$shape:dist=$d" --shape "$shape:deterministic:dist=$d" "${vs[@]}" \
            --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/det-cost.log" 2>&1
          echo "rc=$?" >>"$OUT/det-cost.log"
        done
      done <<<"$DET_SHAPES"
      log "--- deterministic mode's cost (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|compile|rror" "$OUT/det-cost.log" | grep -vE "^device|^rc=0" | head -80 >>"$SUMMARY" ;;
    resident-sweep)
      # Every enumerated resident config beside the default on normal rows of
      # SWEEP_SHAPES (the evidence for the family's default rules).
      SWEEP_SHAPES=${SWEEP_SHAPES:-"f32:1x1024:32 f32:64x1024:32 f32:4096x1024:32 f32:64x2048:64 f32:4096x2048:64 f32:1x4096:128 f32:64x4096:128 f32:1024x4096:128 f32:64x8192:256 f32:1x16384:1024 bf16:1024x2048:16"}
      for shape in $SWEEP_SHAPES; do
        vs=(--variant default)
        for v in $("$B/bin/topk-tune" space --shape "$shape" --family resident -q | grep -o 'resident_[a-z0-9_]*'); do
          vs+=(--variant "$v")
        done
        timeout 120 "$B/bin/topk-probe" --shape "$shape" "${vs[@]}" --cubins "$TOPK_TEST_TMP/cubins" >>"$OUT/resident-sweep.log" 2>&1
        echo "rc=$?" >>"$OUT/resident-sweep.log"
      done
      log "--- resident configs against the default, normal rows (us)"
      grep -E "^\S|  \S+ +[0-9.]+ us|WRONG|compile|rror" "$OUT/resident-sweep.log" | grep -vE "^device|^rc=0" | head -150 >>"$SUMMARY" ;;
    cluster-phases)  # phase times of filter variants (TOPK_STOP_AT, unverified; PHASE_STOPS="0 1 2 4 3" for one CTA per row)
      PHASE_RUNS=${PHASE_RUNS:-"f32:1x131072:2048:ranges|filter_f32_b512_u1_r11_s1_c16
f32:1x524288:2048:ranges|filter_f32_b1024_u2_r11_s1_c16"}
      while IFS='|' read -r shape id; do
        [[ -z $shape ]] && continue
        for n in ${PHASE_STOPS:-1 2 3 4 5} full; do
          def=()
          [[ $n != full ]] && def=(--no-verify --define "TOPK_STOP_AT=$n")
          r=$(timeout 120 "$B/bin/topk-probe" --shape "$shape" --variant "$id" "${def[@]}" --cubins "$TOPK_TEST_TMP/cubins" 2>&1 |
            grep -E "  \S+ +[0-9.]+ us" | head -n1)
          log "phase $shape $n: $r"
        done
      done <<<"$PHASE_RUNS" ;;
    defaults)
      TOPK_TUNE_DB= TAIL=16 run defaults-adversarial 600 python3 bench/adversarial.py --torch \
        --dists shifted,plateau,distinct16 --reps 20
      DEFAULT_SHAPES=${DEFAULT_SHAPES:-"f32:64x32768:2048:ranges|radix_f32_b512_r11_h0_s4096_c2_t2_m1
f32:128x131072:2048:ranges|radix_f32_b512_r11_h0_s4096_c1_t2_m1
bf16:128x201088:64:values:rotate:dist=logits|radix_bf16_b512_r11_h0_s4096_c1_t1_m1
f32:256x128256:1024:values:rotate:dist=logits|radix_f32_b512_r11_h0_s4096_c1_t2_m1
f32:1024x16384:1024|radix_f32_b512_r11_h0_s4096_c1_t2_m1
f32:1x131072:2048:ranges|radix_f32_b512_r11_h0_s4096_c16_t2_m1
f32:8x65536:2048|radix_f32_b512_r11_h0_s4096_c8_t2_m1
bf16:4x32768:64|radix_bf16_b512_r11_h0_s4096_c4_t1_m1
f32:1x524288:2048:ranges|radix_f32_b512_r11_h0_s4096_c16_t2_m1
f32:4x262144:512|radix_f32_b512_r11_h0_s4096_c16_t2_m1
bf16:1x262144:64|radix_bf16_b512_r11_h0_s4096_c16_t1_m1
f32:15x65536:8|radix_f32_b512_r11_h0_s4096_c4_t2_m1
f32:7x524288:2048|radix_f32_b512_r11_h0_s4096_c8_t2_m1"}
      probe_four defaults-probe "the default beside the ids, normal (logits) / shifted / plateau / 16 values" default \
        "$DEFAULT_SHAPES" ;;
    tune-short)
      # The tuner across families on many short rows (TUNE_SHORT: shapes): a
      # short tune into a fresh cache, then the winners, their family and
      # their time against the default (`show`).
      D=/tmp/tune-short.db
      rm -f $D $D-wal $D-shm
      args=()
      for s in ${TUNE_SHORT:-f32:1056x4096:128 f32:4096x1024:32 bf16:2048x8192:64:values f32:528x2048:32}; do
        args+=(--shape "$s")
      done
      TAIL=12 run tune-short 400 "$B/bin/topk-tune" tune --db $D --l2 hot --budget "${BUDGET:-6}" "${args[@]}"
      TAIL=14 run tune-short-show 60 "$B/bin/topk-tune" show --db $D ;;
    radix-waves)
      # The radix default's cluster size at 31-33 rows (k > n / 8), chosen by
      # the device's count of clusters that run at once: 2 CTAs, against the
      # 4 the earlier count chose, on the four inputs.
      cp -n "$B"/cubins/* "$TOPK_TEST_TMP/cubins/" 2>/dev/null
      probe_four radix-waves "radix default (2-CTA clusters) against 4-CTA ones" default "${WAVE_SHAPES:-f32:31x262144:65536|radix_f32_b512_r11_h0_s4096_c4_t2_m1
f32:32x65536:16384|radix_f32_b512_r11_h0_s4096_c4_t2_m1
f32:33x131072:32768|radix_f32_b512_r11_h0_s4096_c4_t2_m1}" ;;
    *) log "unknown stage $stage" ;;
  esac
done
tail -c 11000 "$SUMMARY"
