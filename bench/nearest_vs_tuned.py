#!/usr/bin/env python3
"""Nearest-shape dispatch against tuning the shape itself (issue: nearest must
reach at least 85% of the tuned speed).

For each of ten DSA-style shapes that the `dsa` preset does not contain, the
runtime plans it twice on the same tensors: with --grid-db (a cache tuned on
the preset's shapes, so dispatch takes the nearest tuned shape) and with
--exact-db (a cache in which exactly this shape was tuned). Both plans are
checked against torch.topk, then timed the same way as bench/compare_torch.py
(CUDA-graph replays, L2-hot input, interleaved rounds, median).

  python3 bench/nearest_vs_tuned.py --print-shapes          (shapes for `topk-tune tune`)
  python3 bench/nearest_vs_tuned.py --grid-db dsa.db --exact-db exact.db [--json out.json]
Exit status: 0 when every plan is exact against torch.topk and dispatched as
expected (the speed criterion is reported, not enforced), 1 otherwise.
"""
import argparse
import json
import os
import statistics
import sys

# f32, per-row ranges, L2-hot: off the preset's grid in n, k or batch.
SHAPES = [  # batch, n, k
    (32, 32768, 2048), (2, 131072, 2048), (16, 65536, 2048), (64, 49152, 2048), (1, 98304, 1536),
    (96, 131072, 2048), (4, 262144, 2048), (64, 8192, 1024), (1, 393216, 2048), (32, 16384, 512),
]


def spec(b, n, k):
    return f"f32:{b}x{n}:{k}:ranges"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid-db", help="cache tuned on the dsa preset (nearest dispatch)")
    ap.add_argument("--exact-db", help="cache in which these shapes were tuned (exact dispatch)")
    ap.add_argument("--json", default="")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per plan")
    ap.add_argument("--print-shapes", action="store_true", help="print the shapes as --shape arguments and exit")
    args = ap.parse_args()
    if args.print_shapes:
        print(" ".join(f"--shape {spec(*s)}" for s in SHAPES))
        return 0
    if not args.grid_db or not args.exact_db:
        ap.error("--grid-db and --exact-db are required")
    for p in (args.grid_db, args.exact_db):
        if not os.path.isfile(p):
            ap.error(f"no such cache file: {p}")

    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    sys.path.insert(0, os.path.join(here, "..", "python"))
    import topk_tune  # noqa: E402
    from compare_torch import time_graph  # noqa: E402

    grid = topk_tune.Library(cache_path=args.grid_db, write_back=False)
    exact = topk_tune.Library(cache_path=args.exact_db, write_back=False)
    print(f"device: {torch.cuda.get_device_name(0)}")
    rows, bad = [], 0
    for b, n, k in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(7 + n + b)
        x = torch.randn(b, n, device="cuda", generator=g)
        rg = torch.tensor([[0, n]] * b, dtype=torch.int32, device="cuda")
        ref = torch.topk(x, k, dim=-1).values.sort(dim=-1).values
        plans = {"nearest": grid.plan(dtype="f32", batch=b, n=n, k=k, ranges=True),
                 "exact": exact.plan(dtype="f32", batch=b, n=n, k=k, ranges=True)}
        row = {"shape": spec(b, n, k)}
        for name, plan in plans.items():
            got = torch.gather(x, 1, plan(x, ranges=rg).long()).sort(dim=-1).values
            ok = bool(torch.equal(got, ref))
            row[name + "_variant"], row[name + "_dispatch"], row[name + "_ok"] = plan.variant, plan.dispatch, ok
            if not ok or plan.dispatch != name:
                bad += 1
                print(f"FAIL {spec(b, n, k)}: {name} plan dispatched {plan.dispatch}, exact={ok}", file=sys.stderr)
        times = {"nearest": [], "exact": []}
        for _ in range(args.rounds):
            for name, plan in plans.items():
                outs = plan.allocate_outputs()
                fns = [(lambda p=plan, o=outs: p.run_into(x, o, ranges=rg)) for _ in range(20)]
                times[name].append(time_graph(fns, args.reps)[0])
        row["nearest_us"] = statistics.median(times["nearest"])
        row["exact_us"] = statistics.median(times["exact"])
        row["fraction"] = row["exact_us"] / row["nearest_us"]
        rows.append(row)
        del x
        torch.cuda.empty_cache()

    print("\n| shape | tuned itself | nearest tuned shape | nearest / tuned speed | nearest variant | tuned variant |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['shape']} | {r['exact_us']:.2f} us | {r['nearest_us']:.2f} us | {100 * r['fraction']:.0f}% "
              f"| {r['nearest_variant']} | {r['exact_variant']} |")
    fr = [r["fraction"] for r in rows]
    met = sum(f >= 0.85 for f in fr)
    print(f"\nnearest dispatch reaches >= 85% of the tuned speed on {met} of {len(rows)} shapes; "
          f"lowest {100 * min(fr):.0f}%, median {100 * statistics.median(fr):.0f}%; {bad} failed checks")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
