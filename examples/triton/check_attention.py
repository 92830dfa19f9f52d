"""The causal attention of attention.py against plain torch: the right kernels (with and without
dropout) pass, in float16 and bfloat16, for 32 queries of 16 dims and 64 of 32. The twins fail:
the causal mask off by one everywhere (output and every gradient), the missing 1 / sqrt(d) on q's
gradient only, the dropout mask regenerated from another seed on every gradient (its output is
right)."""
import gradcli
from attention import (TritonAttention, TritonAttentionDqNoScale, TritonAttentionDropout,
                       TritonAttentionDropoutReseeded, TritonAttentionMaskOffByOne, attention_dropout_reference,
                       attention_reference)

CASES = [(TritonAttention, attention_reference), (TritonAttentionMaskOffByOne, attention_reference),
         (TritonAttentionDqNoScale, attention_reference), (TritonAttentionDropout, attention_dropout_reference),
         (TritonAttentionDropoutReseeded, attention_dropout_reference)]

for dtype in ("float16", "bfloat16"):
    for n, d in ((32, 16), (64, 32)):
        for kernel, reference in CASES:
            gradcli.check(kernel, reference=reference, dtype=dtype, q=(n, d), k=(n, d), v=(n, d))
