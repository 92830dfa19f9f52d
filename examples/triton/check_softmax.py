"""The fused softmax of softmax.py against torch.softmax: the right kernel passes, in float16 and
bfloat16, on 64 x 64 and 64 x 512 inputs; the twin that forgets to rescale its running sum fails at
both sizes, in both dtypes, by orders of magnitude; the twin that accumulates in the input's dtype
fails by a few times the reference's error (over 64 rows of 512 every draw tried; over 64 columns
only on most draws: few terms lose little in that dtype)."""
import gradcli
from softmax import TritonSoftmax, TritonSoftmaxLowAcc, TritonSoftmaxNoRescale, softmax_reference

for dtype in ("float16", "bfloat16"):
    for cols in (64, 512):
        for kernel in (TritonSoftmax, TritonSoftmaxNoRescale, TritonSoftmaxLowAcc):
            gradcli.check(kernel, reference=softmax_reference, dtype=dtype, x=(64, cols))
