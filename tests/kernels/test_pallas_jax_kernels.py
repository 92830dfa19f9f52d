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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "pallas"))

import pallas_softmax  # noqa: E402 - the examples folder goes on the path first

from gradcli.checks.registry import build_spec  # noqa: E402
from gradcli.checks.runner import run_check  # noqa: E402


def check(kernel, dtype, shape):
    return run_check(build_spec(kernel, reference=pallas_softmax.softmax_reference, framework="jax", dtype=dtype,
                                x=shape), {})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_pallas_softmax_passes_and_its_low_precision_twin_fails(dtype):
    right = check(pallas_softmax.pallas_softmax, dtype, (8, 100))
    assert right.status == "pass", right.message
    wrong = check(pallas_softmax.pallas_softmax_low_acc, dtype, (64, 512))
    assert wrong.status == "fail" and not wrong.kernel[0].passed, wrong.message
