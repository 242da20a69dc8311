"""Builds the topk_tune wheel with libtopk inside (topk_tune/_lib/), the
first place the package looks after $TOPK_LIBRARY.

The library comes from $TOPK_WHEEL_LIBRARY (a file, or a directory holding
libtopk.so.0 / libtopk.so), else from the documented build tree beside this
directory (../build/lib, the newest of ../build*/lib). The wheel is tagged
for this platform (py3-none-<platform>): it carries a shared library but no
extension module, so any Python 3 may load it. The metadata lives here
so that the version is read from topk_tune/__init__.py without importing
the package (which would import torch).
"""
import glob
import os
import re
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # wheel is needed for bdist_wheel only
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ("libtopk.so.0", "libtopk.so")


def find_library():
    explicit = os.environ.get("TOPK_WHEEL_LIBRARY")
    dirs = []
    if explicit:
        if os.path.isfile(explicit):
            return explicit
        dirs = [explicit]
    else:
        dirs = sorted(glob.glob(os.path.join(HERE, "..", "build*", "lib")),
                      key=lambda d: max((os.path.getmtime(os.path.join(d, n)) for n in NAMES
                                         if os.path.exists(os.path.join(d, n))), default=0), reverse=True)
    for d in dirs:
        for n in NAMES:
            p = os.path.join(d, n)
            if os.path.isfile(p):
                return p
    raise SystemExit("setup.py: libtopk.so not found: build the project (cmake --build build --target topk) or "
                     "set TOPK_WHEEL_LIBRARY to the library file")


class BuildPyWithLibrary(build_py):
    """Copies libtopk (the real file behind the symlinks) into
    topk_tune/_lib/libtopk.so.0 of the build."""

    def run(self):
        super().run()
        src = os.path.realpath(find_library())
        dst_dir = os.path.join(self.build_lib, "topk_tune", "_lib")
        os.makedirs(dst_dir, exist_ok=True)
        shutil.copyfile(src, os.path.join(dst_dir, "libtopk.so.0"))
        # Where it came from, for `topk_tune.library_path()` users who wonder.
        with open(os.path.join(dst_dir, "SOURCE"), "w") as f:
            f.write(os.path.basename(src) + "\n")


cmdclass = {"build_py": BuildPyWithLibrary}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """A platform wheel (it carries a shared library) that any Python 3
        can use (no extension module)."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel



class BinaryDistribution(Distribution):
    """Installs into platlib (the wheel's root is not pure) although there
    is no extension module: the package carries libtopk."""

    def has_ext_modules(self):
        return True


with open(os.path.join(HERE, "topk_tune", "__init__.py")) as f:
    version = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)

setup(
    name="topk-tune",
    version=version,
    description="Exact, autotuned top-k on NVIDIA GPUs (torch operators and a ctypes API over libtopk)",
    packages=["topk_tune"],
    python_requires=">=3.8",
    cmdclass=cmdclass,
    distclass=BinaryDistribution,
    zip_safe=False,
)
