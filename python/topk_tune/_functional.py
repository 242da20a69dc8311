"""topk_tune.topk: a torch.topk-like function over a default Library per
device and a cache of plans."""
import collections
import threading

from . import _arrays
from ._arrays import TopkResult, describe
from ._capi import INT32_MAX, _invalid, _type_error, as_int
from ._library import Library

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
    with _lock:
        lib = _libraries.get(device)
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


def _plan(lib, key, make):
    with _lock:
        plan = _plans.get(key)
        if plan is not None:
            _plans.move_to_end(key)
            return plan
    plan = make()
    with _lock:
        plan = _plans.setdefault(key, plan)
        _plans.move_to_end(key)
        while len(_plans) > _MAX_PLANS:
            _plans.popitem(last=False)
    return plan


def topk(x, k, dim=-1, largest=True, sorted=False, ranges=None, values=True, library=None, index_dtype=None,
         stream=None, *, lengths=None, row_starts=None, out=None):
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
      pick any of the tied elements;
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
    if out is not None:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise _type_error(f"out must be a pair (values, indices), got {type(out).__name__}")
        if not values and out[0] is not None:
            raise _invalid("out[0] (values) must be None when values=False")
    if _arrays._is_torch_tensor(x):
        return _topk_torch(x, k, dim, largest, sorted, ranges, lengths, row_starts, values, library, index_dtype,
                           stream, out)
    info = describe(x)
    if dim not in (-1, len(info.shape) - 1):
        raise _invalid("for __cuda_array_interface__ inputs only the last dimension (dim=-1) is supported")
    rows, n, stride = _arrays.as_rows(info)
    ranges = _arrays.resolve_ranges(ranges, lengths, row_starts, info.device, rows)
    shape = tuple(info.shape[:-1]) + (k,)
    if out is not None:
        index_dtype = _check_out(out, shape, _TORCH_NAME[info.dtype] if info.dtype in _TORCH_NAME else info.dtype,
                                 info.device, values, index_dtype)
    val, idx = _run(info, x, rows, n, stride, k, largest, sorted, ranges, values, library, stream)
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


def _topk_torch(x, k, dim, largest, sorted, ranges, lengths, row_starts, values, library, index_dtype, stream, out):
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
    val, idx = _run(info, x, rows, n, stride, k, largest, sorted, ranges, values, library, stream, outputs)
    idx = idx.reshape(lead + (k,))
    if val is not None:
        val = val.reshape(lead + (k,))
    if moved:
        idx = idx.movedim(-1, d)
        val = val.movedim(-1, d) if val is not None else None
    return _finish(val, idx, index_dtype, out)


def _run(info, x, rows, n, stride, k, largest, sorted, ranges, values, library, stream, outputs=None):
    """(values or None, indices), each [rows, k]: into `outputs` when given
    (the plan's form), else into new tensors."""
    lib = library if library is not None else default_library(info.device)
    key = (id(lib), lib.device, info.dtype, rows, n, stride, k, bool(largest), ranges is not None, bool(values),
           bool(sorted))
    plan = _plan(lib, key, lambda: lib.plan(info.dtype, rows, n, k, row_stride=stride if stride != n else 0,
                                            largest=largest, ranges=ranges is not None, values=values,
                                            sorted=sorted))
    if outputs is None:
        outputs = plan.allocate_outputs(batch=rows, device=info.device if info.device is not None else lib.device)
    out = plan.run_into(x, outputs, ranges=ranges, stream=stream)
    return (out[0], out[1]) if values else (None, out)
