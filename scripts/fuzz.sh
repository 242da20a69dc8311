#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (ASan + UBSan) in their own
# build directory, replays the inputs of fuzz/regressions/<target>/ (crashes
# found earlier, fixed since), then fuzzes each target for FUZZ_SECONDS
# (default 30), starting from the committed seeds in fuzz/corpus/<target>/.
# Prints per target the executions and the coverage libFuzzer reports; fails
# on any crash, leak, timeout or sanitizer report, leaving the input that
# caused it under $BUILD/artifacts/<target>/.
#
#   scripts/fuzz.sh                          every target, 30 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh fuzz_cache_open   one target, longer
#
# Environment: FUZZ_SECONDS, TOPK_FUZZ_BUILD_DIR (default build-fuzz),
# TOPK_JOBS (build parallelism, default nproc), FUZZ_ARGS (more libFuzzer
# flags). New inputs that reach new code go to $BUILD/corpus/<target>/
# (not committed; copy the interesting ones to fuzz/corpus/ by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
JOBS=${TOPK_JOBS:-$(nproc)}
ALL=(fuzz_shape fuzz_shape_file fuzz_jsonl_import fuzz_cache_open fuzz_variant_id)
if (($#)); then targets=("$@"); else targets=("${ALL[@]}"); fi

# The tree scripts/sanitize.sh builds the CPU tests in (it sets BUILD).
source scripts/instrumented-tree.sh
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"

# Leaks are findings; LSan runs at exit of every libFuzzer run and after
# each input (-detect_leaks=1 is libFuzzer's default).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/fuzz/lsan.supp:print_suppressions=0}

failed=()
summary=()
for t in "${targets[@]}"; do
  bin="$BUILD/bin/$t"
  log="$BUILD/logs/$t.log"
  mkdir -p "$BUILD/logs" "$BUILD/corpus/$t" "$BUILD/artifacts/$t"
  # 1. Regressions: every input that once crashed must now pass.
  reg="fuzz/regressions/$t"
  if [[ -d $reg ]] && compgen -G "$reg/*" >/dev/null; then
    if ! "$bin" "$reg"/* >"$BUILD/logs/$t.regressions.log" 2>&1; then
      echo "fuzz: $t: a regression input fails again:" >&2
      tail -n 40 "$BUILD/logs/$t.regressions.log" >&2
      failed+=("$t (regression)")
      continue
    fi
    echo "fuzz: $t: $(ls "$reg" | wc -l) regression input(s) pass"
  fi
  # 2. Fuzz for a bounded time. The first corpus directory receives the new
  # inputs; the committed seeds are only read.
  set +e
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=2048 -max_len=131072 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$t/" ${FUZZ_ARGS:-} \
    "$BUILD/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' "$log" | tail -n1)
  line="$t: ${execs:-?} executions in ${SECONDS_PER_TARGET}s, ${cov:-no coverage line}"
  if ((rc != 0)) || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:' "$log"; then
    echo "fuzz: $t FAILED (exit $rc); the input is under $BUILD/artifacts/$t/:" >&2
    grep -E 'ERROR:|runtime error:|SUMMARY:|Test unit written|^    #[0-9]' "$log" | head -n 40 >&2
    echo "  fix the bug, then copy the input to fuzz/regressions/$t/ so that this script replays it" >&2
    failed+=("$t")
    line="$line  FAILED"
  fi
  echo "fuzz: $line"
  summary+=("$line")
done

echo "fuzz: summary"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ok"
