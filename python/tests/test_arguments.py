"""Integer arguments, exception types, lengths / row_starts and out=, without
a GPU or torch: bad arguments raise the builtin exception a Python user
expects (TypeError, ValueError, OverflowError) that is also a TopkError with
code INVALID_ARGUMENT, before anything is loaded or launched; nothing is
truncated (k=2.7) or wrapped through ctypes (k=2**64+2)."""
import pickle
import threading
import unittest

from support import FakeArray, have_torch, make_plan, topk_tune

Code = topk_tune.Code
TopkError = topk_tune.TopkError
Library = topk_tune.Library


class Index:
    """An integer that is not an int (like numpy.int64): has __index__."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


class PlanRecorder:
    """A library for topk(library=...): records what topk plans and hands
    back a plan without a C handle, so a call that passes every Python
    check ends in topk_plan_run's "plan is NULL" and launches nothing."""

    device = 0

    def __init__(self):
        self.calls = []

    def plan(self, dtype, batch, n, k, **kw):
        self.calls.append((dtype, batch, n, k, kw))
        return make_plan(dtype, batch, n, k, row_stride=kw.get("row_stride", 0), ranges=kw.get("ranges", False),
                         values=kw.get("values", False), deterministic=kw.get("deterministic", False))


def closed_library():
    """A Library object with no C handle: plan() validates its arguments,
    then refuses with FAILED_PRECONDITION "the library is closed"."""
    lib = Library.__new__(Library)
    lib._handle, lib._lock, lib.device = None, threading.Lock(), 0
    lib._plan_handles, lib._plans = {}, set()
    return lib


class ErrorTypesTest(unittest.TestCase):
    def test_hierarchy(self):
        self.assertTrue(issubclass(topk_tune.InvalidArgumentError, TopkError))
        self.assertTrue(issubclass(topk_tune.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(topk_tune.ArgumentOverflowError, topk_tune.InvalidArgumentError))
        self.assertTrue(issubclass(topk_tune.ArgumentOverflowError, OverflowError))
        self.assertTrue(issubclass(topk_tune.ArgumentTypeError, TopkError))
        self.assertTrue(issubclass(topk_tune.ArgumentTypeError, TypeError))
        self.assertTrue(issubclass(TopkError, RuntimeError))

    def test_code_message_and_pickle(self):
        for cls in (topk_tune.InvalidArgumentError, topk_tune.ArgumentOverflowError, topk_tune.ArgumentTypeError):
            e = cls("invalid_argument: k must be >= 0, got -1")
            self.assertEqual(e.code, Code.INVALID_ARGUMENT)
            self.assertEqual(e.code_name, "invalid_argument")
            self.assertEqual(str(e), e.message)
            back = pickle.loads(pickle.dumps(e))
            self.assertIs(type(back), cls)
            self.assertEqual((back.code, back.message), (e.code, e.message))

    def test_c_api_invalid_argument_is_a_value_error(self):
        p = make_plan()
        with self.assertRaises(ValueError) as cm:
            p.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4"))
        self.assertIsInstance(cm.exception, topk_tune.InvalidArgumentError)
        self.assertIn("plan is NULL", cm.exception.message)

    def test_not_an_array_is_a_type_error(self):
        p = make_plan()
        with self.assertRaises(TypeError) as cm:
            p.run_into([1.0] * 100, FakeArray((4, 10), "<i4"))
        self.assertIn("input", cm.exception.message)
        with self.assertRaises(TypeError) as cm:
            p.run_into(FakeArray((4, 100)), object())
        self.assertIn("indices", cm.exception.message)


class TopkIntegersTest(unittest.TestCase):
    def check(self, exc, k, *needles, **kw):
        lib = PlanRecorder()
        with self.assertRaises(exc) as cm:
            topk_tune.topk(FakeArray((4, 100)), k, library=lib, **kw)
        e = cm.exception
        self.assertIsInstance(e, TopkError)
        self.assertEqual(e.code, Code.INVALID_ARGUMENT)
        for needle in needles:
            self.assertIn(needle, e.message)
        self.assertEqual(lib.calls, [], "nothing may be planned for a bad argument")

    def test_k(self):
        self.check(TypeError, 2.7, "k must be an integer", "float")
        self.check(TypeError, 2.0, "k must be an integer")
        self.check(TypeError, True, "k must be an integer", "bool")
        self.check(TypeError, False, "bool")
        self.check(TypeError, "3", "k must be an integer")
        self.check(TypeError, None, "k must be an integer")
        self.check(ValueError, -1, "k must be >= 0, got -1")
        self.check(OverflowError, 2 ** 31, "k must be < 2^31")
        self.check(OverflowError, 2 ** 64 + 2, "k must be < 2^31", str(2 ** 64 + 2))
        self.check(ValueError, 2 ** 64 + 2)  # an OverflowError is a ValueError too

    def test_dim(self):
        self.check(TypeError, 3, "dim must be an integer", dim=1.0)
        self.check(TypeError, 3, "dim must be an integer", dim=True)

    def test_good_k_is_passed_exactly(self):
        for k in (0, 3, Index(7), 100, 1000):
            lib = PlanRecorder()
            # Planned, then stopped by the missing torch (allocating the
            # outputs) or, with torch and a GPU, by the C API's NULL plan.
            with self.assertRaises(Exception):  # noqa: B017
                topk_tune.topk(FakeArray((4, 100)), k, library=lib)
            want = k.v if isinstance(k, Index) else k
            self.assertEqual(lib.calls[0][:4], ("f32", 4, 100, want))
            self.assertIs(type(lib.calls[0][3]), int)


class PlanIntegersTest(unittest.TestCase):
    def plan(self, *args, **kw):
        return closed_library().plan(*args, **kw)

    def test_bad_integers(self):
        cases = [
            (TypeError, ("f32", 4, 100, 2.7), {}, "k must be an integer"),
            (TypeError, ("f32", 4.0, 100, 3), {}, "batch must be an integer"),
            (TypeError, ("f32", True, 100, 3), {}, "batch must be an integer, got bool"),
            (TypeError, ("f32", 4, False, 3), {}, "n must be an integer, got bool"),
            (TypeError, ("f32", 4, 100, True), {}, "k must be an integer, got bool"),
            (TypeError, ("f32", 4, 100, 3), {"row_stride": 128.0}, "row_stride must be an integer"),
            (ValueError, ("f32", -1, 100, 3), {}, "batch must be >= 0, got -1"),
            (ValueError, ("f32", 4, 0, 3), {}, "n must be >= 1, got 0"),
            (ValueError, ("f32", 4, 100, -1), {}, "k must be >= 0, got -1"),
            (ValueError, ("f32", 4, 100, 3), {"row_stride": -1}, "row_stride must be >= 0"),
            (OverflowError, ("f32", 2 ** 63, 100, 3), {}, "batch must be < 2^31"),
            (OverflowError, ("f32", 4, 2 ** 64 + 100, 3), {}, "n must be < 2^31"),
            (OverflowError, ("f32", 4, 100, 2 ** 64 + 2), {}, "k must be < 2^31"),
            (OverflowError, ("f32", 4, 100, 3), {"row_stride": 2 ** 64 + 100}, "row_stride must be < 2^63"),
        ]
        for exc, args, kw, needle in cases:
            with self.subTest(needle=needle, args=args, kw=kw):
                with self.assertRaises(exc) as cm:
                    self.plan(*args, **kw)
                self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
                self.assertIn(needle, cm.exception.message)

    def test_good_integers_pass(self):
        for args in (("f32", 4, 100, 3), ("f16", Index(4), Index(100), Index(3)), ("bf16", 0, 1, 0),
                     ("f32", 2 ** 31 - 1, 2 ** 31 - 1, 2 ** 31 - 1)):
            with self.subTest(args=args):
                with self.assertRaises(TopkError) as cm:
                    self.plan(*args)
                self.assertEqual(cm.exception.code, Code.FAILED_PRECONDITION)
                self.assertIn("closed", cm.exception.message)

    def test_library_device(self):
        for device, exc, needle in ((1.5, TypeError, "device must be an integer"),
                                    (True, TypeError, "device must be an integer, got bool"),
                                    (-1, ValueError, "device must be >= 0"),
                                    (2 ** 32, OverflowError, "device must be < 2^31")):
            with self.subTest(device=device):
                with self.assertRaises(exc) as cm:
                    Library(device=device, cache_path="")
                self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
                self.assertIn(needle, cm.exception.message)

    def test_run_batch(self):
        p = make_plan(batch=4, n=100, k=10)
        x, out = FakeArray((4, 100)), FakeArray((4, 10), "<i4")
        for batch, exc, needle in ((2.5, TypeError, "batch must be an integer"),
                                   (True, TypeError, "got bool"),
                                   (2 ** 64 + 1, OverflowError, "batch must be < 2^63")):
            with self.subTest(batch=batch):
                with self.assertRaises(exc) as cm:
                    p.run_into(x, out, batch=batch)
                self.assertIn(needle, cm.exception.message)
                with self.assertRaises(exc):
                    p.allocate_outputs(batch=batch)
        with self.assertRaises(TopkError) as cm:
            p.run_into(x, out, batch=Index(2))
        self.assertIn("plan is NULL", cm.exception.message)

    def test_stream(self):
        p = make_plan()
        x, out = FakeArray((4, 100)), FakeArray((4, 10), "<i4")
        for stream, exc, needle in ((True, TypeError, "stream must be an integer, got bool"),
                                    (1.0, TypeError, "stream must be an int"),
                                    (-1, ValueError, "stream must be >= 0"),
                                    (2 ** 64, OverflowError, "stream must be < ")):
            with self.subTest(stream=stream):
                with self.assertRaises(exc) as cm:
                    p.run_into(x, out, stream=stream)
                self.assertIn(needle, cm.exception.message)
        with self.assertRaises(TopkError) as cm:
            p.run_into(x, out, stream=2 ** 64 - 1)
        self.assertIn("plan is NULL", cm.exception.message)


class DeterministicTest(unittest.TestCase):
    """deterministic: a bool (None too for topk, where it means torch's
    deterministic-algorithms setting for torch tensors), passed to the plan
    and part of the plan cache's key."""

    def test_plan_takes_a_bool_only(self):
        for bad in (1, 0, "yes", 2.0):
            with self.subTest(deterministic=bad):
                with self.assertRaises(TypeError) as cm:
                    closed_library().plan("f32", 4, 100, 3, deterministic=bad)
                self.assertIsInstance(cm.exception, TopkError)
                self.assertIn("deterministic must be a bool", cm.exception.message)
        with self.assertRaises(TypeError):
            closed_library().plan("f32", 4, 100, 3, deterministic=None)
        for good in (True, False):
            with self.assertRaises(TopkError) as cm:
                closed_library().plan("f32", 4, 100, 3, deterministic=good)
            self.assertEqual(cm.exception.code, Code.FAILED_PRECONDITION)

    def test_plan_shows_it(self):
        p = make_plan(deterministic=True, values=True)
        self.assertIs(p.deterministic, True)
        self.assertIs(p.problem["deterministic"], True)
        self.assertEqual(p.problem["k"], 10)
        self.assertIn(" deterministic", repr(p))
        q = make_plan()
        self.assertIs(q.deterministic, False)
        self.assertNotIn("deterministic", repr(q))

    def topk_calls(self, **kw):
        topk_tune.clear_caches()  # a new recorder may reuse a dead one's id(), part of the cache key
        lib = PlanRecorder()
        with self.assertRaises(Exception):  # noqa: B017 (stopped after planning: no torch / GPU / C plan)
            topk_tune.topk(FakeArray((4, 100)), 3, library=lib, **kw)
        return lib.calls

    def test_topk_passes_it_to_the_plan(self):
        self.assertIs(self.topk_calls(deterministic=True)[0][4]["deterministic"], True)
        self.assertIs(self.topk_calls(deterministic=False)[0][4]["deterministic"], False)
        # None: False for a non-torch array, whatever torch's setting.
        self.assertIs(self.topk_calls()[0][4]["deterministic"], False)

    def test_topk_refuses_a_non_bool(self):
        lib = PlanRecorder()
        for bad in (1, "true"):
            with self.assertRaises(TypeError) as cm:
                topk_tune.topk(FakeArray((4, 100)), 3, library=lib, deterministic=bad)
            self.assertIn("deterministic must be a bool or None", cm.exception.message)
        self.assertEqual(lib.calls, [])

    def test_plan_cache_keys_on_it(self):
        from topk_tune import _functional  # noqa: PLC0415

        topk_tune.clear_caches()
        lib = PlanRecorder()
        for d in (False, True, False, True):
            with self.assertRaises(Exception):  # noqa: B017
                topk_tune.topk(FakeArray((4, 100)), 3, library=lib, deterministic=d)
        self.assertEqual([c[4]["deterministic"] for c in lib.calls], [False, True])
        self.assertEqual(sorted(key[-1] for key in _functional._plans), [False, True])
        topk_tune.clear_caches()


@unittest.skipUnless(have_torch(), "needs torch to allocate the outputs")
class DirectLaunchTest(unittest.TestCase):
    """topk's launch after the plan lookup, with host tensors standing in
    for the CUDA outputs: the input is described once, and the pointers
    reach topk_plan_run (which refuses the NULL plan)."""

    def test_describes_once_and_reaches_the_c_api(self):
        import torch  # noqa: PLC0415

        from topk_tune import _arrays, _functional  # noqa: PLC0415

        class HostTorch:  # torch, allocating on the host
            int32, float32, float16, bfloat16 = torch.int32, torch.float32, torch.float16, torch.bfloat16

            @staticmethod
            def empty(shape, dtype, device):
                return torch.empty(shape, dtype=dtype)

            @staticmethod
            def device(*args):
                return torch.device("cpu")

        calls = []
        real_describe, real_module = _functional.describe, _arrays.torch_module

        def counting(x, what="input"):
            calls.append(what)
            return real_describe(x, what)

        topk_tune.clear_caches()
        _functional.describe, _arrays.torch_module = counting, lambda: HostTorch
        try:
            for values in (True, False):
                calls.clear()
                lib = PlanRecorder()
                with self.assertRaises(TopkError) as cm:
                    topk_tune.topk(FakeArray((4, 100)), 3, values=values, library=lib)
                self.assertIn("plan is NULL", cm.exception.message)
                self.assertEqual(calls, ["input"])
                self.assertEqual(len(lib.calls), 1)
            # Caller-given ranges are still checked.
            with self.assertRaises(TopkError) as cm:
                topk_tune.topk(FakeArray((4, 100)), 3, ranges=FakeArray((3, 2), "<i4"), library=PlanRecorder())
            self.assertIn("ranges must be [batch, 2]", cm.exception.message)
        finally:
            _functional.describe, _arrays.torch_module = real_describe, real_module
            topk_tune.clear_caches()


class LengthsAndOutTest(unittest.TestCase):
    """What can be checked without torch: the argument combinations, and
    the refusal of lengths / row_starts / out that are not torch tensors.
    The conversion itself is in gpu_test_api.py."""

    def assertRaisesIn(self, exc, fn, *needles):
        with self.assertRaises(exc) as cm:
            fn()
        self.assertIsInstance(cm.exception, TopkError)
        self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
        for needle in needles:
            self.assertIn(needle, cm.exception.message)

    def test_combinations(self):
        x, lib = FakeArray((4, 100)), PlanRecorder()
        rg, ln, st = FakeArray((4, 2), "<i4"), FakeArray((4,), "<i4"), FakeArray((4,), "<i4")
        self.assertRaisesIn(ValueError, lambda: topk_tune.topk(x, 3, ranges=rg, lengths=ln, library=lib),
                            "ranges or lengths", "not both")
        self.assertRaisesIn(ValueError, lambda: topk_tune.topk(x, 3, ranges=rg, lengths=ln, row_starts=st,
                                                               library=lib), "not both")
        self.assertRaisesIn(ValueError, lambda: topk_tune.topk(x, 3, row_starts=st, library=lib),
                            "row_starts needs lengths")
        self.assertRaisesIn(ValueError, lambda: topk_tune.topk(x, 3, ranges=rg, row_starts=st, library=lib),
                            "row_starts needs lengths")
        self.assertEqual(lib.calls, [])

    @unittest.skipIf(have_torch(), "torch is installed: the GPU tests cover torch tensors")
    def test_lengths_must_be_torch_tensors(self):
        x, lib = FakeArray((4, 100)), PlanRecorder()
        ln = FakeArray((4,), "<i4")
        self.assertRaisesIn(TypeError, lambda: topk_tune.topk(x, 3, lengths=ln, library=lib),
                            "lengths must be a CUDA torch tensor", "pass ranges")
        self.assertRaisesIn(TypeError, lambda: topk_tune.topk(x, 3, lengths=[5, 6, 7, 8], library=lib),
                            "lengths must be", "list")
        p = make_plan(ranges=True)
        self.assertRaisesIn(TypeError, lambda: p(x, lengths=ln), "lengths must be a CUDA torch tensor")
        self.assertRaisesIn(ValueError, lambda: p(x, row_starts=ln), "row_starts needs lengths")
        self.assertEqual(lib.calls, [])

    def test_out_form(self):
        x, lib = FakeArray((4, 100)), PlanRecorder()
        v, i = FakeArray((4, 3)), FakeArray((4, 3), "<i4")
        self.assertRaisesIn(TypeError, lambda: topk_tune.topk(x, 3, out=i, library=lib), "out must be a pair")
        self.assertRaisesIn(TypeError, lambda: topk_tune.topk(x, 3, out=(v, i, i), library=lib), "out must be")
        self.assertRaisesIn(ValueError, lambda: topk_tune.topk(x, 3, values=False, out=(v, i), library=lib),
                            "out[0] (values) must be None when values=False")
        if not have_torch():
            self.assertRaisesIn(TypeError, lambda: topk_tune.topk(x, 3, out=(v, i), library=lib),
                                "out[0] (values) must be a torch tensor")
            self.assertRaisesIn(TypeError, lambda: topk_tune.topk(x, 3, values=False, out=(None, i), library=lib),
                                "out[1] (indices) must be a torch tensor")
        self.assertEqual(lib.calls, [])


if __name__ == "__main__":
    unittest.main()
