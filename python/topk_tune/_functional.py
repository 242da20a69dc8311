"""topk_tune.topk: a torch.topk-like function over a default Library per
device and a cache of plans."""
import collections
import threading

from . import _arrays
from ._arrays import describe
from ._capi import _invalid
from ._library import Library

TopkResult = collections.namedtuple("TopkResult", "values indices")

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
         stream=None):
    """Like torch.topk(x, k, dim, largest, sorted): returns (values, indices).

    Differences from torch.topk, on purpose:
    - indices are int32 (the kernels' output) unless index_dtype=torch.int64
      (one extra conversion; torch.gather wants int64);
    - values=False skips writing the values: the result is (None, indices);
    - ranges: an int32 [rows, 2] CUDA tensor of per-row [start, end) column
      ranges (clamped to [0, n)); indices stay column indices of the row;
    - k larger than the row (or its range) is allowed: missing entries are
      index -1 and the dtype's lowest finite value;
    - sorted defaults to False (torch: True); ties at the k-th value may
      pick any of the tied elements.

    x: a CUDA torch tensor of float32, float16 or bfloat16 (any number of
    dimensions; `dim` is moved last and leading dimensions become rows), or
    a 1-D / 2-D object with __cuda_array_interface__ (float32 / float16,
    dim=-1). Plans are cached per (library, dtype, shape, stride, k, flags);
    the library is `library` or the module's default for x's device.
    """
    k = int(k)
    if _arrays._is_torch_tensor(x):
        return _topk_torch(x, k, dim, largest, sorted, ranges, values, library, index_dtype, stream)
    info = describe(x)
    if dim not in (-1, len(info.shape) - 1):
        raise _invalid("for __cuda_array_interface__ inputs only the last dimension (dim=-1) is supported")
    rows, n, stride = _arrays.as_rows(info)
    out = _run(info, x, rows, n, stride, k, largest, sorted, ranges, values, library, stream)
    idx, val = out if values else (out, None)
    if len(info.shape) == 1:
        idx = idx[0]
        val = val[0] if val is not None else None
    if index_dtype is not None:
        idx = idx.to(index_dtype)
    return TopkResult(val, idx)


def _topk_torch(x, k, dim, largest, sorted, ranges, values, library, index_dtype, stream):
    if x.dim() == 0:
        raise _invalid("topk of a 0-d tensor")
    d = dim % x.dim() if -x.dim() <= dim < x.dim() else None
    if d is None:
        raise _invalid(f"dim {dim} is out of range for a {x.dim()}-d tensor")
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
    out = _run(info, x, rows, n, stride, k, largest, sorted, ranges, values, library, stream)
    idx, val = out if values else (out, None)
    idx = idx.reshape(lead + (k,))
    if val is not None:
        val = val.reshape(lead + (k,))
    if moved:
        idx = idx.movedim(-1, d)
        val = val.movedim(-1, d) if val is not None else None
    if index_dtype is not None:
        idx = idx.to(index_dtype)
    return TopkResult(val, idx)


def _run(info, x, rows, n, stride, k, largest, sorted, ranges, values, library, stream):
    lib = library if library is not None else default_library(info.device)
    key = (id(lib), lib.device, info.dtype, rows, n, stride, k, bool(largest), ranges is not None, bool(values),
           bool(sorted))
    plan = _plan(lib, key, lambda: lib.plan(info.dtype, rows, n, k, row_stride=stride if stride != n else 0,
                                            largest=largest, ranges=ranges is not None, values=values,
                                            sorted=sorted))
    outputs = plan.allocate_outputs(batch=rows, device=info.device if info.device is not None else lib.device)
    return plan.run_into(x, outputs, ranges=ranges, stream=stream)
