"""The Pallas example kernel (examples/pallas/pallas_softmax.py), run on the CPU by Pallas'
interpreter, judged like the Triton ones (kernel_criterion.py): the right softmax is within twice the
same-dtype reference's error of the float64 truth in float16 and bfloat16, output and gradient; the
twin that accumulates in the input's dtype is not.

The float64 truth here is numpy's (softmax and its vector-Jacobian product written out), so the test
needs no JAX 64-bit mode. (The file's name says jax: conftest runs such files last.)
"""
import os
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("jax.experimental.pallas")
jnp = jax.numpy

HERE = os.path.dirname(__file__)
sys.path[:0] = [HERE, os.path.join(HERE, os.pardir, os.pardir, "examples", "pallas")]

import pallas_softmax  # noqa: E402 - the examples folder goes on the path first
from kernel_criterion import judge  # noqa: E402

DTYPES = [jnp.float16, jnp.bfloat16]


def _truth(x, dy):
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    y = e / e.sum(-1, keepdims=True)
    return [y, y * (dy - (dy * y).sum(-1, keepdims=True))]


def _outputs(fn, x, dy):
    y, vjp = jax.vjp(fn, x)
    (g,) = vjp(dy)
    return [np.asarray(y, np.float64), np.asarray(g, np.float64)]


def verdict(kernel, shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal(shape)).astype(dtype)
    dy = jnp.asarray(rng.standard_normal(shape)).astype(dtype)
    same = _outputs(pallas_softmax.softmax_reference, x, dy)
    return judge(_outputs(kernel, x, dy), same, _truth(x, dy), float(jnp.finfo(dtype).smallest_subnormal))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("shape", [(8, 100), (64, 512)], ids=str)
def test_the_pallas_softmax_is_within_twice_the_reference_error(shape, dtype):
    ok, rows = verdict(pallas_softmax.pallas_softmax, shape, dtype)
    assert ok, rows


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_the_low_precision_accumulation_exceeds_twice_the_reference_error(dtype):
    # over 64 rows of 512 columns; on fewer or shorter rows the bf16/fp16 sums lose so little that
    # some draws stay within the bound (no error a dtype-bound check can see)
    ok, rows = verdict(pallas_softmax.pallas_softmax_low_acc, (64, 512), dtype)
    assert not ok, rows

