#!/usr/bin/env bash
# Builds the stripped Release tree that travels to a GPU machine which has the
# CUDA driver and toolkit but none of the build dependencies:
#   build-device/bin     executables (tests, worker, CLI, benchmarks)
#   build-device/lib     libtopk.so plus libsqlite3 / libbenchmark copies
#   build-device/cubins  precompiled sm_90 kernels (from the compile-all test)
# Everything finds its libraries through an $ORIGIN rpath.
#
# TOPK_BUNDLE_FROM=DIR: copy the executables and libtopk of an existing
# Release build tree (one whose tests just passed) instead of building again.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-device
if [[ -n "${TOPK_BUNDLE_FROM:-}" ]]; then
  from=$TOPK_BUNDLE_FROM
  grep -q "CMAKE_BUILD_TYPE:STRING=Release" "$from/CMakeCache.txt" || { echo "$from is not a Release build" >&2; exit 1; }
  rm -rf "$B/bin" "$B/lib"
  mkdir -p "$B/bin" "$B/lib"
  for t in gpu_kernels_test gpu_tuner_test gpu_c_api_test topk-tune topk-tune-worker topk-probe topk-bench \
           topk-runtime-cost topk-first-call topk-stream-ceiling; do
    [[ -x "$from/bin/$t" ]] && cp "$from/bin/$t" "$B/bin/"
  done
  cp -P "$from"/lib/libtopk.so* "$B/lib/"
else
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DTOPK_BUILD_BENCH=ON >/dev/null
  targets=(gpu_kernels_test topk-tune-worker topk-probe topk)
  help=$(cmake --build "$B" --target help)  # not piped into grep -q: pipefail + SIGPIPE
  for t in topk-tune topk-bench topk-runtime-cost topk-first-call topk-stream-ceiling gpu_tuner_test \
           gpu_runtime_test gpu_c_api_test; do
    if grep -qx "\.\.\. $t" <<<"$help"; then targets+=("$t"); fi
  done
  cmake --build "$B" -j"$(nproc)" --target "${targets[@]}"
fi
strip --strip-unneeded "$B"/bin/* "$B"/lib/libtopk.so.* 2>/dev/null || true
for so in libsqlite3.so.0 libbenchmark.so.1debian; do
  src=$(ldconfig -p | awk -v n="$so" '$1 == n && !f {print $NF; f = 1}')  # no early exit: SIGPIPE under pipefail
  [[ -n "$src" ]] && cp -L "$src" "$B/lib/$so"
done
mkdir -p "$B/cubins"
# Precompiled kernels save the GPU machine's NVRTC time, but the device
# carries at most 64 MiB: only when they fit beside the executables.
# Every sm_90 kernel is there after TOPK_COMPILE_ALL=full ctest -R compile_all
# (by default the test compiles a cover of them, docs/TESTING.md); the GPU
# machine compiles what is missing. The GPU machines are sm_90: the sm_80
# half of compile_all_test's kernels stays here. TOPK_BUNDLE_ARCH picks
# another.
arch=${TOPK_BUNDLE_ARCH:-sm_90}
cubins=(build/tests/tmp/cubins/*_"${arch}"_*)
if [[ -e ${cubins[0]} ]] && (($(du -cm "${cubins[@]}" | tail -n1 | cut -f1) < 24)); then
  cp -n "${cubins[@]}" "$B/cubins/"
fi
du -sh "$B/bin" "$B/lib" "$B/cubins"
