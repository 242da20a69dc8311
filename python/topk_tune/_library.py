"""Library and Plan: the C API's topk_library and topk_plan as Python
objects."""
import ctypes
import os
import sys
import threading
import weakref

from . import _arrays
from ._arrays import DTYPES, describe, dtype_name
from ._capi import INT32_MAX, Code, Options, Problem, TopkError, _invalid, _type_error, as_flag, as_int, capi, check

DISPATCH_NAMES = ("exact", "nearest", "default")


def _default_device():
    """torch's current device when torch is loaded and has CUDA, else 0."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.current_device()
        except Exception:  # noqa: BLE001 (a broken CUDA setup: fall through to 0)
            pass
    return 0


def resolve_cache_path(cache_path):
    """The cache file a Library opens for `cache_path` ("" for none).

    None: $TOPK_TUNE_DB when set (the file is created on first write-back),
    else the CLI's default file ($XDG_CACHE_HOME or ~/.cache
    /topk-tune/tuning.db) when it exists, else none. "": none. A path: that
    file.
    """
    if cache_path is None:
        env = os.environ.get("TOPK_TUNE_DB", "")
        if env:
            return env
        from ._capi import default_cache_path  # noqa: PLC0415

        p = default_cache_path()
        return p if os.path.isfile(p) else ""
    return os.fspath(cache_path)


def _stream_handle(stream, info, device):
    """The CUstream to launch on, as an int.

    Explicit `stream`: an int handle, or an object with .cuda_stream (torch)
    or .ptr / .handle (CuPy, Numba). None: torch's current stream on the
    tensor's device for torch tensors (or whenever torch is loaded); else the
    stream the producer named in its __cuda_array_interface__ (1 and 2 are
    the legacy and per-thread default streams, which the driver accepts as
    handles); else 0, the legacy default stream.
    """
    if stream is not None:
        h = stream
        if not isinstance(stream, int):
            for attr in ("cuda_stream", "ptr", "handle"):
                h = getattr(stream, attr, None)
                if h is not None:
                    h = getattr(h, "value", h) or 0
                    break
            else:
                raise _type_error(f"stream must be an int handle or have .cuda_stream / .ptr, "
                                  f"got {type(stream).__name__}")
        return as_int(h, "stream", minimum=0, maximum=(1 << 64) - 1)
    if info.torch is not None:
        import torch  # noqa: PLC0415 (already loaded: info.torch is a tensor)

        return torch.cuda.current_stream(info.device).cuda_stream
    if info.stream is not None:
        return int(info.stream)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_stream(device).cuda_stream
    return 0


def _swapped(val, idx, dtype):
    """Whether a pair meant as (values, indices) looks like the old
    (indices, values) order: int32 first, the plan's dtype second."""
    try:
        return describe(val, "values").dtype == "i32" and describe(idx, "indices").dtype == dtype
    except TopkError:
        return False


def _on_stream(torch, stream, device, fn):
    """fn() with `stream` (an int CUstream) current on cuda:`device`. A stream
    of 0 is torch's default stream (torch.cuda.ExternalStream(0) would be a
    new stream from torch's pool)."""
    if stream == torch.cuda.current_stream(device).cuda_stream:
        return fn()
    dev = torch.device("cuda", device)
    s = torch.cuda.default_stream(device) if stream == 0 else torch.cuda.ExternalStream(stream, device=dev)
    with torch.cuda.stream(s):
        return fn()


def _zeroed_workspace(torch, nbytes, device, stream):
    """A zeroed uint8 tensor of `nbytes` on cuda:`device` from torch's caching
    allocator, zeroed on `stream` (an int CUstream), so that the zeroing is
    ordered before the first launch that uses it there and the allocator
    ties the block to that stream."""
    dev = torch.device("cuda", device)
    return _on_stream(torch, stream, device, lambda: torch.zeros(nbytes, dtype=torch.uint8, device=dev))


def _torch_workspace(nbytes, device, stream):
    """_zeroed_workspace with torch imported; None without torch (the call
    then uses the plan's own workspace)."""
    try:
        torch = _arrays.torch_module()
    except TopkError:
        return None
    try:
        return _zeroed_workspace(torch, nbytes, device, stream)
    except RuntimeError as e:  # torch's out-of-memory error is a RuntimeError too
        code = Code.RESOURCE_EXHAUSTED if "out of memory" in str(e) else Code.CUDA_ERROR
        raise TopkError(code, f"{code.name.lower()}: workspace of {nbytes} bytes on cuda:{device}: {e}") from None


def _torch_capturing(stream, device):
    """Whether `stream` (an int CUstream, 0 for torch's default stream) is
    capturing a CUDA graph; False without torch."""
    try:
        torch = _arrays.torch_module()
    except TopkError:
        return False
    return _on_stream(torch, stream, device, torch.cuda.is_current_stream_capturing)


_MISSING = object()
_PER_THREAD_STREAM = 2  # CU_STREAM_PER_THREAD


class _Workspaces:
    """The global scratch of one plan, one per stream: a call on stream s
    gets the workspace of s, allocated and zeroed on s the first time (by
    `allocate(nbytes, device, stream)`, which returns an object with
    data_ptr(), or None for the plan's own) and reused afterwards, since
    every call leaves it zero. Calls on one stream are ordered on the GPU,
    so they may share one; calls on different streams never do. Kept for
    the plan's life. A call captured into a CUDA graph (`capturing(stream,
    device)`) takes the plan's own workspace instead, zeroed when the plan
    was made and left zero by every launch: a block allocated during a
    capture would be zeroed only when the graph replays, and the later
    eager calls on that stream would find it unzeroed."""

    def __init__(self, nbytes, device, allocate=None, capturing=None):
        self.nbytes = nbytes
        self.device = device
        self._allocate = allocate or _torch_workspace
        self._capturing = capturing or _torch_capturing
        self._by_stream = {}
        self._lock = threading.Lock()

    def pointer(self, stream):
        """The workspace's address for a call on `stream` (an int), or 0 for
        the plan's own."""
        if self._capturing(stream, self.device):
            return 0
        # Handle 2 (the per-thread default stream) names another stream in
        # each thread.
        key = (stream, threading.get_ident()) if stream == _PER_THREAD_STREAM else stream
        ws = self._by_stream.get(key, _MISSING)  # a dict read is atomic; the lock guards the insertion
        if ws is _MISSING:
            with self._lock:
                ws = self._by_stream.get(key, _MISSING)
                if ws is _MISSING:
                    ws = self._by_stream[key] = self._allocate(self.nbytes, self.device, stream)
        return ws.data_ptr() if ws is not None else 0

    def __len__(self):
        return len(self._by_stream)


class Plan:
    """A planned top-k problem: the kernel is chosen, loaded and its launch
    prepared; calling the plan only validates the arguments and launches.

    Attributes: dtype ("f32"/"f16"/"bf16"), batch, n, k, row_stride, largest,
    ranges, values, sorted, deterministic (the problem, also as the dict
    `problem`); variant (kernel id), dispatch
    ("exact", "nearest" or "default"), tuned_shape, tuned_median_us, plan_ms,
    binary_from_cache, workspace_bytes (global scratch a call needs, 0 for
    most plans: when above 0, each eager call uses a zeroed workspace from
    torch's caching allocator, one per stream, allocated on the plan's first
    call on that stream and reused; a captured call the plan's own); library.
    """

    def __init__(self, library, handle, problem):
        self.library = library
        self._handle = handle
        self.dtype = problem["dtype"]
        self.batch = problem["batch"]
        self.n = problem["n"]
        self.k = problem["k"]
        self.row_stride = problem["row_stride"] or problem["n"]
        self.largest = problem["largest"]
        self.ranges = problem["ranges"]
        self.values = problem["values"]
        self.sorted = problem["sorted"]
        self.deterministic = bool(problem.get("deterministic", False))
        dll = capi()
        h = handle.value if handle is not None else None
        if h:
            d = dll.topk_plan_dispatch(h)
            self.dispatch = DISPATCH_NAMES[d] if 0 <= d < len(DISPATCH_NAMES) else "unknown"
            self.variant = dll.topk_plan_variant(h).decode()
            self.tuned_shape = dll.topk_plan_tuned_shape(h).decode()
            self.tuned_median_us = dll.topk_plan_tuned_median_us(h)
            self.binary_from_cache = bool(dll.topk_plan_binary_from_cache(h))
            self.plan_ms = dll.topk_plan_ms(h)
            self.workspace_bytes = dll.topk_plan_workspace_bytes(h)
        else:  # a plan without a handle (tests): every run fails in the C API
            self.dispatch, self.variant, self.tuned_shape = "default", "", ""
            self.tuned_median_us, self.binary_from_cache, self.plan_ms = 0.0, False, 0.0
            self.workspace_bytes = 0
        self._workspaces = _Workspaces(self.workspace_bytes, library.device) if self.workspace_bytes > 0 else None
        self._run = dll.topk_plan_run
        self._run_workspace = dll.topk_plan_run_workspace

    _PROBLEM_FIELDS = ("dtype", "batch", "n", "k", "row_stride", "largest", "ranges", "values", "sorted",
                       "deterministic")

    @property
    def problem(self):
        """The planned problem as a dict (dtype, batch, n, k, row_stride,
        largest, ranges, values, sorted, deterministic)."""
        return {f: getattr(self, f) for f in self._PROBLEM_FIELDS}

    # --- running -------------------------------------------------------------------

    def __call__(self, x, ranges=None, batch=None, stream=None, lengths=None, row_starts=None):
        """Runs on `x` ([batch, n] or [n]) and returns new torch tensors on
        x's device: indices (int32 [batch, k]), or TopkResult(values,
        indices) when the plan writes values. Launched on torch's current
        stream (see run_into for `stream`). Needs torch to allocate the
        outputs.

        Per-row column ranges (plans made with ranges=True) come as `ranges`
        (int32 [batch, 2] of [start, end)) or as `lengths` (int32 [batch]:
        row i uses columns [0, lengths[i])) with optional `row_starts`
        (int32 [batch]: [row_starts[i], row_starts[i] + lengths[i])); these
        two must be torch tensors and are turned into ranges on the GPU."""
        info = describe(x)
        b = self._check_input(info, batch)

        def run(s):
            rg = _arrays.resolve_ranges(ranges, lengths, row_starts, info.device, b)
            outputs = self.allocate_outputs(batch=b, device=info.device)
            self._launch(info, rg, outputs, b, s)
            return outputs

        if stream is None:
            return run(None)
        # An explicit stream: the ranges made from lengths and the outputs
        # are made on it too, so that the launch is ordered after them and
        # the caching allocator ties them to that stream.
        s = _stream_handle(stream, info, self.library.device)
        device = info.device if info.device is not None else self.library.device
        return _on_stream(_arrays.torch_module(), s, device, lambda: run(s))

    def run_into(self, x, outputs, ranges=None, batch=None, stream=None):
        """Runs on `x` into preallocated outputs (from allocate_outputs, or
        your own: indices int32 [>= batch, k] contiguous, and values of x's
        dtype likewise, as a pair (values, indices) when the plan writes
        values). Allocates nothing, so it can be captured in a CUDA graph
        (a plan with workspace_bytes > 0 allocates its workspace for a stream
        once, at its first eager call there; a captured call uses the plan's
        own).
        Ranges come only as `ranges` here (lengths would need a conversion,
        which allocates: use __call__ or topk_tune.topk for them).

        `batch`: rows to process (default: x's rows); at most the planned
        batch. `stream`: an int CUstream, or an object with .cuda_stream /
        .ptr; default: torch's current stream for torch tensors, else the
        stream named in x's __cuda_array_interface__, else the legacy
        default stream. Returns `outputs`."""
        info = describe(x)
        b = self._check_input(info, batch)
        self._launch(info, ranges, outputs, b, stream)
        return outputs

    def allocate_outputs(self, batch=None, device=None):
        """torch tensors for run_into: indices (int32 [batch, k]), or
        TopkResult(values, indices) when the plan writes values. `batch`
        defaults to the planned batch, `device` to the library's."""
        b = self.batch if batch is None else as_int(batch, "batch", minimum=0, maximum=INT32_MAX)
        d = self.library.device if device is None else as_int(device, "device", minimum=0, maximum=INT32_MAX)
        torch = _arrays.torch_module()
        dev = torch.device("cuda", d)
        idx = torch.empty((b, self.k), dtype=torch.int32, device=dev)
        if not self.values:
            return idx
        dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[self.dtype]
        return _arrays.TopkResult(torch.empty((b, self.k), dtype=dt, device=dev), idx)

    # --- checks ----------------------------------------------------------------------

    def _check_input(self, info, batch):
        if info.dtype != self.dtype:
            raise _invalid(f"input dtype is {info.dtype}, the plan is for {self.dtype}")
        if info.device is not None and info.device != self.library.device:
            raise _invalid(f"input is on cuda:{info.device}, the plan's library on cuda:{self.library.device}")
        rows, n, stride = _arrays.as_rows(info)
        if n != self.n:
            raise _invalid(f"input rows have {n} elements, the plan is for n = {self.n}")
        b = rows if batch is None else as_int(batch, "batch")
        if b < 0 or b > rows:
            raise _invalid(f"batch {b} is outside the input's {rows} rows")
        if b > self.batch:
            raise _invalid(f"batch {b} exceeds the planned batch {self.batch}")
        if b > 1 and stride != self.row_stride:
            raise _invalid(f"input row stride is {stride}, the plan is for {self.row_stride}")
        return b

    def _check_ranges(self, ranges, batch, device):
        if not self.ranges:
            if ranges is not None:
                raise _invalid("ranges given but the plan was made without ranges=True")
            return 0
        if ranges is None:
            raise _invalid("the plan uses ranges: pass ranges, an int32 [batch, 2] array of [start, end)")
        r = describe(ranges, "ranges")
        if r.dtype != "i32":
            raise _invalid(f"ranges must be int32, got {r.dtype}")
        if len(r.shape) != 2 or r.shape[1] != 2 or r.shape[0] < batch:
            raise _invalid(f"ranges must be [batch, 2] = [{batch}, 2], got shape {r.shape}")
        if batch > 0 and (r.strides[1] != 1 or (r.shape[0] > 1 and r.strides[0] != 2)):
            raise _invalid(f"ranges must be contiguous, got strides {r.strides}")
        if r.device is not None and device is not None and r.device != device:
            raise _invalid(f"ranges are on cuda:{r.device}, the input on cuda:{device}")
        return r.ptr

    def _check_output(self, out, what, dtype, batch, device):
        o = describe(out, what)
        if o.readonly:
            raise _invalid(f"{what} is read-only")
        if o.dtype != dtype:
            raise _invalid(f"{what} must be {dtype}, got {o.dtype}")
        if len(o.shape) != 2 or o.shape[1] != self.k or o.shape[0] < batch:
            raise _invalid(f"{what} must be [batch, k] = [{batch}, {self.k}], got shape {o.shape}")
        if batch > 0 and self.k > 0 and ((self.k > 1 and o.strides[1] != 1) or (batch > 1 and o.strides[0] != self.k)):
            raise _invalid(f"{what} must be contiguous [batch, k], got strides {o.strides}")
        if o.device is not None and device is not None and o.device != device:
            raise _invalid(f"{what} is on cuda:{o.device}, the input on cuda:{device}")
        return o.ptr

    def _launch(self, info, ranges, outputs, batch, stream):
        # A __cuda_array_interface__ input names no device: the outputs and
        # ranges must then be on the library's.
        device = info.device if info.device is not None else self.library.device
        if self.values:
            if not isinstance(outputs, (tuple, list)) or len(outputs) != 2:
                raise _type_error("the plan writes values: outputs must be a pair (values, indices)")
            val, idx = outputs
            if _swapped(val, idx, self.dtype):
                raise _invalid("outputs must be (values, indices) (the order of torch.topk and of every "
                               "topk_tune result), got (indices, values)")
            val_ptr = self._check_output(val, "values", self.dtype, batch, device)
            idx_ptr = self._check_output(idx, "indices", "i32", batch, device)
        else:
            if isinstance(outputs, (tuple, list)):
                if len(outputs) == 2 and outputs[0] is None:
                    outputs = outputs[1]
                elif len(outputs) == 1:
                    outputs = outputs[0]
                else:
                    raise _invalid("the plan writes no values: outputs must be indices (or (None, indices))")
            idx_ptr = self._check_output(outputs, "indices", "i32", batch, device)
            val_ptr = 0
        rg_ptr = self._check_ranges(ranges, batch, device)
        s = _stream_handle(stream, info, self.library.device)
        self._launch_checked(info.ptr, rg_ptr, idx_ptr, val_ptr, batch, s)

    def _launch_checked(self, x_ptr, rg_ptr, idx_ptr, val_ptr, batch, stream):
        """topk_plan_run with pointers (ints, 0 for none) that the caller has
        already checked against this plan: no Python validation here (the C
        API still checks the handle and the pointers). A plan with a
        workspace goes through topk_plan_run_workspace with the workspace of
        `stream` (none for a call that launches nothing: batch or k of 0)."""
        h = self._handle  # read once: another thread may close the plan meanwhile
        h = h.value if h is not None else None
        err = ctypes.c_void_p()
        if self._workspaces is None or batch == 0 or self.k == 0:
            code = self._run(h, x_ptr or None, rg_ptr or None, idx_ptr or None, val_ptr or None, batch,
                             stream or None, ctypes.byref(err))
        else:
            ws = self._workspaces.pointer(stream or 0)
            code = self._run_workspace(h, x_ptr or None, rg_ptr or None, idx_ptr or None, val_ptr or None, batch,
                                       ws or None, stream or None, ctypes.byref(err))
        if code:
            check(code, err)

    # --- lifetime -----------------------------------------------------------------------

    def close(self):
        """Destroys the plan now (also done when it is garbage-collected, and
        by Library.close())."""
        h, self._handle = self._handle, None
        if h is not None and h.value:
            self.library._destroy_plan(h)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def __repr__(self):
        flags = ("largest" if self.largest else "smallest") + "".join(
            f" {f}" for f in ("ranges", "values", "sorted", "deterministic") if getattr(self, f))
        return (f"<topk_tune.Plan {self.dtype} {self.batch}x{self.n} k={self.k} {flags}: "
                f"{self.variant} ({self.dispatch})>")


class Library:
    """topk-tune on one CUDA device.

    Library(device=None, cache_path=None, allow_same_arch=False, write_back=True,
            programmatic_launch=True)

    device: CUDA ordinal; None is torch's current device when torch is loaded,
        else 0.
    cache_path: the tuning cache. None: $TOPK_TUNE_DB if set, else the CLI's
        default file (~/.cache/topk-tune/tuning.db) if it exists, else none.
        "": none (built-in defaults only). A cache that is corrupt, newer or
        from another device is ignored with a message in `warnings`.
    allow_same_arch: use entries tuned on another device of the same compute
        capability when this device has none.
    write_back: store kernels compiled at plan time in the cache file.
    programmatic_launch: on sm_90, launch with programmatic
        dependent launch: a call's kernels are scheduled while the stream's
        previous kernel finishes and wait for it on the GPU, which hides part
        of the launch latency of back-to-back kernels. False: plain launches.

    Raises TopkError: UNAVAILABLE without a GPU or driver, NOT_FOUND for a
    device that does not exist, UNIMPLEMENTED for GPUs older than sm_80.
    Thread-safe: plans may be made and run from several threads.
    """

    def __init__(self, device=None, cache_path=None, allow_same_arch=False, write_back=True,
                 programmatic_launch=True):
        self.device = _default_device() if device is None else as_int(device, "device", minimum=0,
                                                                        maximum=INT32_MAX)
        dll = capi()
        self.cache_path = resolve_cache_path(cache_path)
        self._handle = None
        # Plans must be destroyed before the library. The library owns the C
        # handles of its plans (by address) so that it can destroy the ones
        # still alive when it closes, whatever order the garbage collector
        # finalises a cycle in; the WeakSet lets close() disarm live Plan
        # objects.
        self._plan_handles = {}
        self._plans = weakref.WeakSet()
        # Reentrant: the garbage collector may finalise a dead Plan (its
        # __del__ destroys the handle under this lock) in the middle of any
        # allocation made while the lock is held, on the same thread.
        self._lock = threading.RLock()
        o = Options()
        dll.topk_options_init(ctypes.byref(o))
        o.device = self.device
        o.cache_path = os.fsencode(self.cache_path) if self.cache_path else None
        o.allow_same_arch = 1 if allow_same_arch else 0
        o.write_back = 1 if write_back else 0
        o.programmatic_launch = 1 if programmatic_launch else 0
        h = ctypes.c_void_p()
        err = ctypes.c_void_p()
        check(dll.topk_library_open(ctypes.byref(o), ctypes.byref(h), ctypes.byref(err)), err)
        self._handle = h
        self.warnings = dll.topk_library_warnings(h).decode()
        self.device_description = dll.topk_library_device(h).decode()

    def plan(self, dtype, batch, n, k, row_stride=0, largest=True, ranges=False, values=False, sorted=False,
             deterministic=False):
        """Plans a [batch, n] top-k of dtype ("f32", "f16", "bf16", or a
        torch dtype): chooses the kernel (tuned for this shape, the nearest
        tuned shape, or the default), loads or compiles it. Returns a Plan.
        TopkError(INVALID_ARGUMENT) for k < 0, n < 1, row_stride < n, ...

        deterministic (a bool): among elements equal to the k-th value the
        lowest indices are taken, so one input gives one index set on every
        call, stream and GPU (with sorted=True, one output). The resident
        family's kernels take the ties themselves, and the grid family's
        default does in a kernel of its own (variant id with _t1); a
        tie pass runs after the others'."""
        deterministic = as_flag(deterministic, "deterministic")
        dt = dtype_name(dtype)
        batch = as_int(batch, "batch", minimum=0, maximum=INT32_MAX)
        n = as_int(n, "n", minimum=1, maximum=INT32_MAX)
        k = as_int(k, "k", minimum=0, maximum=INT32_MAX)
        row_stride = as_int(row_stride, "row_stride", minimum=0)
        p = Problem()
        dll = capi()
        dll.topk_problem_init(ctypes.byref(p))
        p.dtype = DTYPES[dt]
        p.batch, p.n, p.k, p.row_stride = batch, n, k, row_stride
        p.largest, p.ranges, p.values, p.sorted = (1 if f else 0 for f in (largest, ranges, values, sorted))
        p.deterministic = 1 if deterministic else 0
        problem = {"dtype": dt, "batch": p.batch, "n": p.n, "k": p.k, "row_stride": p.row_stride,
                   "largest": bool(largest), "ranges": bool(ranges), "values": bool(values), "sorted": bool(sorted),
                   "deterministic": deterministic}
        with self._lock:
            if self._handle is None:
                raise TopkError(Code.FAILED_PRECONDITION, "failed_precondition: the library is closed")
            h = ctypes.c_void_p()
            err = ctypes.c_void_p()
            check(dll.topk_plan_create(self._handle, ctypes.byref(p), ctypes.byref(h), ctypes.byref(err)), err)
            self._plan_handles[h.value] = h
            plan = Plan(self, h, problem)
            self._plans.add(plan)
        return plan

    def plan_like(self, x, k, largest=True, ranges=False, values=False, sorted=False, batch=None,
                  deterministic=False):
        """A plan for input `x` (a [batch, n] or [n] CUDA array): dtype,
        n and row stride from x, batch from x unless given. `deterministic`
        as for plan() (a bool: torch's deterministic-algorithms setting is
        not consulted here, only by topk_tune.topk and the torch ops)."""
        info = describe(x)
        rows, n, stride = _arrays.as_rows(info)
        return self.plan(info.dtype, rows if batch is None else batch, n, k,
                         row_stride=stride if stride != n else 0, largest=largest, ranges=ranges, values=values,
                         sorted=sorted, deterministic=deterministic)

    def close(self):
        """Destroys the library and every plan made from it. Using them
        afterwards raises (or, for plans, fails with INVALID_ARGUMENT)."""
        with self._lock:
            for plan in list(self._plans):
                plan._handle = None
            dll = capi()
            while self._plan_handles:  # popped one at a time: a finaliser may run _destroy_plan meanwhile
                _, ph = self._plan_handles.popitem()
                dll.topk_plan_destroy(ph)
            h, self._handle = self._handle, None
            if h is not None and h.value:
                dll.topk_library_close(h)

    def _destroy_plan(self, h):
        with self._lock:
            if self._plan_handles.pop(h.value, None) is not None:
                capi().topk_plan_destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def __repr__(self):
        return f"<topk_tune.Library cuda:{self.device} {self.device_description!r} cache={self.cache_path!r}>"


__all__ = ["Library", "Plan", "resolve_cache_path"]
