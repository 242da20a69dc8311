#!/usr/bin/env bash
# Installs a build into a temporary prefix and uses it the way a consumer
# would: find_package(topk) from examples/CMakeLists.txt, and pkg-config.
# Runs both example consumers; on a machine without a GPU they must print
# "skipped: no GPU" and exit 0, with a GPU they must pass their checks.
#
#   install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR [CC] [CXX] [CUDA_BIN_DIR]
#
# Registered with ctest (label cpu) by cmake/Install.cmake.
set -euo pipefail

build=$(realpath "$1")
src=$(realpath "$2")
work=$3
cc=${4:-cc}
cxx=${5:-c++}
cuda_bin=${6:-}

rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")
prefix=$work/prefix
log=$work/log
step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$log" 2>&1 || { cat "$log"; fail "cmake --install"; }

# --- the installed tree ---------------------------------------------------------
libdir=
for d in "$prefix/lib" "$prefix/lib64" "$prefix"/lib/*-linux-gnu; do
  if [[ -e "$d/libtopk.so" ]]; then libdir=$d; break; fi
done
[[ -n "$libdir" ]] || fail "no libtopk.so under $prefix"
for f in "$libdir/libtopk.so.0" "$libdir/cmake/topk/topkConfig.cmake" "$libdir/cmake/topk/topkConfigVersion.cmake" \
         "$libdir/cmake/topk/topkTargets.cmake" "$libdir/pkgconfig/topk.pc" \
         "$prefix/include/topk/topk.hpp" "$prefix/include/topk/topk.h" "$prefix/include/topk/status.hpp"; do
  [[ -e "$f" ]] || fail "missing $f"
done
# Exactly the three public headers.
headers=$(cd "$prefix/include" && find . -type f | sort | tr '\n' ' ')
[[ "$headers" == "./topk/status.hpp ./topk/topk.h ./topk/topk.hpp " ]] || fail "unexpected headers: $headers"
# The exported target references no internal target.
if grep -E 'topk_(jit|cache|generator|tuner|runtime_static|warnings|nvrtc)' "$libdir"/cmake/topk/*.cmake; then
  fail "the CMake package references internal targets"
fi
# No absolute path into the build or source tree leaks into the package files.
if grep -lE "$build|$src" "$libdir"/cmake/topk/*.cmake "$libdir/pkgconfig/topk.pc"; then
  fail "the package files name the build or source tree"
fi
if [[ -d "$prefix/share/topk-tune/python/topk_tune" ]]; then
  [[ -e "$prefix/share/topk-tune/python/topk_tune/_install.py" ]] || fail "python package lacks _install.py"
fi

# --- find_package(topk) from examples/ ----------------------------------------------
step "configure and build examples/ against the install"
cmake_args=(-S "$src/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix"
            -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release)
[[ -n "$cuda_bin" ]] && cmake_args+=(-DCUDAToolkit_ROOT="$(dirname "$cuda_bin")")
cmake "${cmake_args[@]}" >"$log" 2>&1 || { cat "$log"; fail "configure examples"; }
cmake --build "$work/examples" -j2 >"$log" 2>&1 || { cat "$log"; fail "build examples"; }

run_consumer() {
  local name=$1 out
  shift
  set +e
  out=$("$@" 2>&1)
  local rc=$?
  set -e
  echo "$out" | sed "s/^/  $name: /"
  [[ $rc -eq 0 ]] || fail "$name exited $rc"
  if grep -q "^skipped: " <<<"$out"; then
    # The skip must come with the library's own explanation.
    grep -qE "^topk(::Library::Open|_library_open): " <<<"$out" || fail "$name skipped without saying why"
  else
    grep -qE "^variant: " <<<"$out" || fail "$name printed no dispatch info"
  fi
}
step "run the consumers"
run_consumer consumer "$work/examples/consumer"
run_consumer consumer_c "$work/examples/consumer_c"
# A cache path that does not exist yet is fine (created on first write-back).
run_consumer consumer_db "$work/examples/consumer" "$work/new-cache/tuning.db"

# --- pkg-config -------------------------------------------------------------------------
if command -v pkg-config >/dev/null; then
  step "build the consumers with pkg-config"
  export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  [[ "$(pkg-config --modversion topk)" == "$(grep -m1 '^Version:' "$libdir/pkgconfig/topk.pc" | cut -d' ' -f2)" ]] ||
    fail "pkg-config --modversion"
  pc_libdir=$(pkg-config --variable=libdir topk)
  [[ "$(realpath "$pc_libdir")" == "$(realpath "$libdir")" ]] || fail "pkg-config libdir $pc_libdir is not $libdir"
  cuda_inc=()
  cuda_lib=()
  if [[ -n "$cuda_bin" ]]; then
    cuda_root=$(dirname "$cuda_bin")
    cuda_inc=(-I"$cuda_root/include")
    for d in "$cuda_root/lib64" "$cuda_root/lib"; do [[ -d "$d" ]] && cuda_lib+=(-L"$d" -Wl,-rpath,"$d"); done
  fi
  # shellcheck disable=SC2046
  "$cxx" -std=c++17 -O1 -o "$work/consumer_pc" "$src/examples/consumer.cpp" "${cuda_inc[@]}" \
    $(pkg-config --cflags --libs topk) -Wl,-rpath,"$pc_libdir" "${cuda_lib[@]}" -lcudart >"$log" 2>&1 ||
    { cat "$log"; fail "g++ consumer.cpp \$(pkg-config --cflags --libs topk)"; }
  # shellcheck disable=SC2046
  "$cc" -O1 -o "$work/consumer_c_pc" "$src/examples/consumer_c.c" "${cuda_inc[@]}" \
    $(pkg-config --cflags --libs topk) -Wl,-rpath,"$pc_libdir" "${cuda_lib[@]}" -lcudart >"$log" 2>&1 ||
    { cat "$log"; fail "cc consumer_c.c \$(pkg-config --cflags --libs topk)"; }
  run_consumer consumer_pc "$work/consumer_pc"
  run_consumer consumer_c_pc "$work/consumer_c_pc"
else
  echo "pkg-config not found: skipping the pkg-config build"
fi

# --- the installed Python package finds the installed library ---------------------------
pydir="$prefix/share/topk-tune/python"
if [[ -d "$pydir/topk_tune" ]] && command -v python3 >/dev/null; then
  step "import the installed Python package"
  (cd "$work" && env -u TOPK_LIBRARY PYTHONPATH="$pydir" PYTHONDONTWRITEBYTECODE=1 python3 -c "
import os, topk_tune
p = os.path.realpath(topk_tune.library_path())
assert p.startswith(os.path.realpath('$libdir')), p
print('  python: topk_tune', topk_tune.__version__, 'uses', p)
") || fail "the installed Python package"
fi

rm -rf "$work"
echo "install test passed"
