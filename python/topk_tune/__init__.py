"""topk-tune from Python: exact, autotuned top-k on NVIDIA GPUs.

A thin ctypes layer over libtopk's C API (no compiled extension). Inputs are
CUDA torch tensors or any object with ``__cuda_array_interface__``; outputs
are torch tensors; launches go to torch's current stream.

    import torch, topk_tune
    x = torch.randn(64, 32768, device="cuda")
    values, indices = topk_tune.topk(x, 2048)          # like torch.topk

    lib = topk_tune.Library(cache_path="tuning.db")     # or explicit plans
    plan = lib.plan("f32", batch=64, n=32768, k=2048, ranges=True)
    indices = plan(x, ranges=ranges)                     # int32 [64, 2048]
    indices = plan(x, lengths=seq_lens)                  # or per-row lengths
    outs = plan.allocate_outputs()                       # for CUDA graphs:
    plan.run_into(x, outs, ranges=ranges)                # no allocation

Pairs of outputs are (values, indices) everywhere, as in torch.topk.
Errors raise TopkError(code, message); bad arguments raise its subclasses
InvalidArgumentError (also a ValueError; ArgumentOverflowError, also an
OverflowError, for integers too large) and ArgumentTypeError (also a
TypeError). See docs/PYTHON.md.

libtopk is found through $TOPK_LIBRARY, a copy in topk_tune/_lib/, the
install this package came with, a build tree beside the source
(python/../build*/lib), or the system loader; library_path() says which.
When torch is installed, importing the package imports it and registers
the operators torch.ops.topk_tune.topk / topk_ranged / topk_values (see
_ops.py; they need no GPU to register, libtopk is loaded on first use).
TOPK_TUNE_TORCH_OPS=0 skips that: then torch is imported only when needed.
"""
import sys

from ._arrays import dtype_name
from ._arrays import TopkResult
from ._capi import (ArgumentOverflowError, ArgumentTypeError, Code, InvalidArgumentError, TopkError, code_name,
                    default_cache_path, library_path)
from ._functional import clear_caches, default_library, topk
from ._library import Library, Plan

__version__ = "0.1.0"


def _register_torch_ops():
    """Registers the torch operators when torch can be imported; never fails
    the import (a broken torch install leaves the ctypes API usable)."""
    import importlib.util  # noqa: PLC0415
    import os  # noqa: PLC0415

    if os.environ.get("TOPK_TUNE_TORCH_OPS", "1") == "0":
        return None
    try:
        if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
            return None
        from . import _ops  # noqa: PLC0415

        return _ops.register()
    except Exception as e:  # noqa: BLE001
        import warnings  # noqa: PLC0415

        warnings.warn(f"topk_tune: torch.ops.topk_tune not registered: {e!r}", RuntimeWarning, stacklevel=2)
        return None


_torch_library = _register_torch_ops()

__all__ = [
    "ArgumentOverflowError",
    "ArgumentTypeError",
    "Code",
    "InvalidArgumentError",
    "Library",
    "Plan",
    "TopkError",
    "TopkResult",
    "clear_caches",
    "code_name",
    "default_cache_path",
    "default_library",
    "dtype_name",
    "library_path",
    "topk",
]
