"""Shared by the examples: import topk_tune (installed, or from this
source tree), time a callable with CUDA events, print a comparison line."""
import os
import statistics
import sys

try:
    import topk_tune  # noqa: F401 (registers torch.ops.topk_tune)
except ImportError:
    # Run from a source checkout without the wheel installed.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import topk_tune  # noqa: F401

import torch


def start(doc):
    """The examples' command line (--iters N), the GPU check and a fixed
    seed; returns the parsed arguments."""
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    need_gpu()
    torch.manual_seed(0)
    return args


def need_gpu():
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        sys.exit(0)


def median_ms(fn, warmup=10, iters=50):
    """Median time of fn() in milliseconds over `iters` runs after `warmup`
    (the first call plans and may compile: warm-up keeps that out)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def report(name, ours, torch_ms, ok):
    print(f"{name:<44} topk_tune {ours * 1e3:9.1f} us   torch.topk {torch_ms * 1e3:9.1f} us   "
          f"x{torch_ms / ours:5.2f}   {'OK' if ok else 'MISMATCH'}", flush=True)
    return ok


def same_values(x, idx, ref_values):
    """The values at idx (ignoring -1 padding) equal ref_values as
    multisets, per row."""
    got = torch.gather(x.float(), -1, idx.long().clamp(min=0))
    got = torch.where(idx >= 0, got, torch.full_like(got, float("-inf")))
    return torch.equal(got.sort(dim=-1).values, ref_values.float().sort(dim=-1).values)
