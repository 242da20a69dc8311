#!/usr/bin/env bash
# Builds the topk_tune wheel (python/setup.py) with the libtopk of a CMake
# build inside, installs it into a fresh virtual environment and imports it
# from outside the source tree, checking that the shipped libtopk is the one
# loaded. Needs only Debian's python3-setuptools, python3-wheel, python3-venv
# (and python3-pip or python3-build); no network.
#
#   scripts/wheel.sh [BUILD_DIR [WORK_DIR]]
#
# BUILD_DIR: the CMake build tree holding lib/libtopk.so (default: build).
# TOPK_WHEEL_LIBRARY: the library file to ship instead of BUILD_DIR/lib's.
# The wheel is left in WORK_DIR/dist (default: BUILD_DIR/wheel). PYTHON picks
# the interpreter; by default the first of python3 and /usr/bin/python3 that
# has setuptools, wheel, venv and pip; with none, the script says
# so and exits 77 (ctest reports the test skipped). Registered with ctest as
# wheel_test (label cpu).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$src/build}")
work=${2:-$build/wheel}
fail() { echo "FAILED: $*" >&2; exit 1; }
usable() { "$1" -c "import setuptools, wheel, venv, pip" 2>/dev/null; }
py=${PYTHON:-}
if [[ -z $py ]]; then
  # A pyenv or other private python3 may lack what Debian's has.
  for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && usable "$c"; then py=$c; break; fi
  done
  [[ -n $py ]] || { echo "skipped: no python3 with setuptools, wheel, venv and pip" \
                         "(Debian: apt-get install python3-setuptools python3-wheel python3-venv python3-pip)"; exit 77; }
fi

lib=${TOPK_WHEEL_LIBRARY:-$build/lib/libtopk.so}
[[ -e $lib ]] || fail "no $lib: build it first (cmake --build $build --target topk)"
rm -rf "$work"
mkdir -p "$work/src" "$work/dist"
work=$(realpath "$work")
# Build from a copy: setuptools writes build/ and *.egg-info beside setup.py,
# which must not land in the source tree.
cp -r "$src/python/setup.py" "$src/python/pyproject.toml" "$src/python/topk_tune" "$work/src/"
rm -rf "$work/src/topk_tune/_lib" "$work/src/topk_tune/__pycache__"

echo "== building the wheel ($lib)"
export TOPK_WHEEL_LIBRARY=$lib
if "$py" -c "import build" 2>/dev/null; then
  (cd "$work/src" && "$py" -m build --no-isolation --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1) ||
    { cat "$work/build.log"; fail "python3 -m build"; }
else
  "$py" -m pip wheel --no-build-isolation --no-deps --wheel-dir "$work/dist" "$work/src" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log"; fail "pip wheel"; }
fi
whl=$(ls "$work"/dist/topk_tune-*.whl)
echo "   $(basename "$whl")"
"$py" - "$whl" <<'PY' || fail "wheel contents"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for want in ("topk_tune/__init__.py", "topk_tune/_ops.py", "topk_tune/_lib/libtopk.so.0"):
    assert want in names, f"{want} missing from the wheel: {names}"
assert "-py3-none-" in sys.argv[1] and "linux" in sys.argv[1], sys.argv[1]
PY

echo "== installing into a fresh venv"
# --system-site-packages: torch (a Debian package, or the machine's) stays
# visible, nothing is downloaded, and the base's pip installs into the venv
# (--without-pip: no ensurepip needed). The wheel comes with --no-deps.
"$py" -m venv --system-site-packages --without-pip "$work/venv"
"$work/venv/bin/python" -m pip install --no-index --no-deps --quiet "$whl" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "pip install"; }

echo "== importing from outside the source tree"
cd "$work"
# Nothing may point back at the source or the build tree.
env -u TOPK_LIBRARY -u PYTHONPATH TOPK_TUNE_DB= "$work/venv/bin/python" - "$work/venv" <<'PY' || fail "import"
import os, sys
import topk_tune
venv = os.path.realpath(sys.argv[1])
pkg = os.path.realpath(os.path.dirname(topk_tune.__file__))
assert pkg.startswith(venv + os.sep), f"topk_tune imported from {pkg}, not the venv"
shipped = os.path.join(pkg, "_lib", "libtopk.so.0")
assert os.path.realpath(topk_tune.library_path()) == shipped, topk_tune.library_path()
# Load it (no GPU needed): a C API call that touches no device.
print("   library:", topk_tune.library_path())
print("   code_name(1):", topk_tune.code_name(1))
from topk_tune import _capi
assert os.path.realpath(_capi._state.path) == shipped, _capi._state.path
try:
    import torch
except ImportError:
    print("   torch: not installed (operators not registered)")
else:
    assert hasattr(torch.ops.topk_tune, "topk"), "torch.ops.topk_tune.topk not registered"
    v, i = torch.ops.topk_tune.topk(torch.empty(4, 100, device="meta"), 8)
    assert tuple(i.shape) == (4, 8) and i.dtype == torch.int64
    print("   torch", torch.__version__, ": torch.ops.topk_tune registered")
print("ok")
PY
echo "wheel ok: $whl"
