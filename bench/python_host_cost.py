#!/usr/bin/env python3
"""Host-side cost of the Python package on a GPU machine.

  python_host_cost.py first-call DTYPE   in this (fresh) process: the first
      topk_tune.topk call of five shapes, each timed to its result
      (synchronised), after `import topk_tune`; run it with an empty
      TOPK_TUNE_KERNEL_DIR and no tuning cache to see the shipped kernels,
      again with the same directory for a second process.
  python_host_cost.py overhead           per-call host time (1000 calls
      issued back to back, one synchronisation at the end) of
      topk_tune.topk, torch.ops.topk_tune.topk and torch.topk on small and
      large rows, then the op's profile (cProfile, top functions).

One JSON object per line on stdout.
"""
import cProfile
import io
import json
import pstats
import sys
import time

import torch

SHAPES = ((1, 128256, 50), (64, 32768, 2048), (4096, 256, 8), (16, 4096, 64), (128, 201088, 64))
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def first_call(dt):
    t0 = time.perf_counter()
    import topk_tune  # noqa: PLC0415

    imported = time.perf_counter() - t0
    for b, n, k in SHAPES:
        x = torch.randn(b, n, device="cuda").to(DTYPES[dt])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        v, i = topk_tune.topk(x, k)
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        ok = torch.equal(v.float().sort(dim=-1).values, x.topk(k).values.float().sort(dim=-1).values)
        print(json.dumps({"dtype": dt, "shape": f"{b}x{n}", "k": k, "first_call_ms": round(ms, 2),
                          "import_s": round(imported, 2), "exact": ok}), flush=True)


def per_call_us(fn, calls=1000):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def overhead():
    import topk_tune  # noqa: PLC0415

    for b, n, k in ((64, 256, 8), (4096, 256, 8), (64, 32768, 2048)):
        x = torch.randn(b, n, device="cuda")
        row = {"shape": f"{b}x{n}", "k": k}
        row["topk_tune.topk_us"] = round(per_call_us(lambda: topk_tune.topk(x, k)), 1)
        row["topk_tune.topk_int64_sorted_us"] = round(
            per_call_us(lambda: topk_tune.topk(x, k, sorted=True, index_dtype=torch.int64)), 1)
        row["torch.ops.topk_tune.topk_us"] = round(per_call_us(lambda: torch.ops.topk_tune.topk(x, k)), 1)
        row["torch.topk_us"] = round(per_call_us(lambda: torch.topk(x, k)), 1)
        print(json.dumps(row), flush=True)
    x = torch.randn(64, 256, device="cuda")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        torch.ops.topk_tune.topk(x, 8)
    torch.cuda.synchronize()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
    print(json.dumps({"profile_500_op_calls": s.getvalue().splitlines()[-20:]}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "first-call":
        first_call(sys.argv[2] if len(sys.argv) > 2 else "f32")
    elif len(sys.argv) >= 2 and sys.argv[1] == "overhead":
        overhead()
    else:
        sys.exit(__doc__)
