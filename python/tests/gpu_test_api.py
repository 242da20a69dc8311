#!/usr/bin/env python3
"""The Python package with torch on a GPU: entry points, streams, CUDA
graph capture, __cuda_array_interface__ inputs, errors from the C API,
threads. Run by hand on the device machine:

    python3 python/tests/gpu_test_api.py -v

Skips (exit 0) without torch or a GPU.
"""
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch

    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    torch = None
    HAVE_GPU = False

import topk_tune  # noqa: E402

Code = topk_tune.Code
TopkError = topk_tune.TopkError


def same_values(x, idx, k, largest=True):
    """x's top-k value multiset equals the one at idx, per row."""
    ref = torch.topk(x.float(), k, dim=-1, largest=largest).values.sort(dim=-1).values
    got = torch.gather(x.float(), -1, idx.long()).sort(dim=-1).values
    return torch.equal(ref, got)


def lowest_index_tie_mask(x, k, largest=True):
    """[rows, n] bool: the elements a deterministic top-k takes, computed on
    the host: those strictly better than the k-th value, then the lowest
    indices equal to it up to k."""
    x = x.float().cpu()
    kth = torch.topk(x, k, dim=-1, largest=largest).values[:, -1:]
    better = x > kth if largest else x < kth
    ties = x == kth
    need = k - better.sum(dim=-1, keepdim=True)
    return better | (ties & (ties.int().cumsum(dim=-1) <= need))


def index_mask(idx, n):
    """[rows, n] bool of the indices in idx (int32 / int64 [rows, k])."""
    idx = idx.long().cpu()
    m = torch.zeros(idx.shape[0], n, dtype=torch.bool)
    return m.scatter_(1, idx, True)


class CaiOnly:
    """Exposes a tensor through __cuda_array_interface__ alone."""

    def __init__(self, t):
        self.t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


@unittest.skipUnless(HAVE_GPU, "needs torch and a GPU")
class ApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="topk_api_")
        cls.lib = topk_tune.Library(cache_path=os.path.join(cls.tmp, "tuning.db"))

    def test_library(self):
        self.assertEqual(self.lib.device, torch.cuda.current_device())
        self.assertIn("sm_", self.lib.device_description)
        self.assertEqual(self.lib.warnings, "")
        self.assertIn("Library cuda:0", repr(self.lib))

    def test_plan_call_and_attributes(self):
        x = torch.randn(128, 32768, device="cuda")
        plan = self.lib.plan("f32", 128, 32768, 2048)
        self.assertEqual(plan.dispatch, "default")
        self.assertTrue(plan.variant.startswith("filter_f32"), plan.variant)  # the default for many long rows
        self.assertEqual(plan.tuned_shape, "")
        self.assertGreater(plan.plan_ms, 0)
        self.assertEqual(plan.workspace_bytes, 0)  # an ordinary shape: no global scratch
        self.assertIn("128x32768 k=2048", repr(plan))
        idx = plan(x)
        self.assertEqual((idx.shape, idx.dtype, idx.device), ((128, 2048), torch.int32, x.device))
        self.assertTrue(same_values(x, idx, 2048))
        # Fewer rows than planned.
        idx = plan(x[:5])
        self.assertEqual(idx.shape, (5, 2048))
        self.assertTrue(same_values(x[:5], idx, 2048))

    def test_values_and_dtypes(self):
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            x = torch.randn(8, 5000, device="cuda").to(dt)
            plan = self.lib.plan(dt, 8, 5000, 100, values=True, sorted=True, largest=False)
            val, idx = plan(x)
            self.assertEqual(plan(x).values.dtype, dt)
            self.assertEqual(val.dtype, dt)
            self.assertTrue(torch.equal(val, torch.gather(x, 1, idx.long())))
            self.assertTrue(torch.equal(val.float(), torch.topk(x.float(), 100, largest=False).values))

    def test_ranges_and_padding(self):
        x = torch.randn(3, 1000, device="cuda")
        rg = torch.tensor([[0, 1000], [10, 15], [900, 5000]], dtype=torch.int32, device="cuda")
        plan = self.lib.plan("f32", 3, 1000, 8, ranges=True)
        idx = plan(x, ranges=rg)
        self.assertTrue(same_values(x[:1], idx[:1], 8))
        self.assertEqual(int((idx[1] == -1).sum()), 3)
        self.assertTrue(((idx[1] >= 10) & (idx[1] < 15) | (idx[1] == -1)).all())
        self.assertTrue(((idx[2] >= 900) & (idx[2] < 1000)).all())

    def test_lengths_and_row_starts(self):
        x = torch.randn(4, 1000, device="cuda")
        ln = torch.tensor([1000, 5, 0, 300], dtype=torch.int32, device="cuda")
        st = torch.tensor([0, 10, 7, 900], dtype=torch.int32, device="cuda")
        want = torch.stack([st, st + ln], dim=1)
        for starts, rg in ((None, torch.stack([torch.zeros_like(ln), ln], dim=1)), (st, want)):
            ref = topk_tune.topk(x, 8, ranges=rg, library=self.lib)
            got = topk_tune.topk(x, 8, lengths=ln, row_starts=starts, library=self.lib)
            self.assertTrue(torch.equal(got.indices.sort(-1).values, ref.indices.sort(-1).values))
            plan = self.lib.plan("f32", 4, 1000, 8, ranges=True)
            self.assertTrue(torch.equal(plan(x, lengths=ln, row_starts=starts).sort(-1).values,
                                        ref.indices.sort(-1).values))
        # Leading dimensions: lengths per row, flat or in their shape.
        x3 = x.reshape(2, 2, 1000)
        a = topk_tune.topk(x3, 8, lengths=ln, library=self.lib)
        b = topk_tune.topk(x3, 8, lengths=ln.reshape(2, 2), library=self.lib)
        # Unsorted results may list the same set in another order.
        self.assertTrue(torch.equal(a.indices.sort(-1).values, b.indices.sort(-1).values))
        self.assertEqual(tuple(a.indices.shape), (2, 2, 8))

        def error(fn):
            with self.assertRaises(TopkError) as cm:
                fn()
            return cm.exception

        e = error(lambda: topk_tune.topk(x, 8, lengths=ln.long(), library=self.lib))
        self.assertIsInstance(e, TypeError)
        self.assertIn("lengths must be int32", e.message)
        e = error(lambda: topk_tune.topk(x, 8, lengths=ln.cpu(), library=self.lib))
        self.assertIsInstance(e, ValueError)
        self.assertIn("lengths is on cpu", e.message)
        e = error(lambda: topk_tune.topk(x, 8, lengths=ln[:3], library=self.lib))
        self.assertIn("lengths must be [4]", e.message)
        e = error(lambda: topk_tune.topk(x, 8, lengths=ln, row_starts=st.long(), library=self.lib))
        self.assertIn("row_starts must be int32", e.message)

    def test_out(self):
        x = torch.randn(6, 3000, device="cuda")
        ref = torch.topk(x, 50, sorted=True)
        v = torch.empty(6, 50, device="cuda")
        i = torch.empty(6, 50, dtype=torch.int32, device="cuda")
        res = topk_tune.topk(x, 50, sorted=True, out=(v, i), library=self.lib)
        self.assertIs(res.values, v)
        self.assertIs(res.indices, i)
        self.assertTrue(torch.equal(v, ref.values))
        # int64 indices, another dim, values=False.
        i64 = torch.empty(6, 50, dtype=torch.int64, device="cuda")
        res = topk_tune.topk(x, 50, sorted=True, out=(v, i64), library=self.lib)
        self.assertIs(res.indices, i64)
        self.assertTrue(torch.equal(torch.gather(x, 1, i64), ref.values))
        ct = x.t().contiguous()  # [3000, 6]: top-k along dim 0
        vd = torch.empty(50, 6, device="cuda")
        idd = torch.empty(50, 6, dtype=torch.int32, device="cuda")
        topk_tune.topk(ct, 50, dim=0, sorted=True, out=(vd, idd), library=self.lib)
        self.assertTrue(torch.equal(vd, ref.values.t()))
        i2 = torch.empty(6, 50, dtype=torch.int32, device="cuda")
        res = topk_tune.topk(x, 50, values=False, out=(None, i2), library=self.lib)
        self.assertIsNone(res.values)
        self.assertIs(res.indices, i2)

        def error(out, **kw):
            with self.assertRaises(TopkError) as cm:
                topk_tune.topk(x, 50, out=out, library=self.lib, **kw)
            return cm.exception

        cases = [
            ((v, i.long()), {"index_dtype": torch.int32}, TypeError, "index_dtype"),
            ((v.half(), i), {}, TypeError, "out[0] (values) must be torch.float32"),
            ((v, i.float()), {}, TypeError, "out[1] (indices) must be torch.int32 or torch.int64"),
            ((v[:5], i), {}, ValueError, "out[0] (values) must have shape [6, 50]"),
            ((v, i[:, :49]), {}, ValueError, "out[1] (indices) must have shape [6, 50]"),
            ((v.cpu(), i), {}, ValueError, "out[0] (values) is on cpu"),
            ((i, v), {}, TypeError, "out[0] (values) must be torch.float32"),
            (v, {}, TypeError, "out must be a pair"),
        ]
        for out, kw, exc, needle in cases:
            with self.subTest(needle=needle):
                e = error(out, **kw)
                self.assertIsInstance(e, exc)
                self.assertIn(needle, e.message)

    def test_graph_capture_uses_the_current_stream(self):
        x = torch.randn(16, 8192, device="cuda")
        plan = self.lib.plan("f32", 16, 8192, 256, values=True)
        outs = plan.allocate_outputs()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            plan.run_into(x, outs)  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # a launch on any other stream would break the capture
            plan.run_into(x, outs)
        x.copy_(torch.randn(16, 8192, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        self.assertTrue(same_values(x, outs.indices, 256))
        self.assertTrue(torch.equal(outs.values, torch.gather(x, 1, outs.indices.long())))

    def test_graph_replay_matches_eager_runs(self):
        # One graph holding a warp-per-row plan and two cluster-per-row plans
        # (the defaults for these shapes; with ranges and values), replayed on
        # fresh inputs copied into the captured tensors: each replay's outputs
        # equal an eager run's.
        shapes = [("f32", 512, 256, 8, False), ("bf16", 24, 40000, 700, True), ("f32", 1, 300000, 2048, True)]
        cases = []
        for dt, b, n, k, ranges in shapes:
            plan = self.lib.plan(dt, b, n, k, ranges=ranges, values=True)
            x = torch.randn(b, n, device="cuda").to(getattr(torch, {"f32": "float32", "bf16": "bfloat16"}[dt]))
            rg = None
            if ranges:
                lo = torch.randint(0, n // 4, (b,), device="cuda", dtype=torch.int32)
                rg = torch.stack([lo, torch.full_like(lo, n)], dim=1).contiguous()
            cases.append((plan, x, rg, plan.allocate_outputs(), k))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for plan, x, rg, outs, _ in cases:
                plan.run_into(x, outs, ranges=rg)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for plan, x, rg, outs, _ in cases:
                plan.run_into(x, outs, ranges=rg)
        for trial in range(5):
            for _, x, _, _, _ in cases:
                x.copy_(torch.randn(x.shape, device="cuda").to(x.dtype))
            g.replay()
            torch.cuda.synchronize()
            for plan, x, rg, outs, k in cases:
                vals, idx = plan(x, ranges=rg)
                with self.subTest(trial=trial, plan=plan.variant):
                    # Same values as the eager run; indices too where there
                    # are no ties (bf16 rows have many, and either is right).
                    self.assertTrue(torch.equal(outs.values.float().sort(dim=-1).values,
                                                vals.float().sort(dim=-1).values))
                    self.assertTrue(torch.equal(outs.values, torch.gather(x, 1, outs.indices.long())))
                    if x.dtype == torch.float32:
                        self.assertTrue(torch.equal(outs.indices.sort(dim=-1).values, idx.sort(dim=-1).values))
                    if rg is None:
                        self.assertTrue(same_values(x, outs.indices, k))
                    else:
                        self.assertTrue((outs.indices >= rg[:, :1]).all())

    def test_side_stream(self):
        x = torch.randn(32, 20000, device="cuda")
        plan = self.lib.plan("f32", 32, 20000, 500)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            idx = plan(x)
        s.synchronize()
        self.assertTrue(same_values(x, idx, 500))
        # An explicit stream handle.
        outs = plan.allocate_outputs()
        torch.cuda.synchronize()
        plan.run_into(x, outs, stream=s)
        s.synchronize()
        self.assertTrue(same_values(x, outs, 500))

    def test_explicit_stream_runs_every_step_on_it(self):
        # stream=s: the input's copy (dim=0 moves it), the ranges from
        # lengths, the outputs and the int64 conversion run on s with the
        # launch. The current stream is held busy meanwhile: work left on it
        # would run after the kernel on s had read or written garbage.
        s = torch.cuda.Stream()
        x = torch.randn(20000, 32, device="cuda")
        lengths = torch.full((32,), 15000, dtype=torch.int32, device="cuda")
        ref_idx = torch.topk(x[:15000], 300, dim=0).indices
        s.wait_stream(torch.cuda.current_stream())
        for _ in range(3):
            torch.cuda._sleep(20_000_000)  # about 10 ms of the current stream
            vals, idx = topk_tune.topk(x, 300, dim=0, lengths=lengths, index_dtype=torch.int64, stream=s)
            s.synchronize()
            self.assertEqual(idx.dtype, torch.int64)
            self.assertEqual(tuple(idx.shape), (300, 32))
            self.assertTrue(torch.equal(idx.sort(dim=0).values.cpu(), ref_idx.sort(dim=0).values.cpu()))
            torch.cuda.synchronize()
        plan = self.lib.plan("f32", 32, 20000, 300, ranges=True)
        xt = x.t().contiguous()
        torch.cuda.synchronize()
        torch.cuda._sleep(20_000_000)
        out = plan(xt, lengths=lengths, stream=s)
        s.synchronize()
        self.assertTrue(torch.equal(out.sort(dim=1).values.cpu(), ref_idx.t().sort(dim=1).values.int().cpu()))
        torch.cuda.synchronize()

    def test_a_plan_collected_while_the_library_holds_its_lock(self):
        # A dead plan in a reference cycle, finalised by a collection that
        # runs while the library holds its lock on the same thread (as one
        # triggered by an allocation inside Library.plan): no deadlock. Run
        # in a thread, so that a deadlock fails the test instead of hanging it.
        import gc  # noqa: PLC0415

        lib = topk_tune.Library(cache_path="")
        done = []

        def body():
            p = lib.plan("f32", 2, 100, 3)
            p.me = p  # a cycle: only the collector frees it
            del p
            with lib._lock:
                gc.collect()
            done.append(lib.plan("f32", 2, 100, 4).k)

        t = threading.Thread(target=body, daemon=True)
        t.start()
        t.join(30)
        deadlocked = t.is_alive()
        if not deadlocked:
            lib.close()
        self.assertFalse(deadlocked, "deadlock: a plan's finaliser waited for the lock its own thread held")
        self.assertEqual(done, [4])

    def test_workspace_per_stream(self):
        # The call path of plans with a workspace, on a plan given one here
        # (the kernel ignores it): a zeroed workspace from torch per stream,
        # made on the first eager call there and reused, none for a graph
        # capture (the plan's own), and the results unchanged.
        from topk_tune import _library  # noqa: PLC0415

        x = torch.randn(8, 20000, device="cuda")
        plan = self.lib.plan("f32", 8, 20000, 100)
        plan._workspaces = _library._Workspaces(4096, plan.library.device)
        self.assertTrue(same_values(x, plan(x), 100))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.assertTrue(same_values(x, plan(x), 100))
            self.assertTrue(same_values(x, plan(x), 100))
        torch.cuda.synchronize()
        self.assertEqual(len(plan._workspaces), 2)
        for stream, ws in plan._workspaces._by_stream.items():
            self.assertEqual((ws.dtype, ws.numel(), ws.device), (torch.uint8, 4096, x.device))
            self.assertEqual(int(ws.count_nonzero()), 0)
            self.assertEqual(ws.data_ptr() % 16, 0)
        outs = plan.allocate_outputs()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            capture = torch.cuda.current_stream().cuda_stream
            plan.run_into(x, outs)
        g.replay()
        torch.cuda.synchronize()
        self.assertTrue(same_values(x, outs, 100))
        self.assertNotIn(capture, plan._workspaces._by_stream)

    def test_grid_plan_eager_on_two_streams_and_in_a_graph(self):
        # One long row: the grid family's default, whose plan needs a
        # workspace. Eager calls on two streams, then a captured graph
        # replayed three times (the plan's own workspace), then eager again
        # on the capture's stream: exact every time.
        x = torch.randn(1, 524288, device="cuda")
        plan = self.lib.plan("f32", 1, 524288, 2048)
        self.assertGreater(plan.workspace_bytes, 0, plan.variant)
        self.assertTrue(plan.variant.startswith("grid_"), plan.variant)
        self.assertTrue(same_values(x, plan(x), 2048))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.assertTrue(same_values(x, plan(x), 2048))
        torch.cuda.synchronize()
        outs = plan.allocate_outputs()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            capture = torch.cuda.current_stream().cuda_stream
            plan.run_into(x, outs)
        self.assertNotIn(capture, plan._workspaces._by_stream)
        for _ in range(3):
            outs[0].fill_(-7)
            g.replay()
            torch.cuda.synchronize()
            self.assertTrue(same_values(x, outs, 2048))
        with torch.cuda.stream(torch.cuda.ExternalStream(capture)):
            self.assertTrue(same_values(x, plan(x), 2048))
        torch.cuda.synchronize()

    def test_programmatic_launches_wait_for_the_kernel_before(self):
        # A captured graph of eight chained pairs of plans, each pair's second
        # plan reading the values the first just wrote, on inputs that change
        # every pair, so that the graph's top-k kernels follow each other:
        # the second plan must not read before the first finished, and the
        # next pair's first plan must not overwrite those values before the
        # second finished reading them. Both launch modes; a grid plan (its
        # workspace) and a many-row plan first.
        long_rows = [torch.randn(1, 524288, device="cuda") for _ in range(3)]
        wide = [torch.randn(64, 4096, device="cuda") for _ in range(3)]
        plain_lib = topk_tune.Library(cache_path="", programmatic_launch=False)
        try:
            for lib in (self.lib, plain_lib):
                for inputs, k, k2 in ((long_rows, 2048, 64), (wide, 128, 16)):
                    rows, n = inputs[0].shape
                    first = lib.plan("f32", rows, n, k, values=True)
                    second = lib.plan("f32", rows, k, k2, values=True)
                    mid = first.allocate_outputs()
                    outs = [second.allocate_outputs() for _ in range(8)]
                    first.run_into(inputs[0], mid)  # lazy set-up outside the capture
                    second.run_into(mid.values, outs[0])
                    torch.cuda.synchronize()
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        for i in range(8):
                            first.run_into(inputs[i % 3], mid)
                            second.run_into(mid.values, outs[i])
                    for _ in range(2):
                        for o in outs:
                            o.values.fill_(-7)
                        g.replay()
                        torch.cuda.synchronize()
                        for i in range(8):
                            want = torch.topk(inputs[i % 3], k2, dim=-1).values.sort(dim=-1).values
                            got = outs[i].values.sort(dim=-1).values
                            self.assertTrue(torch.equal(want, got), (lib is plain_lib, first.variant, i))
        finally:
            plain_lib.close()

    def test_topk_function(self):
        x = torch.randn(4, 6, 3000, device="cuda", dtype=torch.bfloat16)
        v, i = topk_tune.topk(x, 10, library=self.lib, sorted=True)
        rv, ri = torch.topk(x, 10, sorted=True)
        self.assertEqual((v.shape, i.shape, i.dtype), (rv.shape, ri.shape, torch.int32))
        self.assertTrue(torch.equal(v, rv))
        # Another dim, int64 indices, without values.
        y = torch.randn(3000, 5, device="cuda")
        v, i = topk_tune.topk(y, 7, dim=0, values=False, index_dtype=torch.int64, library=self.lib)
        self.assertIsNone(v)
        self.assertEqual((i.shape, i.dtype), ((7, 5), torch.int64))
        self.assertTrue(torch.equal(torch.gather(y, 0, i).sort(0).values, torch.topk(y, 7, dim=0).values.sort(0).values))
        # 1-D, the default library, a strided view.
        z = torch.randn(10000, device="cuda")
        v, i = topk_tune.topk(z, 5)
        self.assertEqual(i.shape, (5,))
        self.assertTrue(torch.equal(v.sort().values, torch.topk(z, 5).values.sort().values))
        w = torch.randn(6, 4096, device="cuda")[:, :4000]
        v, i = topk_tune.topk(w, 33, library=self.lib)
        self.assertTrue(same_values(w, i, 33))
        # k > n pads.
        v, i = topk_tune.topk(torch.randn(2, 5, device="cuda"), 8, library=self.lib)
        self.assertEqual(int((i == -1).sum()), 6)

    def tie_inputs(self):
        g = torch.Generator(device="cuda").manual_seed(7)
        yield "randint(0, 4)", torch.randint(0, 4, (8, 5000), device="cuda", generator=g).float(), 100
        yield "all zero", torch.zeros(4, 3000, device="cuda"), 37
        plateau = torch.randn(6, 4096, device="cuda", generator=g)
        plateau[:, 1000:3000] = 0.5  # a plateau holding the k-th value
        plateau[:, :1000] = plateau[:, :1000].clamp(max=0.4)
        yield "plateau", plateau, 300

    def test_deterministic_ties_take_the_lowest_indices(self):
        for what, x, k in self.tie_inputs():
            for dt in (torch.float32, torch.float16, torch.bfloat16):
                for largest in (True, False):
                    with self.subTest(input=what, dtype=dt, largest=largest):
                        xd = x.to(dt)
                        want = lowest_index_tie_mask(xd, k, largest)
                        first = None
                        for _ in range(20):
                            v, i = topk_tune.topk(xd, k, largest=largest, deterministic=True)
                            got = i.long().sort(dim=-1).values
                            if first is None:
                                first = got
                                self.assertTrue(torch.equal(index_mask(i, xd.shape[-1]), want))
                                self.assertTrue(torch.equal(torch.gather(xd, -1, i.long()), v))
                            self.assertTrue(torch.equal(got, first))
                        # sorted=True: one output, tensor for tensor.
                        ref = topk_tune.topk(xd, k, largest=largest, sorted=True, deterministic=True)
                        self.assertTrue(torch.equal(index_mask(ref.indices, xd.shape[-1]), want))
                        for _ in range(20):
                            out = topk_tune.topk(xd, k, largest=largest, sorted=True, deterministic=True)
                            self.assertTrue(torch.equal(out.values, ref.values))
                            self.assertTrue(torch.equal(out.indices, ref.indices))

    def test_deterministic_plan(self):
        x = torch.randint(0, 4, (8, 5000), device="cuda").float()
        plan = self.lib.plan("f32", 8, 5000, 100, deterministic=True, values=True)
        plain = self.lib.plan("f32", 8, 5000, 100, values=True)
        self.assertTrue(plan.deterministic)
        self.assertTrue(plan.problem["deterministic"])
        self.assertIn("deterministic", repr(plan))
        self.assertEqual(plan.variant, plain.variant)  # the tie pass follows whichever kernel dispatch picks
        want = lowest_index_tie_mask(x, 100)
        for _ in range(20):
            v, i = plan(x)
            self.assertTrue(torch.equal(index_mask(i, 5000), want))
        like = self.lib.plan_like(x, 100, deterministic=True)
        self.assertTrue(like.deterministic)
        self.assertTrue(torch.equal(index_mask(like(x), 5000), want))

    def test_deterministic_ops(self):
        x = torch.randint(0, 4, (8, 5000), device="cuda").float()
        want = lowest_index_tie_mask(x, 100)
        ref = torch.ops.topk_tune.topk(x, 100, deterministic=True)
        self.assertTrue(torch.equal(index_mask(ref[1], 5000), want))
        for _ in range(20):
            v, i = torch.ops.topk_tune.topk(x, 100, deterministic=True)
            self.assertTrue(torch.equal(v, ref[0]) and torch.equal(i, ref[1]))
            self.assertTrue(torch.equal(torch.ops.topk_tune.topk_values(x, 100, deterministic=True), ref[0]))
        ln = torch.full((8,), 5000, dtype=torch.int32, device="cuda")
        v, i = torch.ops.topk_tune.topk_ranged(x, 100, lengths=ln, deterministic=True)
        self.assertTrue(torch.equal(i, ref[1]))
        # None follows torch.use_deterministic_algorithms.
        was = torch.are_deterministic_algorithms_enabled()
        try:
            torch.use_deterministic_algorithms(True)
            v, i = torch.ops.topk_tune.topk(x, 100)
            self.assertTrue(torch.equal(i, ref[1]))
            v, i = topk_tune.topk(x, 100, sorted=True, index_dtype=torch.int64)
            self.assertTrue(torch.equal(i, ref[1]))
        finally:
            torch.use_deterministic_algorithms(was)
        # k above the kernels' sorting limit: sorted with torch, ties by index.
        from topk_tune._ops import MAX_SORTED_K  # noqa: PLC0415

        k = MAX_SORTED_K + 1000
        big = torch.randint(0, 4, (2, 3 * k), device="cuda").float()
        want = lowest_index_tie_mask(big, k)
        ref = torch.ops.topk_tune.topk(big, k, deterministic=True)
        self.assertTrue(torch.equal(index_mask(ref[1], 3 * k), want))
        key = ref[0].double() * (8 * k) - ref[1].double()  # value descending, then index ascending
        self.assertTrue(bool((key[:, :-1] > key[:, 1:]).all()))
        for _ in range(5):
            v, i = torch.ops.topk_tune.topk(big, k, deterministic=True)
            self.assertTrue(torch.equal(v, ref[0]) and torch.equal(i, ref[1]))

    def test_cuda_array_interface_input(self):
        x = torch.randn(8, 3000, device="cuda")
        plan = self.lib.plan("f32", 8, 3000, 40)
        idx = plan(CaiOnly(x))
        torch.cuda.synchronize()
        self.assertTrue(same_values(x, idx, 40))
        out = torch.empty(8, 40, dtype=torch.int32, device="cuda")
        plan.run_into(CaiOnly(x), CaiOnly(out))
        torch.cuda.synchronize()
        self.assertTrue(same_values(x, out, 40))

    def test_errors(self):
        def code_of(fn):
            with self.assertRaises(TopkError) as cm:
                fn()
            return cm.exception.code, cm.exception.message

        plan = self.lib.plan("f32", 4, 1000, 10)
        x = torch.randn(4, 1000, device="cuda")
        c, m = code_of(lambda: self.lib.plan("f32", 4, 1000, -1))
        self.assertEqual(c, Code.INVALID_ARGUMENT)
        self.assertIn("k must be >= 0", m)
        c, m = code_of(lambda: self.lib.plan("f32", 4, 1000, 10, row_stride=999))
        self.assertIn("smaller than n", m)
        c, m = code_of(lambda: self.lib.plan("f32", 4, 100000, 20000, sorted=True))
        self.assertEqual(c, Code.UNIMPLEMENTED)
        self.assertIn("not on a CUDA device", code_of(lambda: plan(x.cpu()))[1])
        self.assertIn("input dtype is f16", code_of(lambda: plan(x.half()))[1])
        self.assertIn("float64", code_of(lambda: plan(x.double()))[1])
        self.assertIn("contiguous", code_of(lambda: plan(torch.randn(1000, 4, device="cuda").t()))[1])
        rplan = self.lib.plan("f32", 4, 1000, 10, ranges=True)
        self.assertIn("int32", code_of(lambda: rplan(x, ranges=torch.zeros(4, 2, dtype=torch.int64,
                                                                          device="cuda")))[1])
        self.assertIn("exceeds the planned batch",
                      code_of(lambda: plan(torch.randn(5, 1000, device="cuda")))[1])

    def test_close(self):
        lib = topk_tune.Library(cache_path="")
        plan = lib.plan("f32", 2, 100, 3)
        x = torch.randn(2, 100, device="cuda")
        self.assertEqual(plan(x).shape, (2, 3))
        lib.close()
        with self.assertRaises(TopkError) as cm:
            plan(x)
        self.assertIn("plan is NULL", cm.exception.message)
        with self.assertRaises(TopkError):
            lib.plan("f32", 2, 100, 3)
        plan.close()  # after its library: nothing left to destroy
        with topk_tune.Library(cache_path="") as lib2:
            self.assertEqual(lib2.plan("f16", 1, 10, 2).k, 2)

    def test_garbage_cycles(self):
        # A library and its plans in one reference cycle: the collector may
        # finalise them in any order; the plans' handles still go first.
        import gc  # noqa: PLC0415

        for _ in range(3):
            lib = topk_tune.Library(cache_path="")
            lib.plans = [lib.plan("f32", 2, 100, 3), lib.plan("f32", 2, 100, 4)]
            x = torch.randn(2, 100, device="cuda")
            self.assertEqual(lib.plans[1](x).shape, (2, 4))
            del lib, x
            gc.collect()

    def test_threads(self):
        plan = self.lib.plan("f32", 16, 30000, 300)
        errors = []

        def work(seed):
            try:
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    for j in range(20):
                        x = torch.randn(16, 30000, device="cuda", generator=torch.Generator("cuda").manual_seed(
                            seed * 100 + j))
                        idx = plan(x)
                        if not same_values(x, idx, 300):
                            errors.append(f"thread {seed} iteration {j}")
                s.synchronize()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])


if __name__ == "__main__":
    unittest.main()
