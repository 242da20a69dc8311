#!/usr/bin/env python3
"""DeepSeek-V3.2 sparse attention indexer: the top 2048 keys per query.

vLLM and SGLang compute indexer logits [tokens, keys] (fp32) and keep, per
row, the keys in [row_starts[i], row_starts[i] + lengths[i]) (prefill: the
query's own sequence up to its position; decode: [0, seq_len)). Their torch
fallback masks everything else to -inf and calls torch.topk; topk_tune takes
the starts and lengths directly, so there is no mask pass. Indices are
column indices, int32 as the attention kernels want them, -1 where a row has
fewer than 2048 keys.

    python3 examples/python/dsa_indexer.py [--iters 50]
"""
import sys

from common import median_ms, report, same_values, start

import torch
import topk_tune

K = 2048


def masked_logits(logits, starts, lengths):
    cols = torch.arange(logits.shape[1], device=logits.device)
    keep = (cols >= starts[:, None]) & (cols < (starts + lengths)[:, None])
    return logits.masked_fill(~keep, float("-inf"))


def torch_indexer(logits, starts, lengths):
    """What the engines' torch path does: mask, topk, -1 for masked picks."""
    v, i = torch.topk(masked_logits(logits, starts, lengths), K, dim=-1)
    return v, torch.where(torch.isinf(v) & (v < 0), torch.full_like(i, -1), i).int()


def case(name, logits, starts, lengths, iters):
    # The drop-in call: int32 indices, no values written (the indexer needs
    # none), ranges from the engine's own starts and lengths.
    def ours():
        return topk_tune.topk(logits, K, values=False, lengths=lengths, row_starts=starts).indices

    # The torch operator form (int64 indices, values too), e.g. under torch.compile.
    def op():
        return torch.ops.topk_tune.topk_ranged(logits, K, lengths=lengths, row_starts=starts, sorted=False)

    idx = ours()
    ref_v, ref_i = torch_indexer(logits, starts, lengths)
    ok = same_values(logits, idx, ref_v.masked_fill(ref_i < 0, float("-inf")))
    ok &= torch.equal((idx < 0).sum(dim=-1), (ref_i < 0).sum(dim=-1))  # the same padding
    ov, oi = op()
    ok &= same_values(logits, oi, ref_v.masked_fill(ref_i < 0, float("-inf")))
    masked = masked_logits(logits, starts, lengths)
    t_ours = median_ms(ours, iters=iters)
    t_torch = median_ms(lambda: torch.topk(masked, K, dim=-1), iters=iters)
    t_torch_mask = median_ms(lambda: torch_indexer(logits, starts, lengths), iters=iters)
    report(name, t_ours, t_torch, ok)
    print(f"{'':<44} (torch with the mask pass: {t_torch_mask * 1e3:.1f} us; "
          f"torch.ops.topk_tune.topk_ranged: {median_ms(op, iters=iters) * 1e3:.1f} us)")
    return ok


def main():
    args = start(__doc__)
    ok = True
    # Decode: 64 requests, one query each, contexts up to 64K keys.
    b, s = 64, 65536
    lengths = torch.randint(1024, s + 1, (b,), device="cuda", dtype=torch.int32)
    ok &= case(f"decode {b}x{s} k={K} (lengths)", torch.randn(b, s, device="cuda"),
               torch.zeros(b, device="cuda", dtype=torch.int32), lengths, args.iters)
    # Prefill: two sequences of 4096 tokens packed into 8192 keys; query t of
    # a sequence sees its sequence's keys up to itself (causal).
    seq, nseq = 4096, 2
    t = torch.arange(seq * nseq, device="cuda", dtype=torch.int32)
    starts = (t // seq) * seq
    lengths = t - starts + 1
    ok &= case(f"prefill {seq * nseq}x{seq * nseq} k={K} (starts+lengths)",
               torch.randn(seq * nseq, seq * nseq, device="cuda"), starts, lengths, args.iters)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
