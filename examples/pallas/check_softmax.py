"""The Pallas softmax of pallas_softmax.py against a plain JAX softmax computed at float32 and rounded
once: the right kernel passes in float16 and bfloat16 on 8 x 100 and 64 x 512 inputs; the twin that
accumulates in the input's dtype fails on 64 x 512 by a few times the reference's error (on short
rows such sums lose too little to show on every draw)."""
import gradcli
from pallas_softmax import pallas_softmax, pallas_softmax_low_acc, softmax_reference

for dtype in ("float16", "bfloat16"):
    for shape in ((8, 100), (64, 512)):
        gradcli.check(pallas_softmax, reference=softmax_reference, dtype=dtype, x=shape)
    gradcli.check(pallas_softmax_low_acc, reference=softmax_reference, dtype=dtype, x=(64, 512))
