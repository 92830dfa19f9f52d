"""The fused layer norm of layernorm.py against torch.nn.functional.layer_norm: the right kernel
passes on x, weight and bias, in float16 and bfloat16, 8 x 64 and 8 x 512; the twin whose backward
recomputes the statistics with eps = 0.1 fails on x's and weight's gradients (its output and bias
gradient are right)."""
import gradcli
from layernorm import TritonLayerNorm, TritonLayerNormBwdEps, layernorm_reference

for dtype in ("float16", "bfloat16"):
    for n in (64, 512):
        for kernel in (TritonLayerNorm, TritonLayerNormBwdEps):
            gradcli.check(kernel, reference=layernorm_reference, dtype=dtype, x=(8, n), weight=(n,), bias=(n,))
