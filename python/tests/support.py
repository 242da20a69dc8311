"""Helpers for the CPU tests: fake device arrays and a plan without a GPU."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import topk_tune  # noqa: E402
from topk_tune._library import Plan  # noqa: E402

_ITEM = {"<f4": 4, "<f2": 2, "<i4": 4, "<i8": 8, "<f8": 8, "<V2": 2}


class FakeArray:
    """An object with __cuda_array_interface__ (version 3) and nothing else:
    what CuPy or Numba hand over, without a GPU behind it."""

    def __init__(self, shape, typestr="<f4", ptr=0x7F0000000000, strides=None, readonly=False, mask=None,
                 stream=None):
        size = _ITEM.get(typestr, 4)
        cai = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly), "version": 3,
               "strides": None if strides is None else tuple(s * size for s in strides)}
        if mask is not None:
            cai["mask"] = mask
        if stream is not None:
            cai["stream"] = stream
        self.__cuda_array_interface__ = cai


class FakeLibrary:
    """Stands in for a Library: Plan only reads .device."""

    device = 0


def make_plan(dtype="f32", batch=4, n=100, k=10, row_stride=0, largest=True, ranges=False, values=False,
              sorted=False, deterministic=False):
    """A Plan with no C handle: validation runs in Python as usual, and
    whatever passes it reaches topk_plan_run, which rejects the NULL plan
    (TOPK_INVALID_ARGUMENT "plan is NULL") without launching anything."""
    problem = {"dtype": dtype, "batch": batch, "n": n, "k": k, "row_stride": row_stride, "largest": largest,
               "ranges": ranges, "values": values, "sorted": sorted, "deterministic": deterministic}
    return Plan(FakeLibrary(), None, problem)


def have_torch():
    try:
        import torch  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


__all__ = ["FakeArray", "FakeLibrary", "make_plan", "have_torch", "topk_tune"]
