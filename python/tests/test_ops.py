"""torch.ops.topk_tune.{topk, topk_ranged, topk_values} without a GPU: on
meta tensors (what torch.compile's fake tensors run) the ops give torch.topk's
output shapes and dtypes, and bad arguments raise TypeError / ValueError
naming the argument. Skipped, with the reason, where torch is not installed.
"""
import os
import subprocess
import sys
import unittest

from support import have_torch, topk_tune

HAVE_TORCH = have_torch()
if HAVE_TORCH:
    import torch
elif os.environ.get("TOPK_REQUIRE_TORCH") == "1":
    # scripts/test.sh installs torch and sets this: there a missing torch is
    # a broken setup, not a reason to skip the operators' tests.
    raise ImportError("TOPK_REQUIRE_TORCH=1 but torch cannot be imported by " + sys.executable)

PKG_PARENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run_python(code, **env):
    e = dict(os.environ, PYTHONPATH=PKG_PARENT, **env)
    p = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


@unittest.skipUnless(HAVE_TORCH, "torch is not installed: the torch operators are not registered")
class OpsMetaTest(unittest.TestCase):
    DTYPES = ("float32", "float16", "bfloat16")

    def x(self, *shape, dtype=torch.float32 if HAVE_TORCH else None):
        return torch.empty(shape, dtype=dtype, device="meta")

    def test_registered(self):
        for name in ("topk", "topk_ranged", "topk_values"):
            self.assertTrue(hasattr(torch.ops.topk_tune, name), name)

    def check(self, out, shape, dtype):
        self.assertEqual(out.device.type, "meta")
        self.assertEqual(tuple(out.shape), tuple(shape))
        self.assertEqual(out.dtype, dtype)

    def test_topk_shapes_and_dtypes(self):
        for name in self.DTYPES:
            dt = getattr(torch, name)
            for shape, k, dim, want in (((64, 32768), 2048, -1, (64, 2048)), ((100,), 7, 0, (7,)),
                                        ((3, 50, 8), 5, 1, (3, 5, 8)), ((2, 3, 9), 9, -1, (2, 3, 9)),
                                        ((4, 10), 0, -1, (4, 0)), ((0, 10), 3, -1, (0, 3)), ((4, 0), 0, -1, (4, 0))):
                with self.subTest(dtype=name, shape=shape, k=k, dim=dim):
                    v, i = torch.ops.topk_tune.topk(self.x(*shape, dtype=dt), k, dim)
                    self.check(v, want, dt)
                    self.check(i, want, torch.int64)
                    # The same as torch.topk on meta tensors.
                    rv, ri = torch.topk(self.x(*shape, dtype=dt), k, dim)
                    self.assertEqual((v.shape, i.shape, v.dtype, i.dtype), (rv.shape, ri.shape, rv.dtype, ri.dtype))
                    vo = torch.ops.topk_tune.topk_values(self.x(*shape, dtype=dt), k, dim, largest=False)
                    self.check(vo, want, dt)

    def test_keyword_arguments(self):
        v, i = torch.ops.topk_tune.topk(self.x(300, 8), k=20, dim=0, largest=False, sorted=False)
        self.check(v, (20, 8), torch.float32)
        self.check(i, (20, 8), torch.int64)

    def test_ranged_shapes_and_dtypes(self):
        for name in self.DTYPES:
            dt = getattr(torch, name)
            x = self.x(64, 32768, dtype=dt)
            rg = torch.empty((64, 2), dtype=torch.int32, device="meta")
            ln = torch.empty((64,), dtype=torch.int32, device="meta")
            for kw in ({"ranges": rg}, {"lengths": ln}, {"lengths": ln, "row_starts": ln}):
                with self.subTest(dtype=name, form=sorted(kw)):
                    v, i = torch.ops.topk_tune.topk_ranged(x, 2048, **kw)
                    self.check(v, (64, 2048), dt)
                    self.check(i, (64, 2048), torch.int64)
        # Leading dimensions: one range per row, flat or in their shape.
        x = self.x(2, 3, 100)
        v, i = torch.ops.topk_tune.topk_ranged(x, 10, lengths=torch.empty((2, 3), dtype=torch.int32, device="meta"))
        self.check(i, (2, 3, 10), torch.int64)
        v, i = torch.ops.topk_tune.topk_ranged(x, 10, ranges=torch.empty((6, 2), dtype=torch.int32, device="meta"))
        self.check(v, (2, 3, 10), torch.float32)

    def assertRaisesIn(self, exc, fn, *texts):
        with self.assertRaises(exc) as cm:
            fn()
        for t in texts:
            self.assertIn(t, str(cm.exception))
        return cm.exception

    def test_argument_errors(self):
        ops = torch.ops.topk_tune
        x = self.x(4, 100)
        i32 = torch.empty((4,), dtype=torch.int32, device="meta")
        rg = torch.empty((4, 2), dtype=torch.int32, device="meta")
        e = self.assertRaisesIn(TypeError, lambda: ops.topk(self.x(4, 100, dtype=torch.float64), 3), "x must be",
                                "float64")
        self.assertIsInstance(e, topk_tune.TopkError)
        self.assertRaisesIn(TypeError, lambda: ops.topk_values(torch.empty((4, 100), dtype=torch.int32,
                                                                           device="meta"), 3), "x must be")
        self.assertRaisesIn(ValueError, lambda: ops.topk(x, 101), "k = 101", "100 elements")
        self.assertRaisesIn(ValueError, lambda: ops.topk_values(x, 5, 0), "k = 5")
        self.assertRaisesIn(ValueError, lambda: ops.topk(x, -1), "k must be >= 0")
        self.assertRaisesIn(ValueError, lambda: ops.topk(x, 3, 2), "dim 2 is out of range")
        self.assertRaisesIn(ValueError, lambda: ops.topk(self.x(), 0), "0-d")
        # The ranged form: index dtype, shapes, combinations, devices.
        self.assertRaisesIn(TypeError, lambda: ops.topk_ranged(x, 3, ranges=rg.long()), "ranges must be int32")
        self.assertRaisesIn(TypeError, lambda: ops.topk_ranged(x, 3, lengths=i32.long()), "lengths must be int32")
        self.assertRaisesIn(TypeError, lambda: ops.topk_ranged(x, 3, lengths=i32, row_starts=i32.float()),
                            "row_starts must be int32")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 3, ranges=rg[:3]), "ranges must be [rows, 2]")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 3, lengths=i32[:2]), "lengths must be [rows]")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 3), "needs ranges")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 3, ranges=rg, lengths=i32), "not both")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 3, row_starts=i32), "row_starts needs lengths")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 3, ranges=torch.zeros((4, 2), dtype=torch.int32)), "ranges is on cpu")
        self.assertRaisesIn(ValueError, lambda: ops.topk_ranged(x, 101, ranges=rg), "k = 101")

    def test_deterministic_in_the_schema(self):
        for name in ("topk", "topk_ranged", "topk_values"):
            schema = str(getattr(torch.ops.topk_tune, name).default._schema)
            self.assertIn("bool? deterministic=None", schema, schema)

    def test_deterministic_on_meta(self):
        x = self.x(64, 1000)
        for d in (None, True, False):
            with self.subTest(deterministic=d):
                v, i = torch.ops.topk_tune.topk(x, 8, deterministic=d)
                self.check(i, (64, 8), torch.int64)
                v, i = torch.ops.topk_tune.topk(x, 8, -1, True, True, d)  # positionally too
                self.check(v, (64, 8), torch.float32)
                vo = torch.ops.topk_tune.topk_values(x, 8, deterministic=d)
                self.check(vo, (64, 8), torch.float32)
                ln = torch.empty((64,), dtype=torch.int32, device="meta")
                v, i = torch.ops.topk_tune.topk_ranged(x, 8, lengths=ln, deterministic=d)
                self.check(i, (64, 8), torch.int64)
        with self.assertRaises(Exception):  # noqa: B017 (the schema refuses a non-bool)
            torch.ops.topk_tune.topk(x, 8, deterministic="yes")

    def test_none_follows_torch_deterministic_algorithms(self):
        from topk_tune._functional import resolve_deterministic  # noqa: PLC0415

        t = torch.zeros(3)
        was = torch.are_deterministic_algorithms_enabled()
        try:
            torch.use_deterministic_algorithms(True)
            self.assertIs(resolve_deterministic(None, t), True)
            self.assertIs(resolve_deterministic(False, t), False)
            self.assertIs(resolve_deterministic(None, object()), False)  # not a torch tensor
            torch.use_deterministic_algorithms(False)
            self.assertIs(resolve_deterministic(None, t), False)
            self.assertIs(resolve_deterministic(True, t), True)
        finally:
            torch.use_deterministic_algorithms(was)

    def test_big_k_sort_orders_ties_by_index(self):
        # The torch-side sort for k > MAX_SORTED_K (pure torch: runs on the
        # host here): with deterministic, any order of one index set gives
        # one output, ties in index order.
        from topk_tune._ops import MAX_SORTED_K, _sort_big  # noqa: PLC0415

        k = MAX_SORTED_K + 100
        g = torch.Generator().manual_seed(1)
        idx = torch.randperm(3 * k, generator=g)[:k].sort().values
        row = torch.randint(0, 4, (3 * k,), generator=g).float()
        vals = row[idx]
        for largest in (True, False):
            want = None
            for trial in range(3):
                perm = torch.randperm(k, generator=g)
                v, i = _sort_big(vals[perm].view(1, k), idx[perm].view(1, k), 1, largest, True, k, True)
                # Sorted by value, ties by ascending index.
                key = (v[0].double() * (1 if largest else -1)) * (4 * k) - i[0].double()
                self.assertTrue(bool((key[:-1] >= key[1:]).all()), (largest, trial))
                self.assertTrue(torch.equal(row[i[0]], v[0]))  # the pairs stay together
                if want is None:
                    want = (v, i)
                self.assertTrue(torch.equal(want[0], v) and torch.equal(want[1], i))
                self.assertTrue(v.is_contiguous() and i.is_contiguous())
        # Up to MAX_SORTED_K, or unsorted, it leaves the library's output alone.
        v, i = vals[:10].view(1, 10), idx[:10].view(1, 10)
        self.assertTrue(torch.equal(_sort_big(v, i, 1, True, True, 10, True)[1], i))
        self.assertTrue(torch.equal(_sort_big(vals.view(1, -1)[:, :k], idx.view(1, -1), 1, True, False, k, True)[1],
                                    idx.view(1, -1)))

    def test_host_tensors_are_refused(self):
        x = torch.zeros(4, 100)
        for call in (lambda: torch.ops.topk_tune.topk(x, 3), lambda: torch.ops.topk_tune.topk_values(x, 3),
                     lambda: torch.ops.topk_tune.topk_ranged(x, 3, lengths=torch.zeros(4, dtype=torch.int32))):
            self.assertRaisesIn(ValueError, call, "x is on cpu", "CUDA")

    def test_registered_on_import_without_a_gpu_or_libtopk(self):
        # Registering needs torch only: with no libtopk at all the ops exist
        # and run on meta tensors; nothing loads the library.
        rc, out = run_python("import sys, torch, topk_tune\n"
                             "v, i = torch.ops.topk_tune.topk(torch.empty(3, 9, device='meta'), 4)\n"
                             "assert tuple(i.shape) == (3, 4) and i.dtype == torch.int64\n"
                             "assert topk_tune._capi._state.dll is None\n"
                             "print('ok')\n", TOPK_LIBRARY="/nonexistent/libtopk.so")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_opt_out_keeps_the_import_light(self):
        rc, out = run_python("import sys, topk_tune\nassert 'torch' not in sys.modules\nprint('ok')\n",
                             TOPK_TUNE_TORCH_OPS="0")
        self.assertEqual(rc, 0, out)

    def test_fake_tensors(self):
        # What torch.compile traces with: FakeTensorMode runs the Meta
        # kernel for CUDA fake tensors, with no GPU behind them.
        try:
            from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
        except ImportError:
            self.skipTest("this torch has no FakeTensorMode")
        mode = FakeTensorMode()

        def fake_cuda(*shape, dtype=torch.float32):
            # A CUDA fake tensor over a meta tensor: no GPU behind it.
            return FakeTensor(mode, torch.empty(shape, dtype=dtype, device="meta"), torch.device("cuda", 0))

        try:
            x, ln = fake_cuda(16, 1000), fake_cuda(16, dtype=torch.int32)
        except Exception as e:  # noqa: BLE001 (the constructor is internal and changes between versions)
            self.skipTest(f"this torch cannot make CUDA fake tensors without a GPU: {e!r}")
        with mode:
            v, i = torch.ops.topk_tune.topk(x, 8)
            rv, ri = torch.ops.topk_tune.topk_ranged(x, 8, lengths=ln)
        self.assertEqual(tuple(v.shape), (16, 8))
        self.assertEqual(i.dtype, torch.int64)
        self.assertEqual(v.device.type, "cuda")
        self.assertEqual(ri.device.type, "cuda")


@unittest.skipIf(HAVE_TORCH, "torch is installed (OpsMetaTest covers the ops)")
class OpsWithoutTorchTest(unittest.TestCase):
    def test_import_works_and_registers_nothing(self):
        self.assertIsNone(topk_tune._torch_library)


if __name__ == "__main__":
    unittest.main()
