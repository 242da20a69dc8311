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
torch is imported only when needed.
"""
from ._arrays import dtype_name
from ._arrays import TopkResult
from ._capi import (ArgumentOverflowError, ArgumentTypeError, Code, InvalidArgumentError, TopkError, code_name,
                    default_cache_path, library_path)
from ._functional import clear_caches, default_library, topk
from ._library import Library, Plan

__version__ = "0.1.0"

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
