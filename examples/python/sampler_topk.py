#!/usr/bin/env python3
"""A sampler's top-k over the vocabulary (128K-256K logits per request).

vLLM's apply_top_k_only takes the sorted top max(k) values of each row and
reads each request's k-th value as its threshold; that needs the values,
sorted, and no indices: torch.ops.topk_tune.topk_values. Values must equal
torch.topk's exactly (sorted).

    python3 examples/python/sampler_topk.py [--iters 50]
"""
import sys

from common import median_ms, report, start

import torch
import topk_tune  # noqa: F401

SHAPES = (  # (batch, vocab, max k, dtype): Llama 3, DeepSeek-V3, gpt-oss vocabularies
    (256, 128256, 1024, torch.float32),
    (128, 129280, 50, torch.bfloat16),
    (128, 201088, 64, torch.bfloat16),
    (32, 262144, 256, torch.float32),
)


def apply_top_k(logits, k, values_fn):
    """vLLM's top-k masking: keep logits >= each row's k-th largest."""
    top = values_fn(logits, int(k.max()))
    threshold = top.gather(1, (k - 1).long().unsqueeze(1))
    return logits.masked_fill(logits < threshold, float("-inf"))


def main():
    args = start(__doc__)
    ok = True
    for b, v, k, dt in SHAPES:
        logits = (torch.randn(b, v, device="cuda") * 4).to(dt)
        ours = lambda: torch.ops.topk_tune.topk_values(logits, k)  # noqa: E731
        theirs = lambda: torch.topk(logits, k).values  # noqa: E731
        good = torch.equal(ours(), theirs())
        ks = torch.randint(1, k + 1, (b,), device="cuda")
        good &= torch.equal(apply_top_k(logits, ks, torch.ops.topk_tune.topk_values),
                            apply_top_k(logits, ks, lambda x, kk: torch.topk(x, kk).values))
        ok &= report(f"sampler {b}x{v} k={k} {str(dt)[6:]}", median_ms(ours, iters=args.iters),
                     median_ms(theirs, iters=args.iters), good)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
