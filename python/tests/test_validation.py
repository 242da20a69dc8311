"""Argument checks of Plan.run_into / Plan.__call__ / topk with fake
__cuda_array_interface__ objects: every bad argument raises TopkError
(INVALID_ARGUMENT) in Python with a message naming it; good arguments reach
the C API (which then refuses the fake NULL plan). No GPU, no torch."""
import unittest

from support import FakeArray, have_torch, make_plan, topk_tune

Code = topk_tune.Code
TopkError = topk_tune.TopkError


class RunIntoTest(unittest.TestCase):
    def assertInvalid(self, fn, *needles):
        with self.assertRaises(TopkError) as cm:
            fn()
        e = cm.exception
        self.assertEqual(e.code, Code.INVALID_ARGUMENT, e.message)
        self.assertEqual(e.code_name, "invalid_argument")
        for needle in needles:
            self.assertIn(needle, e.message)
        return e

    def assertReachesC(self, fn):
        # Everything Python checks passed: the C API saw the call and refused
        # the NULL plan.
        e = self.assertInvalid(fn, "plan is NULL")
        self.assertTrue(e.message.startswith("invalid_argument: topk_plan_run"), e.message)

    def test_good_arguments_reach_the_c_api(self):
        p = make_plan(batch=4, n=100, k=10)
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4")))
        # Fewer rows than planned, a 1-D row, an explicit batch.
        self.assertReachesC(lambda: p.run_into(FakeArray((2, 100)), FakeArray((2, 10), "<i4")))
        self.assertReachesC(lambda: p.run_into(FakeArray((100,)), FakeArray((1, 10), "<i4")))
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4"), batch=3))
        # Outputs with more rows than needed; outputs as a 1-tuple, or as
        # (None, indices) like topk(values=False)'s result.
        self.assertReachesC(lambda: p.run_into(FakeArray((2, 100)), (FakeArray((4, 10), "<i4"),)))
        self.assertReachesC(lambda: p.run_into(FakeArray((2, 100)), (None, FakeArray((4, 10), "<i4"))))
        # Explicit C-contiguous strides are the same as none.
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100), strides=(100, 1)), FakeArray((4, 10), "<i4")))

    def test_batch_zero_and_empty_arrays_reach_the_c_api(self):
        p = make_plan(batch=4, n=100, k=10)
        self.assertReachesC(lambda: p.run_into(FakeArray((0, 100), ptr=0), FakeArray((0, 10), "<i4", ptr=0)))
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4"), batch=0))

    def test_values_plan(self):
        p = make_plan(dtype="f16", values=True)
        # Outputs are (values, indices), the order of torch.topk and topk().
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100), "<f2"),
                                               (FakeArray((4, 10), "<f2"), FakeArray((4, 10), "<i4"))))
        self.assertInvalid(lambda: p.run_into(FakeArray((4, 100), "<f2"), FakeArray((4, 10), "<i4")),
                           "(values, indices)")
        self.assertInvalid(lambda: p.run_into(FakeArray((4, 100), "<f2"),
                                              (FakeArray((4, 10), "<f4"), FakeArray((4, 10), "<i4"))),
                           "values must be f16")
        self.assertInvalid(lambda: p.run_into(FakeArray((4, 100), "<f2"),
                                              (FakeArray((4, 9), "<f2"), FakeArray((4, 10), "<i4"))),
                           "values must be [batch, k]")
        # The order of earlier versions is refused, never written swapped.
        self.assertInvalid(lambda: p.run_into(FakeArray((4, 100), "<f2"),
                                              (FakeArray((4, 10), "<i4"), FakeArray((4, 10), "<f2"))),
                           "got (indices, values)")

    def test_no_values_plan_rejects_values(self):
        p = make_plan()
        self.assertInvalid(lambda: p.run_into(FakeArray((4, 100)),
                                              (FakeArray((4, 10), "<i4"), FakeArray((4, 10)))),
                           "writes no values")

    def test_input_checks(self):
        p = make_plan(batch=4, n=100, k=10)
        out = FakeArray((4, 10), "<i4")
        cases = [
            (lambda: p.run_into(object(), out), "__cuda_array_interface__"),
            (lambda: p.run_into([1.0, 2.0], out), "__cuda_array_interface__"),
            (lambda: p.run_into(FakeArray((4, 100), "<f2"), out), "input dtype is f16"),
            (lambda: p.run_into(FakeArray((4, 100), "<f8"), out), "'<f8'"),
            (lambda: p.run_into(FakeArray((4, 100), "<V2"), out), "bfloat16"),
            (lambda: p.run_into(FakeArray((2, 2, 100)), out), "1-D or 2-D"),
            (lambda: p.run_into(FakeArray((4, 99)), out), "n = 100"),
            (lambda: p.run_into(FakeArray((5, 100)), FakeArray((5, 10), "<i4")), "exceeds the planned batch 4"),
            (lambda: p.run_into(FakeArray((4, 100)), out, batch=5), "outside the input's 4 rows"),
            (lambda: p.run_into(FakeArray((4, 100)), out, batch=-1), "outside"),
            (lambda: p.run_into(FakeArray((4, 100), strides=(1, 4)), out), "contiguous"),
            (lambda: p.run_into(FakeArray((4, 100), strides=(200, 1)), out), "row stride is 200"),
            (lambda: p.run_into(FakeArray((4, 100), strides=(50, 1)), out), "smaller than n"),
            (lambda: p.run_into(FakeArray((4, 100), ptr=None), out), "null"),
            (lambda: p.run_into(FakeArray((4, 100), mask=FakeArray((4, 100))), out), "masked"),
        ]
        for fn, needle in cases:
            with self.subTest(needle=needle):
                self.assertInvalid(fn, needle)

    def test_malformed_interface(self):
        p = make_plan()
        bad = FakeArray((4, 100))
        del bad.__cuda_array_interface__["typestr"]
        self.assertInvalid(lambda: p.run_into(bad, FakeArray((4, 10), "<i4")), "malformed")
        odd = FakeArray((4, 100))
        odd.__cuda_array_interface__["strides"] = (401, 4)
        self.assertInvalid(lambda: p.run_into(odd, FakeArray((4, 10), "<i4")), "multiples")

    def test_strided_plan(self):
        p = make_plan(batch=4, n=100, k=10, row_stride=128)
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100), strides=(128, 1)), FakeArray((4, 10), "<i4")))
        self.assertInvalid(lambda: p.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4")), "row stride is 100")
        # One row: its stride does not matter.
        self.assertReachesC(lambda: p.run_into(FakeArray((1, 100)), FakeArray((1, 10), "<i4")))

    def test_output_checks(self):
        p = make_plan(batch=4, n=100, k=10)
        x = FakeArray((4, 100))
        cases = [
            (FakeArray((4, 10), "<i8"), "indices must be i32"),
            (FakeArray((4, 10), "<f4"), "indices must be i32"),
            (FakeArray((3, 10), "<i4"), "[batch, k] = [4, 10]"),
            (FakeArray((4, 11), "<i4"), "[batch, k]"),
            (FakeArray((40,), "<i4"), "[batch, k]"),
            (FakeArray((4, 10), "<i4", strides=(16, 1)), "contiguous"),
            (FakeArray((4, 10), "<i4", strides=(1, 4)), "contiguous"),
            (FakeArray((4, 10), "<i4", readonly=True), "read-only"),
            (object(), "__cuda_array_interface__"),
        ]
        for out, needle in cases:
            with self.subTest(needle=needle):
                self.assertInvalid(lambda: p.run_into(x, out), needle)

    def test_ranges(self):
        p = make_plan(batch=4, n=100, k=10, ranges=True)
        x, out = FakeArray((4, 100)), FakeArray((4, 10), "<i4")
        self.assertReachesC(lambda: p.run_into(x, out, ranges=FakeArray((4, 2), "<i4")))
        self.assertReachesC(lambda: p.run_into(FakeArray((2, 100)), out, ranges=FakeArray((4, 2), "<i4")))
        cases = [
            (None, "pass ranges"),
            (FakeArray((4, 2), "<i8"), "ranges must be int32"),
            (FakeArray((4, 2), "<f4"), "ranges must be int32"),
            (FakeArray((3, 2), "<i4"), "[batch, 2]"),
            (FakeArray((4, 3), "<i4"), "[batch, 2]"),
            (FakeArray((8,), "<i4"), "[batch, 2]"),
            (FakeArray((4, 2), "<i4", strides=(4, 1)), "contiguous"),
            (FakeArray((4, 2), "<i4", strides=(1, 4)), "contiguous"),
        ]
        for rg, needle in cases:
            with self.subTest(needle=needle):
                self.assertInvalid(lambda: p.run_into(x, out, ranges=rg), needle)
        q = make_plan(batch=4, n=100, k=10)
        self.assertInvalid(lambda: q.run_into(x, out, ranges=FakeArray((4, 2), "<i4")), "without ranges=True")

    def test_streams(self):
        p = make_plan()
        x, out = FakeArray((4, 100)), FakeArray((4, 10), "<i4")
        for s in (0, 1, 2, 0x1234):
            self.assertReachesC(lambda: p.run_into(x, out, stream=s))

        class CupyLikeStream:
            ptr = 0x5678

        self.assertReachesC(lambda: p.run_into(x, out, stream=CupyLikeStream()))
        self.assertReachesC(lambda: p.run_into(FakeArray((4, 100), stream=2), out))
        self.assertInvalid(lambda: p.run_into(x, out, stream="default"), "stream")

    @unittest.skipIf(have_torch(), "torch is installed: __call__ allocates")
    def test_call_needs_torch_to_allocate(self):
        p = make_plan()
        with self.assertRaises(TopkError) as cm:
            p(FakeArray((4, 100)))
        self.assertEqual(cm.exception.code, Code.UNAVAILABLE)
        self.assertIn("torch", cm.exception.message)


class TopkFunctionTest(unittest.TestCase):
    def test_argument_errors_before_the_library(self):
        with self.assertRaises(TopkError) as cm:
            topk_tune.topk(object(), 3)
        self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
        with self.assertRaises(TopkError) as cm:
            topk_tune.topk(FakeArray((2, 3, 4)), 3)
        self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
        with self.assertRaises(TopkError) as cm:
            topk_tune.topk(FakeArray((4, 100)), 3, dim=0)
        self.assertIn("dim=-1", cm.exception.message)


class DTypeTest(unittest.TestCase):
    def test_names(self):
        for names, want in ((("f32", "fp32", "float32", "float", "FP32"), "f32"),
                            (("f16", "fp16", "float16", "half"), "f16"),
                            (("bf16", "bfloat16", "torch.bfloat16"), "bf16")):
            for name in names:
                self.assertEqual(topk_tune.dtype_name(name), want, name)

        class TorchLikeDtype:
            def __str__(self):
                return "torch.float16"

        self.assertEqual(topk_tune.dtype_name(TorchLikeDtype()), "f16")
        for bad in ("f64", "int32", "", "bf8"):
            with self.assertRaises(TopkError) as cm:
                topk_tune.dtype_name(bad)
            self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
            self.assertIn("f32, f16 or bf16", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
