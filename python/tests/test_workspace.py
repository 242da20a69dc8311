"""Plans with a global workspace (workspace_bytes > 0), without a GPU: the
ctypes declarations of the C API's workspace functions, the per-stream
workspace cache (one per stream, made once, reused), the stream the
workspace is zeroed on (with a stand-in for torch), and the run path that
passes it to topk_plan_run_workspace."""
import ctypes
import os
import re
import threading
import unittest

from support import FakeArray, make_plan, topk_tune
from topk_tune import _arrays, _capi, _library

Code = topk_tune.Code
TopkError = topk_tune.TopkError
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "topk", "topk.h")


BASE = 0x7E0000000000


class Buffer:
    """What an allocator returns: an object with data_ptr()."""

    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


class CountingAllocator:
    """allocate(nbytes, device, stream) for _Workspaces: a new 16-byte
    aligned address per call, every call recorded."""

    def __init__(self):
        self.calls = []
        self._lock = threading.Lock()

    def __call__(self, nbytes, device, stream):
        with self._lock:
            self.calls.append((nbytes, device, stream))
            return Buffer(BASE + 0x1000 * len(self.calls))


def NOT_CAPTURING(stream, device):
    return False


def workspace_plan(nbytes=4096, allocate=None, **problem):
    """make_plan's handle-less plan, given a workspace of `nbytes` as if the
    C API had reported one."""
    plan = make_plan(**problem)
    plan.workspace_bytes = nbytes
    plan._workspaces = _library._Workspaces(nbytes, plan.library.device, allocate, NOT_CAPTURING)
    return plan


class SignatureTest(unittest.TestCase):
    def test_declared_types(self):
        dll = _capi.capi()
        run = dll.topk_plan_run_workspace
        self.assertEqual(run.restype, ctypes.c_int)
        # plan, input, ranges, indices, values, batch, workspace, stream, err
        self.assertEqual(len(run.argtypes), 9)
        self.assertIs(run.argtypes[5], ctypes.c_int64)
        self.assertIs(run.argtypes[6], ctypes.c_void_p)
        self.assertIs(run.argtypes[7], ctypes.c_void_p)
        self.assertIs(dll.topk_plan_workspace_bytes.restype, ctypes.c_size_t)
        self.assertEqual(dll.topk_plan_workspace_bytes.argtypes, [ctypes.c_void_p])

    @unittest.skipUnless(os.path.isfile(HEADER), "no include/topk/topk.h beside python/ (not a source tree)")
    def test_parameter_counts_match_the_header(self):
        # Every function the bindings declare, against its prototype in
        # topk.h: a parameter added on one side only would shift the others.
        with open(HEADER) as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        for name, (_, args) in _capi._SIGNATURES.items():
            m = re.search(r"\b" + name + r"\(([^)]*)\);", text)
            self.assertIsNotNone(m, f"{name} is not declared in topk.h")
            params = [p for p in m.group(1).split(",") if p.strip() not in ("", "void")]
            self.assertEqual(len(params), len(args), name)

    def test_null_plan(self):
        dll = _capi.capi()
        self.assertEqual(dll.topk_plan_workspace_bytes(None), 0)
        err = ctypes.c_void_p()
        code = dll.topk_plan_run_workspace(None, None, None, None, None, -1, 0x1000, None, ctypes.byref(err))
        with self.assertRaises(TopkError) as cm:
            _capi.check(code, err)
        self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
        self.assertEqual(cm.exception.message, "invalid_argument: topk_plan_run_workspace: plan is NULL")


class WorkspaceCacheTest(unittest.TestCase):
    def test_one_per_stream_made_once(self):
        alloc = CountingAllocator()
        ws = _library._Workspaces(4096, 3, alloc, NOT_CAPTURING)
        a = ws.pointer(0)
        b = ws.pointer(0x1234)
        self.assertNotEqual(a, b, "two streams share a workspace")
        for _ in range(5):
            self.assertEqual(ws.pointer(0), a)
            self.assertEqual(ws.pointer(0x1234), b)
        self.assertEqual(alloc.calls, [(4096, 3, 0), (4096, 3, 0x1234)])
        self.assertEqual(len(ws), 2)

    def test_a_capture_takes_the_plans_own_and_caches_nothing(self):
        alloc = CountingAllocator()
        capturing = {0x9: True}
        ws = _library._Workspaces(512, 1, alloc, lambda stream, device: capturing.get(stream, False))
        self.assertEqual(ws.pointer(0x9), 0)  # captured: the plan's own, zeroed at plan time
        self.assertEqual(alloc.calls, [])
        self.assertEqual(len(ws), 0)
        capturing[0x9] = False  # the same stream after its capture: a workspace of its own, zeroed eagerly
        a = ws.pointer(0x9)
        self.assertNotEqual(a, 0)
        self.assertEqual(alloc.calls, [(512, 1, 0x9)])
        capturing[0x9] = True
        self.assertEqual(ws.pointer(0x9), 0)
        capturing[0x9] = False
        self.assertEqual(ws.pointer(0x9), a)

    def test_no_torch_means_the_plans_own(self):
        ws = _library._Workspaces(64, 0, lambda nbytes, device, stream: None, NOT_CAPTURING)
        self.assertEqual(ws.pointer(7), 0)
        self.assertEqual(len(ws), 1)  # not asked again

    def test_threads_on_one_stream_get_one_workspace(self):
        alloc = CountingAllocator()
        ws = _library._Workspaces(256, 0, alloc, NOT_CAPTURING)
        start = threading.Barrier(8)
        got = []

        def worker():
            start.wait()
            got.append(ws.pointer(0x42))

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(alloc.calls), 1)
        self.assertEqual(len(set(got)), 1)

    def test_the_per_thread_default_stream_gets_one_workspace_a_thread(self):
        # Handle 2 (CU_STREAM_PER_THREAD) is another stream in each thread:
        # two threads must not share its workspace; one thread reuses its own.
        alloc = CountingAllocator()
        ws = _library._Workspaces(256, 0, alloc, NOT_CAPTURING)
        mine = ws.pointer(2)
        self.assertEqual(ws.pointer(2), mine)
        got = []
        t = threading.Thread(target=lambda: got.extend([ws.pointer(2), ws.pointer(2)]))
        t.start()
        t.join()
        self.assertEqual(got[0], got[1])
        self.assertNotEqual(got[0], mine, "two threads share the per-thread default stream's workspace")
        self.assertEqual(alloc.calls, [(256, 0, 2), (256, 0, 2)])
        # Other handles stay one workspace for every thread.
        other = ws.pointer(0x42)
        t = threading.Thread(target=lambda: got.append(ws.pointer(0x42)))
        t.start()
        t.join()
        self.assertEqual(got[-1], other)


class FakeTorch:
    """The parts of torch that _zeroed_workspace uses, recording on which
    stream each zeros() ran."""

    uint8 = "uint8"

    def __init__(self, current=0x99):
        self.log = []
        self.stream_now = None
        torch = self

        class Stream:
            def __init__(self, handle, kind):
                self.cuda_stream, self.kind = handle, kind

        class Cuda:
            @staticmethod
            def current_stream(device):
                return Stream(current, "current")

            @staticmethod
            def default_stream(device):
                return Stream(0, "default")

            @staticmethod
            def ExternalStream(handle, device=None):  # noqa: N802 (torch's name)
                return Stream(handle, f"external on {device}")

            @staticmethod
            def stream(s):
                class Context:
                    def __enter__(self):
                        torch.stream_now = s

                    def __exit__(self, *exc):
                        torch.stream_now = None

                return Context()

        self.cuda = Cuda

    @staticmethod
    def device(kind, index):
        return f"{kind}:{index}"

    def zeros(self, n, dtype, device):
        s = self.stream_now
        self.log.append((n, dtype, device, None if s is None else (s.cuda_stream, s.kind)))
        return Buffer(0x1000)


class ZeroedOnItsStreamTest(unittest.TestCase):
    def test_streams(self):
        torch = FakeTorch(current=0x99)
        _library._zeroed_workspace(torch, 512, 1, 0x99)  # the current stream: as it is
        _library._zeroed_workspace(torch, 512, 1, 0)  # the legacy default: torch's default stream
        _library._zeroed_workspace(torch, 512, 1, 0x5678)  # any other: wrapped, not a new pool stream
        self.assertEqual(torch.log, [
            (512, "uint8", "cuda:1", None),
            (512, "uint8", "cuda:1", (0, "default")),
            (512, "uint8", "cuda:1", (0x5678, "external on cuda:1")),
        ])
        self.assertIsNone(torch.stream_now, "the stream context was not left")

    def test_without_torch(self):
        real = _arrays.torch_module

        def no_torch():
            raise TopkError(Code.UNAVAILABLE, "unavailable: this needs torch (no module named torch)")

        _arrays.torch_module = no_torch
        try:
            self.assertIsNone(_library._torch_workspace(64, 0, 0))
        finally:
            _arrays.torch_module = real

    def test_allocation_failure_is_a_topk_error(self):
        real_module, real_zeroed = _arrays.torch_module, _library._zeroed_workspace

        def fail(message):
            def zeroed(torch, nbytes, device, stream):
                raise RuntimeError(message)

            return zeroed

        _arrays.torch_module = lambda: FakeTorch()
        try:
            for message, code in (("CUDA out of memory. Tried to allocate 2.00 GiB", Code.RESOURCE_EXHAUSTED),
                                  ("CUDA error: an illegal memory access was encountered", Code.CUDA_ERROR)):
                _library._zeroed_workspace = fail(message)
                with self.assertRaises(TopkError) as cm:
                    _library._torch_workspace(1 << 31, 2, 0)
                self.assertEqual(cm.exception.code, code)
                self.assertIn("workspace of 2147483648 bytes on cuda:2", cm.exception.message)
                self.assertIn(message, cm.exception.message)
        finally:
            _arrays.torch_module, _library._zeroed_workspace = real_module, real_zeroed


class RunPathTest(unittest.TestCase):
    """run_into on plans without a C handle: whatever passes Python's checks
    reaches the C API, which refuses the NULL plan by the function's name."""

    def run_into(self, plan, **kw):
        with self.assertRaises(TopkError) as cm:
            plan.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4"), **kw)
        self.assertEqual(cm.exception.code, Code.INVALID_ARGUMENT)
        return cm.exception.message

    def test_a_plan_without_workspace_uses_topk_plan_run(self):
        plan = make_plan()
        self.assertEqual(plan.workspace_bytes, 0)
        self.assertIsNone(plan._workspaces)
        self.assertEqual(self.run_into(plan, stream=5), "invalid_argument: topk_plan_run: plan is NULL")

    def test_a_plan_with_workspace_uses_topk_plan_run_workspace(self):
        alloc = CountingAllocator()
        plan = workspace_plan(4096, alloc)
        for s in (0, 0x1234, 0, 0x1234, 2):
            self.assertEqual(self.run_into(plan, stream=s), "invalid_argument: topk_plan_run_workspace: plan is NULL")
        self.assertEqual(alloc.calls, [(4096, 0, 0), (4096, 0, 0x1234), (4096, 0, 2)])

    def test_the_stream_s_workspace_reaches_the_c_api(self):
        alloc = CountingAllocator()
        plan = workspace_plan(4096, alloc)
        calls = []

        def run_workspace(h, x, rg, idx, val, batch, ws, stream, err):
            calls.append((batch, ws, stream))
            return 0

        plan._run_workspace = run_workspace
        x, out = FakeArray((4, 100)), FakeArray((4, 10), "<i4")
        plan.run_into(x, out, stream=0x1234)
        plan.run_into(x, out)  # no torch tensor, no stream named: the legacy default stream (None to ctypes)
        plan.run_into(x, out, stream=0x1234, batch=3)
        first, second = BASE + 0x1000, BASE + 0x2000  # the allocator's first two addresses
        self.assertEqual(calls, [(4, first, 0x1234), (4, second, None), (3, first, 0x1234)])

    def test_no_workspace_for_calls_that_launch_nothing(self):
        alloc = CountingAllocator()
        plan = workspace_plan(4096, alloc)
        self.assertEqual(self.run_into(plan, batch=0), "invalid_argument: topk_plan_run: plan is NULL")
        k0 = workspace_plan(4096, alloc, k=0)
        with self.assertRaises(TopkError) as cm:
            k0.run_into(FakeArray((4, 100)), FakeArray((4, 0), "<i4"))
        self.assertIn("topk_plan_run: plan is NULL", cm.exception.message)
        self.assertEqual(alloc.calls, [])

    def test_the_plans_own_without_torch(self):
        plan = workspace_plan(4096, lambda nbytes, device, stream: None)
        calls = []
        plan._run_workspace = lambda h, x, rg, idx, val, batch, ws, stream, err: calls.append(ws) or 0
        plan.run_into(FakeArray((4, 100)), FakeArray((4, 10), "<i4"), stream=9)
        self.assertEqual(calls, [None])  # NULL: the plan's own


if __name__ == "__main__":
    unittest.main()
