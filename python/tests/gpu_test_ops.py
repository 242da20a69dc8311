#!/usr/bin/env python3
"""torch.ops.topk_tune on a GPU: results against torch.topk (as sets where
unsorted), torch.compile(fullgraph=True) against eager, CUDA graph capture
and replay against eager, the current stream honoured. Run by hand on the
device machine (scripts/device/python-examples.sh runs it too):

    python3 python/tests/gpu_test_ops.py -v

Skips (exit 0) without torch or a GPU.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch

    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    torch = None
    HAVE_GPU = False

import topk_tune  # noqa: E402,F401 (registers torch.ops.topk_tune)

DTYPES = ("float32", "float16", "bfloat16")


def ranged_reference(x, k, starts, ends, largest=True):
    """torch.topk per row over [start, end), padded like the kernels
    (index -1) when the range holds fewer than k elements."""
    vals, idxs = [], []
    for r in range(x.shape[0]):
        s, e = int(starts[r]), int(ends[r])
        s, e = max(s, 0), min(max(e, s), x.shape[1])
        kk = min(k, e - s)
        v, i = torch.topk(x[r, s:e].float(), kk, largest=largest)
        vals.append(v)
        idxs.append(i + s)
    return vals, idxs


@unittest.skipUnless(HAVE_GPU, "needs torch and a GPU")
class OpsTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def assertSameTopk(self, x, k, dim, largest, v, i, sorted_):
        rv, ri = torch.topk(x, k, dim=dim, largest=largest, sorted=True)
        self.assertEqual(i.dtype, torch.int64)
        self.assertEqual(v.dtype, x.dtype)
        self.assertEqual(tuple(v.shape), tuple(rv.shape))
        # The values at the indices are the values returned.
        self.assertTrue(torch.equal(torch.gather(x, dim, i), v))
        if sorted_:
            self.assertTrue(torch.equal(v, rv), "sorted values differ from torch.topk")
        else:
            s = lambda t: t.float().sort(dim=dim).values  # noqa: E731
            self.assertTrue(torch.equal(s(v), s(rv)), "value multisets differ from torch.topk")
        # Distinct indices per row.
        si = i.sort(dim=dim).values
        self.assertFalse(bool((si.diff(dim=dim) == 0).any()) if si.shape[dim] > 1 else False)

    def test_topk_matches_torch(self):
        for dt in DTYPES:
            for shape, k, dim in (((64, 32768), 2048, -1), ((4096, 256), 8, -1), ((3, 131072), 50, 1),
                                  ((1000,), 17, 0), ((2, 300, 7), 20, 1), ((8, 40000), 20000, -1)):
                for largest in (True, False):
                    for sorted_ in (True, False):
                        with self.subTest(dtype=dt, shape=shape, k=k, dim=dim, largest=largest, sorted=sorted_):
                            x = torch.randn(shape, device="cuda").to(getattr(torch, dt))
                            v, i = torch.ops.topk_tune.topk(x, k, dim, largest, sorted_)
                            self.assertSameTopk(x, k, dim, largest, v, i, sorted_)
                            vo = torch.ops.topk_tune.topk_values(x, k, dim, largest, sorted_)
                            if sorted_:
                                self.assertTrue(torch.equal(vo, v))

    def test_edge_cases(self):
        x = torch.randn(4, 100, device="cuda")
        v, i = torch.ops.topk_tune.topk(x, 0)
        self.assertEqual((tuple(v.shape), i.dtype), ((4, 0), torch.int64))
        v, i = torch.ops.topk_tune.topk(torch.empty(4, 0, device="cuda"), 0)
        self.assertEqual(tuple(i.shape), (4, 0))
        v, i = torch.ops.topk_tune.topk(torch.empty(0, 100, device="cuda"), 5)
        self.assertEqual(tuple(i.shape), (0, 5))
        with self.assertRaises(ValueError):
            torch.ops.topk_tune.topk(x, 101)
        with self.assertRaises(RuntimeError):  # as torch.topk raises (TopkError is a RuntimeError)
            torch.ops.topk_tune.topk(x, 101)
        with self.assertRaises(TypeError):
            torch.ops.topk_tune.topk(x.double(), 3)
        with self.assertRaises(TypeError):
            torch.ops.topk_tune.topk_ranged(x, 3, lengths=torch.full((4,), 50, device="cuda"))  # int64
        with self.assertRaises(ValueError):
            torch.ops.topk_tune.topk_ranged(x, 3, lengths=torch.full((4,), 50, dtype=torch.int32))  # host
        # NaN ranks above +inf, as in torch.topk.
        y = torch.tensor([[1.0, float("nan"), float("inf"), -2.0]], device="cuda")
        v, i = torch.ops.topk_tune.topk(y, 2)
        self.assertEqual(i.tolist(), torch.topk(y, 2).indices.tolist())

    def test_ranged_forms(self):
        rows, n, k = 16, 8192, 256
        x = torch.randn(rows, n, device="cuda")
        starts = torch.randint(0, n // 2, (rows,), device="cuda", dtype=torch.int32)
        lengths = torch.randint(0, n // 2, (rows,), device="cuda", dtype=torch.int32)
        lengths[0] = 100  # shorter than k: padded
        ends = starts + lengths
        rg = torch.stack((starts, ends), dim=1)
        a = torch.ops.topk_tune.topk_ranged(x, k, ranges=rg)
        b = torch.ops.topk_tune.topk_ranged(x, k, lengths=lengths, row_starts=starts)
        self.assertTrue(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]))
        rv, ri = ranged_reference(x, k, starts.tolist(), ends.tolist())
        for r in range(rows):
            m = len(rv[r])
            self.assertTrue(torch.equal(a[0][r, :m].float(), rv[r]), f"row {r}")
            self.assertEqual(set(a[1][r, :m].tolist()), set(ri[r].tolist()), f"row {r}")  # randn: no ties
            self.assertTrue(bool((a[1][r, m:] == -1).all()), f"row {r} padding")
        # lengths alone: [0, lengths[i]).
        c = torch.ops.topk_tune.topk_ranged(x, k, lengths=lengths)
        rv, _ = ranged_reference(x, k, [0] * rows, lengths.tolist())
        for r in range(rows):
            self.assertTrue(torch.equal(c[0][r, :len(rv[r])].float(), rv[r]))

    def test_torch_compile_fullgraph(self):
        if not hasattr(torch, "compile"):
            self.skipTest(f"torch {torch.__version__} has no torch.compile")

        def f(x, lengths):
            v, i = torch.ops.topk_tune.topk(x * 2.0, 64)
            rv, ri = torch.ops.topk_tune.topk_ranged(x, 32, lengths=lengths)
            # dim 0 (not last) read by a compiled pointwise op: its layout
            # comes from the Meta kernel's strides.
            return v + 1.0, i, torch.ops.topk_tune.topk_values(x, 8, 0) * 3.0, rv, ri

        x = torch.randn(32, 4096, device="cuda")
        lengths = torch.randint(1, 4096, (32,), device="cuda", dtype=torch.int32)
        eager = f(x, lengths)
        compiled = torch.compile(f, fullgraph=True)(x, lengths)
        for e, c in zip(eager, compiled):
            self.assertTrue(torch.equal(e, c))

    def test_cuda_graph_capture_and_replay(self):
        x = torch.randn(64, 32768, device="cuda")
        lengths = torch.full((64,), 30000, device="cuda", dtype=torch.int32)

        def f():
            return (torch.ops.topk_tune.topk(x, 2048, sorted=False),
                    torch.ops.topk_tune.topk_ranged(x, 2048, lengths=lengths, sorted=False))

        # Warm up on a side stream (plans, kernels, the allocator), as torch
        # documents for capture.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            f()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = f()
        x.copy_(torch.randn_like(x))
        lengths.fill_(20000)
        g.replay()
        torch.cuda.synchronize()
        eager = f()
        # Unsorted output lists the top k in an order that may differ between
        # two launches: compare each row as a set (sorted by index).
        for (gv, gi), (ev, ei) in zip(out, eager):
            go, eo = gi.sort(dim=-1), ei.sort(dim=-1)
            self.assertTrue(torch.equal(go.values, eo.values))
            self.assertTrue(torch.equal(gv.gather(-1, go.indices), ev.gather(-1, eo.indices)))

    def test_current_stream_is_honoured(self):
        # A long producer on a side stream, the op on the same stream: without
        # stream ordering it would read x before the producer finished.
        s = torch.cuda.Stream()
        x = torch.zeros(256, 65536, device="cuda")
        base = torch.randn(256, 65536, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)  # ~tens of ms of spinning first
            x.copy_(base)
            v, i = torch.ops.topk_tune.topk(x, 100)
        s.synchronize()
        rv, _ = torch.topk(base, 100)
        self.assertTrue(torch.equal(v, rv))


if __name__ == "__main__":
    unittest.main()
