"""The fused softmax of softmax.py in float16 over 64 rows of 512, against torch.softmax: the right
kernel passes; the twin that forgets to rescale its running sum fails by hundreds of times the
reference's error, the twin that accumulates in float16 by a few times (docs/kernels.md shows this run)."""
import gradcli
from softmax import TritonSoftmax, TritonSoftmaxLowAcc, TritonSoftmaxNoRescale, softmax_reference

for kernel in (TritonSoftmax, TritonSoftmaxNoRescale, TritonSoftmaxLowAcc):
    gradcli.check(kernel, reference=softmax_reference, dtype="float16", x=(64, 512))
