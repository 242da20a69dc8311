#!/usr/bin/env python3
"""Random problems through the Python package, each checked against
torch.topk's value multiset. Needs torch and a GPU; run by hand on the
device machine:

    python3 python/tests/gpu_test_topk.py [--count 1000] [--seed 1] [--db cache.db]

Each problem draws a dtype (f32, f16, bf16), a shape (tuned DSA / sampling /
MoE shapes and untuned random ones, n from 1 to 400k, k from 0 to past n),
largest or smallest, ranges, values, sorted, an input distribution
(normal, few distinct values, all equal, NaN / inf / -0.0 sprinkled, ...),
a row stride wider than n now and then, and one of the three entry points
(topk_tune.topk, Plan.__call__, Plan.run_into with allocate_outputs).

A problem passes when, for every row, the selected values (as a multiset)
equal torch.topk's on the row's clamped [start, end) range, the indices are
distinct and inside the range, exactly max(0, k - len) entries are -1, the
values written (if any) are the input's values at the indices (padding: the
dtype's lowest finite value when largest), and sorted output is ordered.
NaN ranks above +inf on both sides, as in torch; -0.0 equals +0.0.

Prints the counts per category and every mismatch; exits 1 on any.
"""
import argparse
import collections
import math
import os
import random
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import topk_tune  # noqa: E402

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
TUNED = [(64, 32768, 2048), (1, 131072, 2048), (128, 201088, 64), (256, 128256, 1024), (4096, 256, 8),
         (16384, 256, 8)]
MAX_ELEMS = 1 << 23


def draw(rng):
    """One random problem as a dict."""
    dtype = rng.choice(list(DT))
    r = rng.random()
    if r < 0.12:
        batch, n, k = rng.choice(TUNED)
        batch = min(batch, max(1, MAX_ELEMS // n))
    else:
        n = int(math.exp(rng.uniform(0, math.log(400000))))
        if rng.random() < 0.2:
            n = rng.choice([1, 2, 3, 31, 32, 33, 255, 256, 257, 511, 512, 513, 4095, 4096, 4097, 65537])
        batch = int(math.exp(rng.uniform(0, math.log(128))))
        batch = max(1, min(batch, MAX_ELEMS // max(n, 1)))
        kr = rng.random()
        if kr < 0.05:
            k = 0
        elif kr < 0.12:
            k = n + rng.randint(1, 40)  # past n: pads with -1
        elif kr < 0.2:
            k = n
        else:
            k = max(1, min(n, int(math.exp(rng.uniform(0, math.log(min(n, 8192) + 1))))))
    if rng.random() < 0.03:
        batch = 0
    return {
        "dtype": dtype, "batch": batch, "n": n, "k": k,
        "largest": rng.random() < 0.6,
        "ranges": rng.random() < 0.3,
        "values": rng.random() < 0.5,
        "sorted": rng.random() < 0.3 and k <= 16384,
        "dist": rng.choice(["normal", "normal", "normal", "uniform", "few", "equal", "special", "sorted"]),
        "stride_pad": rng.choice([0, 0, 0, 0, 1, 7, 64]),
        "one_d": batch == 1 and rng.random() < 0.3,
        "api": rng.choice(["topk", "call", "run_into"]),
    }


def make_input(p, gen):
    b, n = p["batch"], p["n"]
    width = n + p["stride_pad"]
    d = p["dist"]
    if d == "uniform":
        x = torch.rand(b, width, device="cuda", generator=gen)
    elif d == "few":
        x = torch.randint(0, 4, (b, width), device="cuda", generator=gen).float()
    elif d == "equal":
        x = torch.full((b, width), 1.5, device="cuda")
    elif d == "sorted":
        x = torch.arange(width, device="cuda", dtype=torch.float32).repeat(b, 1) / max(width, 1)
        if torch.rand(1, generator=gen, device="cuda").item() < 0.5:
            x = x.flip(1)
    else:
        x = torch.randn(b, width, device="cuda", generator=gen)
    if d == "special" and b * n > 0:
        specials = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0], device="cuda")
        mask = torch.rand(b, width, device="cuda", generator=gen) < 0.05
        pick = torch.randint(0, len(specials), (b, width), device="cuda", generator=gen)
        x = torch.where(mask, specials[pick], x)
    x = x.to(DT[p["dtype"]])
    return x[:, :n] if p["stride_pad"] else x


def make_ranges(p, rng):
    n = p["n"]
    rows = []
    for _ in range(p["batch"]):
        r = rng.random()
        if r < 0.15:
            s, e = 0, n
        elif r < 0.25:
            s = rng.randint(-n, n + 5)
            e = s - rng.randint(0, 10)  # empty (start >= end)
        elif r < 0.35:
            s, e = rng.randint(-n - 5, -1), rng.randint(-n, n * 2 + 5)  # clamped
        else:
            s = rng.randint(0, n)
            e = rng.randint(s, n)
        rows.append([max(min(s, 2**31 - 1), -2**31), max(min(e, 2**31 - 1), -2**31)])
    return torch.tensor(rows, dtype=torch.int32, device="cuda").reshape(p["batch"], 2)


def sort_nan(v, descending):
    # torch.sort already orders NaN above +inf (last ascending, first
    # descending), matching topk-tune's rule.
    return torch.sort(v, dim=-1, descending=descending).values


def equal_nan(a, b):
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def lowest(dtype):
    return torch.finfo(DT[dtype]).min


def run_problem(p, lib, rng, gen):
    """Returns a list of failure strings (empty: pass)."""
    b, n, k = p["batch"], p["n"], p["k"]
    x = make_input(p, gen)
    rg = make_ranges(p, rng) if p["ranges"] else None
    xin = x[0] if p["one_d"] else x
    if p["api"] == "topk":
        res = topk_tune.topk(xin, k, largest=p["largest"], sorted=p["sorted"], ranges=rg, values=p["values"],
                             library=lib)
        idx, vals = res.indices, res.values
    else:
        plan = lib.plan(p["dtype"], b, n, k, row_stride=x.stride(0) if (p["stride_pad"] and b > 1) else 0,
                        largest=p["largest"], ranges=p["ranges"], values=p["values"], sorted=p["sorted"])
        if p["api"] == "call":
            out = plan(xin, ranges=rg)
        else:
            out = plan.run_into(xin, plan.allocate_outputs(), ranges=rg)
        vals, idx = (out if p["values"] else (None, out))
    torch.cuda.synchronize()
    if p["one_d"] and idx.dim() == 1:
        idx = idx.unsqueeze(0)
        vals = vals.unsqueeze(0) if vals is not None else None
    fails = []
    if tuple(idx.shape) != (b, k) or idx.dtype != torch.int32:
        return [f"indices shape {tuple(idx.shape)} {idx.dtype}, want ({b}, {k}) int32"]
    if p["values"] and (vals is None or tuple(vals.shape) != (b, k) or vals.dtype != DT[p["dtype"]]):
        return [f"values {None if vals is None else (tuple(vals.shape), vals.dtype)}"]
    if b == 0 or k == 0:
        return fails
    xf = x.float()
    col = torch.arange(n, device="cuda")
    if rg is not None:
        s = rg[:, 0].long().clamp(0, n)
        e = rg[:, 1].long().clamp(0, n)
        e = torch.maximum(e, s)
    else:
        s = torch.zeros(b, dtype=torch.long, device="cuda")
        e = torch.full((b,), n, dtype=torch.long, device="cuda")
    length = e - s
    inside = (col[None, :] >= s[:, None]) & (col[None, :] < e[:, None])
    fill = float("-inf") if p["largest"] else float("nan")
    masked = torch.where(inside, xf, torch.full_like(xf, fill))
    kk = min(k, n)
    ref = torch.topk(masked, kk, dim=-1, largest=p["largest"], sorted=True).values
    if k > kk:
        ref = torch.cat([ref, torch.full((b, k - kk), fill, device="cuda")], dim=1)
    valid = idx >= 0
    want_valid = torch.clamp(length, max=k)
    bad_count = (valid.sum(1) != want_valid).nonzero().flatten()
    if len(bad_count):
        r = int(bad_count[0])
        fails.append(f"row {r}: {int(valid[r].sum())} valid indices, want {int(want_valid[r])}")
    il = idx.long()
    oob = valid & ((il < s[:, None]) | (il >= e[:, None]) | (il >= n))
    if bool(oob.any()):
        r = int(oob.any(1).nonzero()[0])
        fails.append(f"row {r}: index outside [{int(s[r])}, {int(e[r])}): {idx[r][oob[r]][:5].tolist()}")
        return fails
    if bool((idx < -1).any()):
        fails.append("indices below -1")
        return fails
    si = torch.sort(torch.where(valid, il, torch.full_like(il, -1)), dim=1).values
    dup = (si[:, 1:] == si[:, :-1]) & (si[:, 1:] >= 0)
    if bool(dup.any()):
        fails.append(f"row {int(dup.any(1).nonzero()[0])}: duplicate indices")
    got = torch.where(valid, xf.gather(1, il.clamp(min=0)), torch.full_like(ref, fill))
    desc = p["largest"]
    g, w = sort_nan(got, desc), sort_nan(ref, desc)
    rows_bad = ~((g == w) | (torch.isnan(g) & torch.isnan(w))).all(1)
    if bool(rows_bad.any()):
        r = int(rows_bad.nonzero()[0])
        diff = ((g[r] != w[r]) & ~(torch.isnan(g[r]) & torch.isnan(w[r]))).nonzero().flatten()[:3].tolist()
        fails.append(f"row {r}: value multiset differs from torch.topk at sorted positions {diff}: "
                     f"got {[g[r][i].item() for i in diff]} want {[w[r][i].item() for i in diff]}")
    if vals is not None:
        vf = vals.float()
        ok = torch.where(valid, (vf == got) | (torch.isnan(vf) & torch.isnan(got)), torch.ones_like(valid))
        if not bool(ok.all()):
            fails.append(f"row {int((~ok).any(1).nonzero()[0])}: written values differ from input at the indices")
        if p["largest"]:
            pad_ok = torch.where(valid, torch.ones_like(valid), vf == lowest(p["dtype"]))
            if not bool(pad_ok.all()):
                fails.append("padding values are not the dtype's lowest finite value")
    if p["sorted"]:
        for r in range(b):
            v = got[r][valid[r]]
            if v.numel() < 2:
                continue
            sv = sort_nan(v, desc)
            if not equal_nan(v, sv):
                fails.append(f"row {r}: sorted output is not in order")
                break
            # Padding after the selected entries.
            nv = int(valid[r].sum())
            if nv < k and bool(valid[r][nv:].any()):
                fails.append(f"row {r}: sorted output has -1 before selected entries")
                break
    return fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", default="", help="tuning cache (default: a fresh temporary file)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return 0
    db = args.db or os.path.join(tempfile.mkdtemp(prefix="topk_gpu_test_"), "tuning.db")
    lib = topk_tune.Library(cache_path=db)
    print(f"topk_tune {topk_tune.__version__} ({topk_tune.library_path()}) on {lib.device_description}; "
          f"torch {torch.__version__}; cache {db}")
    rng = random.Random(args.seed)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    counts = collections.Counter()
    mismatches = []
    t0 = time.time()
    for i in range(args.count):
        p = draw(rng)
        try:
            fails = run_problem(p, lib, rng, gen)
        except topk_tune.TopkError as e:
            fails = [f"TopkError {e.code_name}: {e.message}"]
        counts["problems"] += 1
        for key in ("dtype", "api", "dist"):
            counts[f"{key}={p[key]}"] += 1
        for flag in ("largest", "ranges", "values", "sorted"):
            counts[flag if p[flag] else f"not {flag}"] += 1
        counts["k > n"] += p["k"] > p["n"]
        counts["k = 0"] += p["k"] == 0
        counts["batch = 0"] += p["batch"] == 0
        counts["strided"] += bool(p["stride_pad"])
        counts["1-D"] += bool(p["one_d"])
        counts["tuned shape"] += (p["batch"], p["n"], p["k"]) in TUNED
        if fails:
            mismatches.append((i, p, fails))
            print(f"MISMATCH #{i}: {p}\n    " + "\n    ".join(fails), flush=True)
        elif args.verbose:
            print(f"ok #{i}: {p}")
        if (i + 1) % 100 == 0:
            print(f"  {i + 1} problems, {len(mismatches)} mismatches, {time.time() - t0:.0f} s", flush=True)
    print()
    for key in sorted(counts):
        print(f"  {key}: {counts[key]}")
    print(f"\n{counts['problems']} problems, {len(mismatches)} mismatches, {time.time() - t0:.0f} s")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
