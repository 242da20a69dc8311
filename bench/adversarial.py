#!/usr/bin/env python3
"""Speed on adversarial inputs against normal data of the same shape.

For the seed shapes (bench/compare_torch.py's list) the runtime plans each
shape once from --db and times the same plan, and torch.topk, on normal data
(logits-like for the sampling shapes) and on: normal + 100 (shifted), a ReLU
plateau (about 70% exact zeros), 16 distinct values, all-equal rows, 7
distinct values and a k-th value tied many times; every output is checked
against torch.topk first. Timing as in compare_torch.py (CUDA-graph replays,
median). The criterion: at most 1.25x the normal-data time on shifted,
plateau and 16 distinct values.

  python3 bench/adversarial.py --db tuning.db [--json out.json] [--torch]
Exit status 1 when an output is wrong.
"""
import argparse
import json
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "python"))
import topk_tune  # noqa: E402
from compare_torch import DT, SHAPES, copies_for, time_graph  # noqa: E402

ALL_DISTS = ["normal", "shifted", "plateau", "distinct16", "all_equal", "few_distinct", "ties_at_k"]
DISTS = list(ALL_DISTS)
ROBUST = ["shifted", "plateau", "distinct16"]  # the 1.25x criterion


def make(dist, b, n, dtype, seed, logits):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dist == "normal":
        x = torch.randn(b, n, device="cuda", generator=g) * (2 if logits else 1)
    elif dist == "shifted":
        x = torch.randn(b, n, device="cuda", generator=g) * (2 if logits else 1) + 100
    elif dist == "plateau":
        x = torch.relu(torch.randn(b, n, device="cuda", generator=g) - 0.52)
    elif dist == "distinct16":
        x = (torch.randint(-8, 8, (b, n), device="cuda", generator=g) * 0.25).float()
    elif dist == "all_equal":
        x = torch.full((b, n), 0.5, device="cuda")
    elif dist == "few_distinct":
        x = torch.randint(-3, 4, (b, n), device="cuda", generator=g).float()
    else:  # ties_at_k: values on a grid of 1/8, so the k-th value repeats
        x = torch.round(torch.randn(b, n, device="cuda", generator=g) * 8) / 8
    return x.to(DT[dtype])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default=os.environ.get("TOPK_TUNE_DB", ""))
    ap.add_argument("--json", default="")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--torch", action="store_true", help="also time torch.topk on every input")
    ap.add_argument("--dists", default=",".join(ALL_DISTS), help="comma-separated inputs (normal is always timed)")
    args = ap.parse_args()
    global DISTS, ROBUST  # noqa: PLW0603
    DISTS = ["normal"] + [d for d in args.dists.split(",") if d and d != "normal"]
    ROBUST = [d for d in ROBUST if d in DISTS] or DISTS[1:] or ["normal"]
    lib = topk_tune.Library(cache_path=args.db or None, write_back=False)
    print(f"device: {torch.cuda.get_device_name(0)}")
    rows, bad = [], 0
    for name, dt, b, n, k, ranges, values, l2, _ in SHAPES:
        plan = lib.plan(dtype=dt, batch=b, n=n, k=k, ranges=ranges, values=values)
        rg = torch.tensor([[0, n]] * b, dtype=torch.int32, device="cuda") if ranges else None
        nbytes = b * n * torch.tensor([], dtype=DT[dt]).element_size()
        ncopies = copies_for(nbytes, l2)
        per_graph = 20 if l2 == "hot" else ncopies
        row = {"shape": f"{dt}:{b}x{n}:{k}", "variant": plan.variant, "dispatch": plan.dispatch}
        for dist in DISTS:
            xs = [make(dist, b, n, dt, 100 + i, name == "sampling") for i in range(ncopies)]
            out = plan(xs[0], ranges=rg)
            idx = out.indices if values else out
            got = torch.gather(xs[0].float(), 1, idx.long()).sort(dim=-1).values
            ref = torch.topk(xs[0].float(), k, dim=-1).values.sort(dim=-1).values
            srt = idx.long().sort(dim=-1).values
            distinct = bool((srt[:, 1:] != srt[:, :-1]).all()) and bool(((srt >= 0) & (srt < n)).all())
            if not torch.equal(got, ref) or not distinct:
                bad += 1
                print(f"FAIL {row['shape']} {dist}: wrong values or repeated indices", file=sys.stderr)
            outs = plan.allocate_outputs()
            fns = [(lambda x=xs[i % ncopies]: plan.run_into(x, outs, ranges=rg)) for i in range(per_graph)]
            row[dist] = time_graph(fns, args.reps)[0]
            if args.torch:
                tfns = [(lambda x=xs[i % ncopies]: torch.topk(x, k, dim=-1, sorted=False)) for i in range(per_graph)]
                row["torch_" + dist] = time_graph(tfns, args.reps)[0]
            del xs
            torch.cuda.empty_cache()
        rows.append(row)
    head = " | ".join(DISTS)
    print(f"\n| shape | {head} | worst of {'/'.join(ROBUST)} / normal | variant (dispatch) |")
    print("| --- " * (len(DISTS) + 3) + "|")
    worst_all = 0.0
    for r in rows:
        worst = max(r[d] for d in ROBUST) / r["normal"]
        worst_all = max(worst_all, worst)
        r["worst_ratio"] = worst
        cells = " | ".join(f"{r[d]:.2f}" for d in DISTS)
        print(f"| {r['shape']} | {cells} | {worst:.2f}x | {r['variant']} ({r['dispatch']}) |")
        if args.torch:
            tcells = " | ".join(f"{r['torch_' + d]:.2f}" for d in DISTS)
            print(f"| torch.topk | {tcells} | {max(r['torch_' + d] for d in ROBUST) / r['torch_normal']:.2f}x | |")
    print(f"\nworst {'/'.join(ROBUST)} / normal: {worst_all:.2f}x (criterion: at most 1.25x); {bad} wrong outputs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
