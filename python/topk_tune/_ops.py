"""torch operators: torch.ops.topk_tune.{topk, topk_ranged, topk_values}.

Registered through torch.library (a schema, a CUDA kernel calling the ctypes
path on torch's current stream, and a Meta kernel giving output shapes), so
the ops trace under torch.compile(fullgraph=True): FakeTensor runs the Meta
kernel, and the compiled graph calls the op as one opaque node. Plain
torch.library.Library rather than torch.library.custom_op so that the same
code registers on torch 1.13 and 2.x.

Semantics are torch.topk's (int64 indices, sorted=True by default, k > n
raises, n = 0 or k = 0 gives empty outputs), except that ties at the k-th
value may pick any of the tied elements (unless deterministic), and there is
no autograd.

deterministic (bool? = None): among elements equal to the k-th value the
lowest indices are taken, so one input gives one output on every call (the
ops sort by default; unsorted, one index set). None means
torch.are_deterministic_algorithms_enabled(), read when the op runs. The
Python-side sort for k > MAX_SORTED_K honours it too: it orders by (value,
index), so ties come in index order as the library's sorted output has them.
"""
import sys

from ._capi import INT32_MAX, _invalid, _type_error, as_int

NAMESPACE = "topk_tune"
# `bool? deterministic=None` is accepted by the schema parser of torch 1.13
# and 2.x alike (an optional bool, as torch's own ops have).
SCHEMAS = (
    "topk(Tensor x, int k, int dim=-1, bool largest=True, bool sorted=True, bool? deterministic=None) "
    "-> (Tensor values, Tensor indices)",
    "topk_ranged(Tensor x, int k, Tensor? ranges=None, Tensor? lengths=None, Tensor? row_starts=None, "
    "bool largest=True, bool sorted=True, bool? deterministic=None) -> (Tensor values, Tensor indices)",
    "topk_values(Tensor x, int k, int dim=-1, bool largest=True, bool sorted=True, bool? deterministic=None) "
    "-> Tensor",
)

_registered = None  # the torch.library.Library, kept alive: dropping it unregisters the ops


def _float_dtypes(torch):
    return (torch.float32, torch.float16, torch.bfloat16)


def _check_x(torch, x, k, dim):
    """(k, dim normalised, n) after the checks every form shares; raises
    before anything is allocated or launched."""
    if not isinstance(x, torch.Tensor):
        raise _type_error(f"x must be a torch tensor, got {type(x).__name__}")
    if x.dtype not in _float_dtypes(torch):
        raise _type_error(f"x must be float32, float16 or bfloat16, got {x.dtype}")
    k = as_int(k, "k", minimum=0, maximum=INT32_MAX)
    dim = as_int(dim, "dim", maximum=None)
    if x.dim() == 0:
        raise _invalid("x must have at least one dimension (topk of a 0-d tensor)")
    if not -x.dim() <= dim < x.dim():
        raise _invalid(f"dim {dim} is out of range for a {x.dim()}-d x")
    dim %= x.dim()
    n = x.shape[dim]
    if k > n:
        raise _invalid(f"k = {k} is larger than x's dimension {dim} ({n} elements): torch.topk refuses it too")
    return k, dim, n


def _check_device(x, what, t):
    if t.device != x.device:
        raise _invalid(f"{what} is on {t.device}, x on {x.device}")


def _check_ranges(torch, x, ranges, lengths, row_starts):
    """The ranged form's extra arguments: int32 CUDA tensors of one entry
    (ranges: one [start, end) pair) per row of x (its leading dimensions)."""
    rows = 1
    for s in x.shape[:-1]:
        rows *= s
    lead = tuple(x.shape[:-1])
    if ranges is not None and (lengths is not None or row_starts is not None):
        raise _invalid("give either ranges or lengths (with optional row_starts), not both")
    if lengths is None and row_starts is not None:
        raise _invalid("row_starts needs lengths: row i uses [row_starts[i], row_starts[i] + lengths[i])")
    if ranges is None and lengths is None:
        raise _invalid("topk_ranged needs ranges (int32 [rows, 2]) or lengths (int32 [rows])")
    for what, t in (("ranges", ranges), ("lengths", lengths), ("row_starts", row_starts)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise _type_error(f"{what} must be a torch tensor, got {type(t).__name__}")
        if t.dtype != torch.int32:
            raise _type_error(f"{what} must be int32, got {t.dtype} (convert with .int())")
        _check_device(x, what, t)
        if what == "ranges":
            if tuple(t.shape) not in ((rows, 2), lead + (2,)):
                raise _invalid(f"ranges must be [rows, 2] = [{rows}, 2] ([start, end) per row of x), "
                               f"got {list(t.shape)}")
        elif tuple(t.shape) not in ((rows,), lead):
            raise _invalid(f"{what} must be [rows] = [{rows}] (one entry per row of x), got {list(t.shape)}")
    return rows


def _out_shape(x, k, dim):
    shape = list(x.shape)
    shape[dim] = k
    return shape


def _empty(torch, x, k, dim, values=True):
    shape = _out_shape(x, k, dim)
    idx = torch.empty(shape, dtype=torch.int64, device=x.device)
    return (torch.empty(shape, dtype=x.dtype, device=x.device), idx) if values else torch.empty(
        shape, dtype=x.dtype, device=x.device)


# The library sorts its output up to this k (TOPK_MAX_SORTED_K in
# templates/topk/args.h); torch.topk sorts any k, so beyond it the op sorts
# the unsorted result with torch.
MAX_SORTED_K = 16384


def _sort_big(v, i, dim, largest, sorted, k, deterministic=False):
    if sorted and k > MAX_SORTED_K:
        if deterministic:
            # The library fixed the index set, not its unsorted order: order
            # by index, then sort stably by value, so equal values come in
            # index order (a total order on (value, index): one output).
            i, order = i.sort(dim=dim)
            v = v.gather(dim, order)
            v, order = v.sort(dim=dim, descending=largest, stable=True)
        else:
            v, order = v.sort(dim=dim, descending=largest)
        i = i.gather(dim, order)
    # Contiguous, as the Meta kernels describe the outputs: with dim not last
    # the results are moved views, and torch.compile lays out what reads them
    # by the fake tensors' strides.
    return v.contiguous(), i.contiguous()


# --- kernels --------------------------------------------------------------------------------


def _topk_cuda(x, k, dim=-1, largest=True, sorted=True, deterministic=None):
    import torch  # noqa: PLC0415 (loaded: this runs from the dispatcher)

    from ._functional import _topk_torch, resolve_deterministic  # noqa: PLC0415

    k, dim, n = _check_x(torch, x, k, dim)
    deterministic = resolve_deterministic(deterministic, x)
    if k == 0 or x.numel() == 0:
        return _empty(torch, x, k, dim)
    # _topk_torch directly: x, k and dim are checked above (topk() would
    # check them again).
    v, i = _topk_torch(x, k, dim, largest, sorted and k <= MAX_SORTED_K, None, None, None, True, None, torch.int64,
                       None, None, deterministic)
    return _sort_big(v, i, dim, largest, sorted, k, deterministic)


def _topk_ranged_cuda(x, k, ranges=None, lengths=None, row_starts=None, largest=True, sorted=True,
                      deterministic=None):
    import torch  # noqa: PLC0415

    from ._functional import resolve_deterministic, topk  # noqa: PLC0415

    k, dim, n = _check_x(torch, x, k, -1)
    deterministic = resolve_deterministic(deterministic, x)
    rows = _check_ranges(torch, x, ranges, lengths, row_starts)
    if k == 0 or x.numel() == 0:
        return _empty(torch, x, k, dim)
    if ranges is not None:
        ranges = ranges.reshape(rows, 2).contiguous()
    if lengths is not None:
        lengths = lengths.reshape(rows).contiguous()
    if row_starts is not None:
        row_starts = row_starts.reshape(rows).contiguous()
    v, i = topk(x, k, dim=-1, largest=largest, sorted=sorted and k <= MAX_SORTED_K, ranges=ranges,
                lengths=lengths, row_starts=row_starts, index_dtype=torch.int64, deterministic=deterministic)
    return _sort_big(v, i, dim, largest, sorted, k, deterministic)


def _topk_values_cuda(x, k, dim=-1, largest=True, sorted=True, deterministic=None):
    return _topk_cuda(x, k, dim, largest, sorted, deterministic)[0]


def _topk_meta(x, k, dim=-1, largest=True, sorted=True, deterministic=None):
    import torch  # noqa: PLC0415

    k, dim, _ = _check_x(torch, x, k, dim)
    return _empty(torch, x, k, dim)


def _topk_ranged_meta(x, k, ranges=None, lengths=None, row_starts=None, largest=True, sorted=True,
                      deterministic=None):
    import torch  # noqa: PLC0415

    k, dim, _ = _check_x(torch, x, k, -1)
    _check_ranges(torch, x, ranges, lengths, row_starts)
    return _empty(torch, x, k, dim)


def _topk_values_meta(x, k, dim=-1, largest=True, sorted=True, deterministic=None):
    import torch  # noqa: PLC0415

    k, dim, _ = _check_x(torch, x, k, dim)
    return _empty(torch, x, k, dim, values=False)


def _not_cuda(name):
    def refuse(x, *args, **kwargs):
        raise _invalid(f"torch.ops.topk_tune.{name}: x is on {x.device}; the kernels run on CUDA devices only")

    return refuse


def _below_autograd(torch, name):
    def kernel(*args, **kwargs):
        guard = torch._C._AutoDispatchBelowAutograd()  # an RAII guard in 1.13, not a context manager
        try:
            return getattr(torch.ops.topk_tune, name)(*args, **kwargs)
        finally:
            del guard

    return kernel


def register(torch=None):
    """Defines the ops in torch.ops.topk_tune (once per process). Needs
    torch, not libtopk or a GPU: the library is loaded on the first CUDA
    call. Returns the torch.library.Library, or None when the namespace was
    already taken (e.g. by another copy of this package)."""
    global _registered
    if _registered is not None:
        return _registered
    torch = torch or sys.modules.get("torch")
    if torch is None:
        import torch  # noqa: PLC0415
    try:
        lib = torch.library.Library(NAMESPACE, "DEF")
    except RuntimeError:
        return None  # already defined in this process (another copy of the package)
    kernels = {
        "topk": (_topk_cuda, _topk_meta),
        "topk_ranged": (_topk_ranged_cuda, _topk_ranged_meta),
        "topk_values": (_topk_values_cuda, _topk_values_meta),
    }
    for schema in SCHEMAS:
        lib.define(schema)
        name = schema.split("(", 1)[0]
        cuda, meta = kernels[name]
        lib.impl(name, cuda, "CUDA")
        # Torch's fake tensors (torch.compile, export) run the Meta kernel.
        lib.impl(name, meta, "Meta")
        # Host tensors: a ValueError naming the device rather than the
        # dispatcher's "could not run with arguments from the CPU backend".
        lib.impl(name, _not_cuda(name), "CPU")
        if not hasattr(torch._C, "_set_autograd_fallback_mode"):
            # torch < 2.1 has no autograd fallback for meta tensors (its
            # AutogradCPU / AutogradCUDA keys fall through, AutogradMeta does
            # not): go below autograd by hand. The ops have no gradient.
            lib.impl(name, _below_autograd(torch, name), "AutogradMeta")
    _registered = lib
    return lib


__all__ = ["NAMESPACE", "SCHEMAS", "register"]
