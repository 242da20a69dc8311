"""topk_tune.topk: a torch.topk-like function over a default Library per
device and a cache of plans."""
import collections
import threading

from . import _arrays
from ._arrays import TopkResult, describe
from ._capi import INT32_MAX, _invalid, _type_error, as_flag, as_int
from ._library import Library, _on_stream, _stream_handle

_MAX_PLANS = 256
_lock = threading.Lock()
_libraries = {}
_plans = collections.OrderedDict()


def default_library(device=None):
    """The Library this module uses for `device` (None: torch's current
    device, or 0), opened on first use with Library's defaults (the cache of
    $TOPK_TUNE_DB, else the CLI's default cache file when it exists)."""
    if device is None:
        from ._library import _default_device  # noqa: PLC0415

        device = _default_device()
    lib = _libraries.get(device)  # a dict read is atomic; the lock guards the insertion
    if lib is None:
        lib = Library(device=device)  # outside the lock: may take a while
        with _lock:
            lib = _libraries.setdefault(device, lib)
    return lib


def clear_caches():
    """Forgets the cached plans and default libraries (they are destroyed
    once nothing else holds them)."""
    with _lock:
        _plans.clear()
        _libraries.clear()


def _plan(lib, key, dtype, rows, n, stride, k, largest, ranged, values, sorted, deterministic):
    """The cached plan for `key`, made on the first call (outside the lock:
    planning may compile). Least recently used plans are dropped past
    _MAX_PLANS."""
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    plan = lib.plan(dtype, rows, n, k, row_stride=stride if stride != n else 0, largest=largest, ranges=ranged,
                    values=values, sorted=sorted, deterministic=deterministic)
    with _lock:
        plan = _plans.setdefault(key, plan)
        _plans.move_to_end(key)
        while len(_plans) > _MAX_PLANS:
            _plans.popitem(last=False)
    return plan


def resolve_deterministic(deterministic, x):
    """The deterministic flag for a call on `x`: a bool as given; None is
    torch.are_deterministic_algorithms_enabled() for torch tensors (torch
    is loaded then), else False."""
    deterministic = as_flag(deterministic, "deterministic", allow_none=True)
    if deterministic is None:
        if _arrays._is_torch_tensor(x):
            import torch  # noqa: PLC0415 (loaded: x is a tensor)

            return bool(torch.are_deterministic_algorithms_enabled())
        return False
    return deterministic


def topk(x, k, dim=-1, largest=True, sorted=False, ranges=None, values=True, library=None, index_dtype=None,
         stream=None, *, lengths=None, row_starts=None, out=None, deterministic=None):
    """Like torch.topk(x, k, dim, largest, sorted): returns
    TopkResult(values, indices).

    Differences from torch.topk, on purpose:
    - indices are int32 (the kernels' output) unless index_dtype=torch.int64
      (one extra conversion; torch.gather wants int64);
    - values=False skips writing the values: the result is (None, indices);
    - per-row column ranges, one of:
      ranges: an int32 [rows, 2] CUDA array of [start, end) per row;
      lengths: an int32 [rows] CUDA torch tensor, row i uses [0, lengths[i]);
      lengths with row_starts (int32 [rows] CUDA torch tensor): row i uses
      [row_starts[i], row_starts[i] + lengths[i]).
      Ranges are clamped to [0, n), start > end is empty; indices stay
      column indices of the row. rows: the leading dimensions of x (after
      moving `dim` last) flattened; lengths / row_starts may also have the
      leading dimensions' shape;
    - k larger than the row (or its range) is allowed: missing entries are
      index -1 and the dtype's lowest finite value;
    - sorted defaults to False (torch: True); ties at the k-th value may
      pick any of the tied elements unless deterministic;
    - deterministic: among elements equal to the k-th value the lowest
      indices are taken, so one input gives one index set on every call,
      stream and GPU (with sorted=True, one output); it costs a search
      over the tied positions (resident kernels) or a tie pass after the
      selection (the others). None (the default) means
      torch.are_deterministic_algorithms_enabled() when x is a torch tensor,
      else False;
    - out=(values, indices): torch tensors of the result's shape that the
      result is written into (and returned); values of x's dtype, indices
      int32 or int64 (int64 implies index_dtype=torch.int64); values=False
      takes (None, indices). Nothing is resized: a wrong shape, dtype or
      device raises.

    x: a CUDA torch tensor of float32, float16 or bfloat16 (any number of
    dimensions; `dim` is moved last and leading dimensions become rows), or
    a 1-D / 2-D object with __cuda_array_interface__ (float32 / float16,
    dim=-1). Plans are cached per (library, dtype, shape, stride, k, flags);
    the library is `library` or the module's default for x's device.

    Bad arguments raise before anything runs: TypeError for a wrong type
    (k=2.7, k=True, a list as x), ValueError for a wrong value (k < 0), an
    OverflowError (also a ValueError) for k >= 2^31; each is a TopkError
    with code INVALID_ARGUMENT too.
    """
    k = as_int(k, "k", minimum=0, maximum=INT32_MAX)
    dim = as_int(dim, "dim", maximum=None)
    deterministic = resolve_deterministic(deterministic, x)
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise _type_error(f"out must be a pair (values, indices), got {type(out).__name__}")
        if not values and out[0] is not None:
            raise _invalid("out[0] (values) must be None when values=False")
    if _arrays._is_torch_tensor(x):
        if stream is None or not x.is_cuda:
            return _topk_torch(x, k, dim, largest, sorted, ranges, lengths, row_starts, values, library,
                               index_dtype, stream, out, deterministic)
        # An explicit stream: every torch operation of the call (the input's
        # copy, the ranges, the outputs, the index conversion) runs on it
        # with the launch, so they are ordered with the kernel and the
        # caching allocator ties their memory to that stream.
        s = _stream_handle(stream, None, x.device.index)
        return _on_stream(_arrays.torch_module(), s, x.device.index,
                          lambda: _topk_torch(x, k, dim, largest, sorted, ranges, lengths, row_starts, values,
                                              library, index_dtype, s, out, deterministic))
    info = describe(x)
    if dim not in (-1, len(info.shape) - 1):
        raise _invalid("for __cuda_array_interface__ inputs only the last dimension (dim=-1) is supported")
    rows, n, stride = _arrays.as_rows(info)
    ranges = _arrays.resolve_ranges(ranges, lengths, row_starts, info.device, rows)
    shape = tuple(info.shape[:-1]) + (k,)
    if out is not None:
        index_dtype = _check_out(out, shape, _TORCH_NAME[info.dtype] if info.dtype in _TORCH_NAME else info.dtype,
                                 info.device, values, index_dtype)
    val, idx = _run(info, rows, n, stride, k, largest, sorted, ranges, values, library, stream, deterministic)
    val = val.reshape(shape) if val is not None else None
    return _finish(val, idx.reshape(shape), index_dtype, out)


_TORCH_NAME = {"f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16"}


def _check_out(out, shape, dtype, device, values, index_dtype):
    """Validates out=(values, indices) against the result's shape, x's dtype
    (its str(), e.g. "torch.float32") and device (an ordinal or None);
    returns the index dtype to produce."""
    vout, iout = out
    pairs = (("out[0] (values)", vout), ("out[1] (indices)", iout)) if values else (("out[1] (indices)", iout),)
    for what, t in pairs:
        if not _arrays._is_torch_tensor(t):
            raise _type_error(f"{what} must be a torch tensor, got {type(t).__name__}")
    torch = _arrays.torch_module()
    for what, t in pairs:
        if not t.is_cuda:
            raise _invalid(f"{what} is on {t.device}, not on a CUDA device")
        if device is not None and t.device.index != device:
            raise _invalid(f"{what} is on cuda:{t.device.index}, the input on cuda:{device}")
        if tuple(t.shape) != tuple(shape):
            raise _invalid(f"{what} must have shape {list(shape)}, got {list(t.shape)}")
    if values and str(vout.dtype) != dtype:
        raise _type_error(f"out[0] (values) must be {dtype} like the input, got {vout.dtype}")
    if iout.dtype not in (torch.int32, torch.int64):
        raise _type_error(f"out[1] (indices) must be torch.int32 or torch.int64, got {iout.dtype}")
    if index_dtype is not None and index_dtype != iout.dtype:
        raise _type_error(f"out[1] (indices) is {iout.dtype} but index_dtype is {index_dtype}")
    return iout.dtype


def _finish(val, idx, index_dtype, out):
    """The result: new tensors, or `out` filled."""
    if out is not None:
        vout, iout = out
        if val is not None and vout.data_ptr() != val.data_ptr():
            vout.copy_(val)
        if iout.data_ptr() != idx.data_ptr() or iout.dtype != idx.dtype:
            iout.copy_(idx)
        return TopkResult(vout, iout)
    if index_dtype is not None:
        idx = idx.to(index_dtype)
    return TopkResult(val, idx)


def _topk_torch(x, k, dim, largest, sorted, ranges, lengths, row_starts, values, library, index_dtype, stream, out,
                deterministic):
    if x.dim() == 0:
        raise _invalid("topk of a 0-d tensor")
    d = dim % x.dim() if -x.dim() <= dim < x.dim() else None
    if d is None:
        raise _invalid(f"dim {dim} is out of range for a {x.dim()}-d tensor")
    shape = tuple(x.shape[:d]) + (k,) + tuple(x.shape[d + 1:])
    if out is not None:
        index_dtype = _check_out(out, shape, str(x.dtype), x.device.index if x.is_cuda else None, values,
                                 index_dtype)
    moved = d != x.dim() - 1
    if moved:
        x = x.movedim(d, -1)
    lead = tuple(x.shape[:-1])
    n = x.shape[-1]
    if n > 1 and x.stride(-1) != 1:
        x = x.contiguous()
    if x.dim() > 2:
        x = x.reshape(-1, n)
    info = describe(x)
    rows, n, stride = _arrays.as_rows(info)
    ranges = _arrays.resolve_ranges(ranges, lengths, row_starts, info.device, rows, lead)
    outputs = None
    if out is not None and not moved:
        # Write straight into the caller's tensors when the kernel's layout
        # is theirs: contiguous [rows, k], int32 indices (no copy, no
        # allocation, so a CUDA graph can capture the call).
        import torch  # noqa: PLC0415 (loaded: x is a tensor)

        vout, iout = out
        if iout.dtype == torch.int32 and iout.is_contiguous() and (not values or vout.is_contiguous()):
            outputs = (vout.view(rows, k), iout.view(rows, k)) if values else iout.view(rows, k)
    val, idx = _run(info, rows, n, stride, k, largest, sorted, ranges, values, library, stream, deterministic,
                    outputs, ranges_checked=lengths is not None)
    idx = idx.reshape(lead + (k,))
    if val is not None:
        val = val.reshape(lead + (k,))
    if moved:
        idx = idx.movedim(-1, d)
        val = val.movedim(-1, d) if val is not None else None
    return _finish(val, idx, index_dtype, out)


_VALUE_DTYPES = {}  # "f32" -> torch.float32, ..., filled on first use


def _current_stream(torch, device):
    """torch's current stream on `device` as an int handle."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def _run(info, rows, n, stride, k, largest, sorted, ranges, values, library, stream, deterministic, outputs=None,
         ranges_checked=False):
    """(values or None, indices), each [rows, k]: into `outputs` when given
    (the plan's form, already checked by the caller: _check_out), else into
    new tensors.

    The plan is made for exactly info's dtype, rows, n and stride, so what
    Plan.run_into would check again (input dtype, shape and stride, the
    outputs it allocates here) is known to hold: the launch goes straight to
    the C API with the pointers. Ranges are checked unless they were made
    here from lengths (`ranges_checked`)."""
    lib = library if library is not None else default_library(info.device)
    key = (id(lib), lib.device, info.dtype, rows, n, stride, k, bool(largest), ranges is not None, bool(values),
           bool(sorted), bool(deterministic))
    plan = _plan(lib, key, info.dtype, rows, n, stride, k, largest, ranges is not None, values, sorted,
                 deterministic)
    device = info.device if info.device is not None else lib.device
    if info.device is not None and info.device != lib.device:
        raise _invalid(f"input is on cuda:{info.device}, the plan's library on cuda:{lib.device}")
    torch = _arrays.torch_module()
    if outputs is None:
        dev = info.torch.device if info.torch is not None else torch.device("cuda", device)
        idx = torch.empty((rows, k), dtype=torch.int32, device=dev)
        if values:
            vdt = _VALUE_DTYPES.get(info.dtype)
            if vdt is None:
                vdt = _VALUE_DTYPES.setdefault(info.dtype, {"f32": torch.float32, "f16": torch.float16,
                                                            "bf16": torch.bfloat16}[info.dtype])
            val = torch.empty((rows, k), dtype=vdt, device=dev)
    elif values:
        val, idx = outputs
    else:
        val, idx = None, outputs
    if ranges is None:
        rg_ptr = 0
    elif ranges_checked:
        rg_ptr = ranges.data_ptr()
    else:
        rg_ptr = plan._check_ranges(ranges, rows, info.device)
    if stream is None and info.torch is not None:
        s = _current_stream(torch, device)
    else:
        s = _stream_handle(stream, info, lib.device)
    plan._launch_checked(info.ptr, rg_ptr, idx.data_ptr(), val.data_ptr() if values else 0, rows, s)
    return (val, idx) if values else (None, idx)
