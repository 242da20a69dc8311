#!/usr/bin/env python3
"""Speed over random instances of the same distribution: the issue-6 shapes
(bench/compare_torch.py's list, warp-per-row MoE shapes left out) timed on
--seeds different random inputs each, with one plan per shape. A kernel
whose fast path depends on the data (the speculative capture of pass 0) can
be fast on one instance and slow on the next; the spread shows it.

  python3 bench/seed_spread.py [--db tuning.db] [--seeds 8]
"""
import argparse
import os
import statistics
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "python"))
import topk_tune  # noqa: E402
from compare_torch import DT, SHAPES, time_graph  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("TOPK_TUNE_DB", ""))
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    lib = topk_tune.Library(cache_path=args.db or None, write_back=False)
    print(f"device: {torch.cuda.get_device_name(0)}; library: {topk_tune.library_path()}")
    print("| shape | min | median | max | max / min | variant (dispatch) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, dt, b, n, k, ranges, values, l2, _ in SHAPES:
        if n <= 512:
            continue
        plan = lib.plan(dtype=dt, batch=b, n=n, k=k, ranges=ranges, values=values)
        rg = torch.tensor([[0, n]] * b, dtype=torch.int32, device="cuda") if ranges else None
        outs = plan.allocate_outputs()
        times = []
        for seed in range(args.seeds):
            torch.manual_seed(1000 + seed)
            x = torch.randn(b, n, device="cuda") * (2 if name == "sampling" else 1)
            x = x.to(DT[dt])
            fns = [(lambda: plan.run_into(x, outs, ranges=rg)) for _ in range(10)]
            times.append(time_graph(fns, args.reps)[0])
            del x
        print(f"| {dt}:{b}x{n}:{k} | {min(times):.2f} us | {statistics.median(times):.2f} us | {max(times):.2f} us "
              f"| {max(times) / min(times):.2f}x | {plan.variant} ({plan.dispatch}) |")


if __name__ == "__main__":
    main()
