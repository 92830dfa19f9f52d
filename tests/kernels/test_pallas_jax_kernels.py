"""The Pallas example kernel (examples/pallas/pallas_softmax.py), run on the CPU by Pallas' interpreter,
checked as a user checks it: the right softmax passes in float16 and bfloat16; the twin that accumulates
in the input's dtype fails over 64 rows of 512 (on shorter rows such sums lose too little to show on every
draw). (The file's name says jax: conftest runs such files last.)
"""
import os
import sys

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("jax.experimental.pallas")

from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402

HERE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "pallas")


def _example():
    """The example module, imported when a test runs, not when the suite is collected: importing it
    starts JAX's runtime (it asks for the default backend), after which every model file of every later
    test would be checked in a fresh interpreter instead of a fork."""
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import pallas_softmax
    return pallas_softmax


def check(kernel, dtype, shape):
    return run_check(build_spec(kernel, reference=_example().softmax_reference, framework="jax", dtype=dtype,
                                x=shape), {})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_pallas_softmax_passes_and_its_low_precision_twin_fails(dtype):
    pallas_softmax = _example()
    right = check(pallas_softmax.pallas_softmax, dtype, (8, 100))
    assert right.status == "pass", right.message
    wrong = check(pallas_softmax.pallas_softmax_low_acc, dtype, (64, 512))
    assert wrong.status == "fail" and not wrong.kernel[0].passed, wrong.message
