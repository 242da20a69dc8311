"""Device arrays as topk-tune sees them: torch tensors, or any object with
``__cuda_array_interface__`` (CuPy, Numba, JAX, ...), reduced to a pointer,
a shape, strides in elements and a dtype name. No torch import here unless
the object is a torch tensor (then torch is already loaded).
"""
import sys
from collections import namedtuple

from ._capi import INT32_MAX, Code, TopkError, _invalid, _type_error

# dtype names of the C API, and what is accepted for them.
DTYPES = {"f32": 0, "f16": 1, "bf16": 2}
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}
_DTYPE_ALIASES = {
    "f32": "f32", "fp32": "f32", "float32": "f32", "float": "f32",
    "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
}
# __cuda_array_interface__ typestrs. The interface has no typestr for
# bfloat16 (it follows NumPy's, which has none), so bf16 arrives only
# through torch tensors.
_TYPESTR = {"<f4": "f32", "<f2": "f16", "<i4": "i32", "<i8": "i64"}
_TORCH_DTYPE = {"torch.float32": "f32", "torch.float16": "f16", "torch.bfloat16": "bf16",
                "torch.int32": "i32", "torch.int64": "i64"}

# ptr: int (0 allowed only for empty arrays); shape, strides: tuples of ints,
# strides in elements; dtype: "f32"/"f16"/"bf16"/"i32"/"i64" or the foreign
# name; device: CUDA ordinal or None when unknown (CAI objects); stream: the
# producer's stream from the CAI (None when not given); torch: the tensor
# itself, or None.
ArrayInfo = namedtuple("ArrayInfo", "ptr shape strides dtype device stream torch readonly")

# What topk() and plans that write values return, and the order in which
# outputs are given to run_into and topk(out=...): values first, as torch.topk.
TopkResult = namedtuple("TopkResult", "values indices")


def dtype_name(dtype):
    """Normalises a dtype given as a string ("f32", "float16", "bf16", ...),
    a torch.dtype or a NumPy dtype to "f32", "f16" or "bf16"."""
    if isinstance(dtype, str):
        key = dtype.lower()
    else:
        key = str(dtype).lower()  # torch.float32 -> "torch.float32", np.dtype -> "float32"
    if key.startswith("torch."):
        key = key[len("torch."):]
    name = _DTYPE_ALIASES.get(key)
    if name is None:
        raise _invalid(f"unsupported dtype {dtype!r}: use f32, f16 or bf16 (float32, float16, bfloat16)")
    return name


def _is_torch_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def torch_module():
    """torch, imported on demand; TopkError(UNAVAILABLE) without it."""
    try:
        import torch  # noqa: PLC0415 (imported lazily on purpose)
    except ImportError as e:
        raise TopkError(Code.UNAVAILABLE, f"unavailable: this needs torch ({e})") from None
    return torch


def describe(x, what="input"):
    """ArrayInfo of a torch tensor or a __cuda_array_interface__ object.
    TopkError(INVALID_ARGUMENT) for host arrays and malformed interfaces."""
    if _is_torch_tensor(x):
        if not x.is_cuda:
            raise _invalid(f"{what} is on {x.device}, not on a CUDA device")
        dt = _TORCH_DTYPE.get(str(x.dtype), str(x.dtype))
        return ArrayInfo(x.data_ptr(), tuple(x.shape), tuple(x.stride()), dt, x.device.index, None, x, False)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        raise _type_error(f"{what} must be a CUDA torch tensor or have __cuda_array_interface__, "
                          f"got {type(x).__name__}")
    try:
        shape = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise _invalid(f"{what}: malformed __cuda_array_interface__ ({e!r})") from None
    if cai.get("mask") is not None:
        raise _invalid(f"{what}: masked arrays are not supported")
    dt = _TYPESTR.get(typestr)
    if dt is None:
        hint = " (bfloat16 has no __cuda_array_interface__ typestr: pass a torch tensor)" \
            if typestr in ("<V2", "|V2") else ""
        raise _invalid(f"{what} has typestr {typestr!r}; supported: '<f4' (f32), '<f2' (f16){hint}")
    size = ITEMSIZE[dt]
    strides = cai.get("strides")
    if strides is None:
        st, acc = [], 1
        for s in reversed(shape):
            st.append(acc)
            acc *= max(s, 1)
        strides = tuple(reversed(st))
    else:
        if len(strides) != len(shape):
            raise _invalid(f"{what}: __cuda_array_interface__ strides {tuple(strides)} do not match shape {shape}")
        if any(int(s) % size for s in strides):
            raise _invalid(f"{what}: strides {tuple(strides)} (bytes) are not multiples of the {size}-byte element")
        strides = tuple(int(s) // size for s in strides)
    n_elems = 1
    for s in shape:
        n_elems *= s
    if (ptr is None or ptr == 0) and n_elems != 0:
        raise _invalid(f"{what}: __cuda_array_interface__ data pointer is null")
    return ArrayInfo(int(ptr or 0), shape, strides, dt, None, cai.get("stream"), None, bool(readonly))


def as_rows(info, what="input"):
    """(batch, n, row_stride) of a 1-D or 2-D array whose rows are
    contiguous (stride 1 along the last dimension)."""
    if len(info.shape) == 1:
        n = info.shape[0]
        if n > 1 and info.strides[0] != 1:
            raise _invalid(f"{what} must be contiguous (stride 1), has stride {info.strides[0]}")
        return 1, n, n
    if len(info.shape) != 2:
        raise _invalid(f"{what} must be 1-D or 2-D [batch, n], got shape {info.shape}")
    batch, n = info.shape
    if n > 1 and info.strides[1] != 1:
        raise _invalid(f"{what} rows must be contiguous (stride 1 along the last dimension), "
                       f"got strides {info.strides}")
    row_stride = info.strides[0] if batch > 1 else max(info.strides[0], n)
    if batch > 1 and row_stride < n:
        raise _invalid(f"{what} row stride {row_stride} is smaller than n = {n}")
    return batch, n, row_stride


def _check_row_array(a, what, rows, lead, device):
    torch = sys.modules["torch"]
    if a.dtype != torch.int32:
        raise _type_error(f"{what} must be int32, got {a.dtype} (convert with .int())")
    if not a.is_cuda:
        raise _invalid(f"{what} is on {a.device}, not on a CUDA device")
    if device is not None and a.device.index != device:
        raise _invalid(f"{what} is on cuda:{a.device.index}, the input on cuda:{device}")
    if not ((a.dim() == 1 and a.shape[0] >= rows) or (lead is not None and tuple(a.shape) == tuple(lead))):
        want = f"[{rows}]" if lead is None or len(lead) <= 1 else f"[{rows}] or {list(lead)}"
        raise _invalid(f"{what} must be {want} (one entry per row), got shape {list(a.shape)}")
    return a.reshape(-1)[:rows] if a.dim() != 1 else a[:rows]


def resolve_ranges(ranges, lengths, row_starts, device, rows, lead=None):
    """The int32 [rows, 2] ranges array for `ranges`, or for `lengths`
    (int32 [rows]: row i uses columns [0, lengths[i])) with optional
    `row_starts` (int32 [rows]: [row_starts[i], row_starts[i] + lengths[i])).
    lengths / row_starts must be CUDA torch tensors on `device` (an ordinal,
    or None when unknown); the conversion runs on the GPU (asynchronously,
    on torch's current stream). Ends past 2^31 - 1 are clamped; the kernels
    clamp ranges to [0, n) and treat start > end as empty. `lead`: the
    leading dimensions of the input, also accepted as the shape."""
    if lengths is None:
        if row_starts is not None:
            raise _invalid("row_starts needs lengths: row i uses [row_starts[i], row_starts[i] + lengths[i])")
        return ranges
    if ranges is not None:
        raise _invalid("give either ranges or lengths (with optional row_starts), not both")
    for what, a in (("lengths", lengths), ("row_starts", row_starts)):
        if a is not None and not _is_torch_tensor(a):
            raise _type_error(f"{what} must be a CUDA torch tensor (lengths and row_starts are turned into "
                              f"ranges with torch), got {type(a).__name__}; for other arrays pass ranges, "
                              f"an int32 [rows, 2] array of [start, end)")
    torch = sys.modules["torch"]
    ln = _check_row_array(lengths, "lengths", rows, lead, device)
    if row_starts is None:
        return torch.stack((torch.zeros_like(ln), ln), dim=1)
    st = _check_row_array(row_starts, "row_starts", rows, lead, device)
    if st.device != ln.device:
        raise _invalid(f"row_starts are on {st.device}, lengths on {ln.device}")
    end = (st.to(torch.int64) + ln.to(torch.int64)).clamp_(-INT32_MAX - 1, INT32_MAX).to(torch.int32)
    return torch.stack((st, end), dim=1)
