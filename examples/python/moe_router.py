#!/usr/bin/env python3
"""An MoE router: the top 8 of 256 experts per token (DeepSeek-V3's shape).

The router softmaxes (or sigmoids) its logits and picks the top 8 experts of
each token; the picks go to the dispatch as int64 indices with their
weights, order irrelevant: torch.ops.topk_tune.topk(..., sorted=False), a
drop-in for torch.topk. Checked as sets against torch.topk.

    python3 examples/python/moe_router.py [--iters 50]
"""
import sys

from common import median_ms, report, start

import torch
import topk_tune  # noqa: F401

EXPERTS, TOP = 256, 8


def main():
    args = start(__doc__)
    ok = True
    for tokens, dt in ((4096, torch.float32), (16384, torch.bfloat16), (64, torch.float32)):
        scores = torch.randn(tokens, EXPERTS, device="cuda").sigmoid().to(dt)
        ours = lambda: torch.ops.topk_tune.topk(scores, TOP, sorted=False)  # noqa: E731
        theirs = lambda: torch.topk(scores, TOP, sorted=False)  # noqa: E731
        (v, i), (rv, ri) = ours(), theirs()
        good = i.dtype == torch.int64 and torch.equal(v.sort(dim=-1).values, rv.sort(dim=-1).values)
        good &= torch.equal(torch.gather(scores, 1, i), v)
        # As sets where there are no ties at the 8th value (bf16 has some).
        good &= dt != torch.float32 or torch.equal(i.sort(dim=-1).values, ri.sort(dim=-1).values)
        ok &= report(f"router {tokens}x{EXPERTS} top-{TOP} {str(dt)[6:]}", median_ms(ours, iters=args.iters),
                     median_ms(theirs, iters=args.iters), good)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
