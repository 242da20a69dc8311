"""Finding and loading libtopk, the error type, and the C API calls that
need no GPU. Run with TOPK_LIBRARY pointing at a built libtopk.so (ctest
sets it) or from a source tree with a build*/lib beside python/."""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import have_torch, topk_tune
from topk_tune import _capi
from topk_tune._library import resolve_cache_path

Code = topk_tune.Code
TopkError = topk_tune.TopkError
PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (the library loads once per
    process) with the given environment changes; returns (rc, output)."""
    e = dict(os.environ)
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    e["PYTHONPATH"] = PYTHON_DIR
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run([sys.executable, "-c", code], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    return r.returncode, r.stdout


class DiscoveryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="topk_py_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def touch(self, *parts):
        p = os.path.join(self.tmp, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").close()
        return p

    def test_explicit_path_wins_and_is_alone(self):
        lib = self.touch("x", "libtopk.so.0")
        self.assertEqual(_capi._candidates(environ={"TOPK_LIBRARY": lib}), [("$TOPK_LIBRARY", lib)])
        # A directory holding the library works too.
        self.assertEqual(_capi._candidates(environ={"TOPK_LIBRARY": os.path.dirname(lib)}),
                         [("$TOPK_LIBRARY", lib)])

    def test_search_order(self):
        pkg = os.path.join(self.tmp, "src", "python", "topk_tune")
        os.makedirs(pkg)
        shipped = self.touch("src", "python", "topk_tune", "_lib", "libtopk.so")
        installed = self.touch("prefix", "lib", "libtopk.so.0")
        with open(os.path.join(pkg, "_install.py"), "w") as f:
            f.write(f'LIBDIR = "{os.path.relpath(os.path.dirname(installed), pkg)}"\n')
        old = self.touch("src", "build", "lib", "libtopk.so.0")
        new = self.touch("src", "build-release", "lib", "libtopk.so.0")
        os.utime(old, (1, 1))
        got = [(how, os.path.realpath(p)) for how, p in _capi._candidates(pkg_dir=pkg, environ={})
               if how != "system"]
        want = [("package _lib", shipped), ("install", installed), ("build tree", new), ("build tree", old)]
        self.assertEqual(got, [(h, os.path.realpath(p)) for h, p in want])

    def test_nothing_found(self):
        pkg = os.path.join(self.tmp, "topk_tune")
        os.makedirs(pkg)
        self.assertEqual([c for c in _capi._candidates(pkg_dir=pkg, environ={}) if c[0] != "system"], [])

    def test_the_library_in_use(self):
        path = topk_tune.library_path()
        self.assertTrue(os.path.exists(path) or "/" not in path, path)
        if os.environ.get("TOPK_LIBRARY"):
            self.assertEqual(os.path.realpath(path), os.path.realpath(os.environ["TOPK_LIBRARY"]))

    def test_missing_explicit_library(self):
        rc, out = run_python(
            "import topk_tune\n"
            "try:\n"
            "    topk_tune.code_name(0)\n"
            "except topk_tune.TopkError as e:\n"
            "    print(e.code_name, e.message)\n",
            TOPK_LIBRARY=os.path.join(self.tmp, "nope", "libtopk.so"))
        self.assertEqual(rc, 0, out)
        self.assertIn("not_found", out)
        self.assertIn("TOPK_LIBRARY", out)

    def test_not_a_library(self):
        bogus = os.path.join(self.tmp, "libtopk.so")
        with open(bogus, "w") as f:
            f.write("not an ELF file\n")
        rc, out = run_python(
            "import topk_tune\n"
            "try:\n"
            "    topk_tune.Library()\n"
            "except topk_tune.TopkError as e:\n"
            "    print(e.code_name, e.message)\n",
            TOPK_LIBRARY=bogus)
        self.assertEqual(rc, 0, out)
        self.assertIn("unavailable: could not load libtopk", out)

    def test_import_needs_neither_torch_nor_libtopk(self):
        rc, out = run_python("import sys, topk_tune\n"
                             "assert 'torch' not in sys.modules\n"
                             "assert topk_tune._capi._state.dll is None\n"
                             "print('ok')\n",
                             TOPK_LIBRARY=os.path.join(self.tmp, "nope.so"),
                             # With torch installed the import registers the
                             # torch operators (test_ops.py); opted out here.
                             TOPK_TUNE_TORCH_OPS="0")
        self.assertEqual(rc, 0, out)


class ErrorTest(unittest.TestCase):
    def test_code_names_match_the_c_api(self):
        for c in Code:
            self.assertEqual(topk_tune.code_name(c), c.name.lower())
        self.assertEqual(topk_tune.code_name(-1), "unknown")
        self.assertEqual(topk_tune.code_name(15), "unknown")

    def test_error_object(self):
        e = TopkError(1, "invalid_argument: Problem: k must be >= 0, got -1")
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.code, Code.INVALID_ARGUMENT)
        self.assertEqual(e.code_name, "invalid_argument")
        self.assertEqual(str(e), "invalid_argument: Problem: k must be >= 0, got -1")
        e2 = pickle.loads(pickle.dumps(e))
        self.assertEqual((e2.code, e2.message), (e.code, e.message))
        odd = TopkError(99, "what")
        self.assertEqual((odd.code, odd.code_name), (99, "unknown"))

    def test_open_without_a_gpu(self):
        try:
            lib = topk_tune.Library(device=0, cache_path="")
        except TopkError as e:
            # No driver (CI): UNAVAILABLE; a driver without devices: NOT_FOUND.
            self.assertIn(e.code, (Code.UNAVAILABLE, Code.NOT_FOUND), e.message)
            self.assertTrue(e.message.startswith(e.code_name + ": "), e.message)
            self.assertTrue("driver" in e.message or "device" in e.message, e.message)
            return
        lib.close()
        self.skipTest("a GPU is present")

    def test_bad_device(self):
        with self.assertRaises(TopkError) as cm:
            topk_tune.Library(device=-1, cache_path="")
        self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
        self.assertIn("device must be >= 0", cm.exception.message)

    @unittest.skipIf(have_torch(), "torch (and maybe a GPU) present")
    def test_topk_without_a_gpu_reports_the_library_error(self):
        from support import FakeArray  # noqa: PLC0415

        topk_tune.clear_caches()
        with self.assertRaises(TopkError) as cm:
            topk_tune.topk(FakeArray((4, 100)), 3)
        self.assertIn(cm.exception.code, (Code.UNAVAILABLE, Code.NOT_FOUND))


HEADER = os.path.join(PYTHON_DIR, "..", "include", "topk", "topk.h")


def header_struct_fields(name):
    """The field names of `typedef struct name {...}` in topk.h, in order."""
    import re  # noqa: PLC0415

    with open(HEADER) as f:
        text = f.read()
    body = re.search(r"typedef struct " + name + r" \{(.*?)\} " + name + ";", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [re.search(r"(\w+)\s*$", decl.strip()).group(1) for decl in body.split(";") if decl.strip()]


@unittest.skipUnless(os.path.isfile(HEADER), "no include/topk/topk.h beside python/ (not a source tree)")
class StructLayoutTest(unittest.TestCase):
    """The ctypes mirrors of topk.h's structs: the same fields in the same
    order, and the size the C library writes."""

    def test_field_order_matches_the_header(self):
        self.assertEqual([f[0] for f in _capi.Problem._fields_], header_struct_fields("topk_problem"))
        self.assertEqual([f[0] for f in _capi.Options._fields_], header_struct_fields("topk_options"))
        self.assertEqual(_capi.Problem._fields_[-1][0], "deterministic")

    def test_problem_init_writes_exactly_the_mirror(self):
        # topk_problem_init memsets sizeof(topk_problem): a mirror that is
        # too small lets it write past the end, one too large leaves bytes
        # untouched. Fill a larger buffer with a pattern and look.
        import ctypes  # noqa: PLC0415

        size = ctypes.sizeof(_capi.Problem)
        buf = (ctypes.c_ubyte * (size + 32))(*([0xAB] * (size + 32)))
        _capi.capi().topk_problem_init(ctypes.cast(buf, ctypes.POINTER(_capi.Problem)))
        self.assertEqual(bytes(buf[size:]), b"\xab" * 32, "topk_problem_init wrote past the ctypes Problem")
        self.assertNotEqual(bytes(buf[size - 4:size]), b"\xab" * 4, "the last field was not written by C")
        p = _capi.Problem.from_buffer_copy(bytes(buf[:size]))
        self.assertEqual((p.dtype, p.batch, p.largest, p.sorted, p.deterministic), (0, 1, 1, 0, 0))

    def test_options_init_writes_within_the_mirror(self):
        # topk_options_init sets each field: a mirror smaller than the C
        # struct (a field missing at the end) would let it write past it.
        import ctypes  # noqa: PLC0415

        size = ctypes.sizeof(_capi.Options)
        buf = (ctypes.c_ubyte * (size + 32))(*([0xAB] * (size + 32)))
        _capi.capi().topk_options_init(ctypes.cast(buf, ctypes.POINTER(_capi.Options)))
        self.assertEqual(bytes(buf[size:]), b"\xab" * 32, "topk_options_init wrote past the ctypes Options")
        o = _capi.Options.from_buffer_copy(bytes(buf[:size]))
        self.assertEqual((o.device, o.cache_path, o.allow_same_arch, o.write_back, o.programmatic_launch),
                         (0, None, 0, 1, 1))


class CachePathTest(unittest.TestCase):
    def setUp(self):
        self.saved = {k: os.environ.get(k) for k in ("TOPK_TUNE_DB", "XDG_CACHE_HOME", "HOME")}
        self.tmp = tempfile.mkdtemp(prefix="topk_py_")

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_default_cache_path_follows_the_environment(self):
        os.environ["TOPK_TUNE_DB"] = "/x/y.db"
        self.assertEqual(topk_tune.default_cache_path(), "/x/y.db")
        os.environ["TOPK_TUNE_DB"] = ""
        os.environ["XDG_CACHE_HOME"] = "/xdg"
        self.assertEqual(topk_tune.default_cache_path(), "/xdg/topk-tune/tuning.db")
        os.environ.pop("XDG_CACHE_HOME")
        os.environ["HOME"] = "/home/u"
        self.assertEqual(topk_tune.default_cache_path(), "/home/u/.cache/topk-tune/tuning.db")

    def test_library_cache_path_rules(self):
        os.environ["TOPK_TUNE_DB"] = "/x/y.db"
        self.assertEqual(resolve_cache_path(None), "/x/y.db")  # created on first write-back
        self.assertEqual(resolve_cache_path(""), "")
        self.assertEqual(resolve_cache_path("a.db"), "a.db")
        os.environ.pop("TOPK_TUNE_DB")
        os.environ["XDG_CACHE_HOME"] = self.tmp
        self.assertEqual(resolve_cache_path(None), "")  # the default file does not exist: none
        db = os.path.join(self.tmp, "topk-tune", "tuning.db")
        os.makedirs(os.path.dirname(db))
        open(db, "w").close()
        self.assertEqual(resolve_cache_path(None), db)


if __name__ == "__main__":
    unittest.main()
