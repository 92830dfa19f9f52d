"""Functions that return numpy.linalg's named tuples (SlogdetResult, EighResult, SVDResult, QRResult,
EigResult): the check reads the selected output like any tuple's, and a hand-written vjp of it is judged."""
from __future__ import annotations

import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.trace import trace

A = np.random.default_rng(5).normal(size=(3, 3)) + 4 * np.eye(3)


def _sym(a):
    return a + a.T


RESULTS = {
    "slogdet": lambda a: np.linalg.slogdet(a),
    "slogdet_complex": lambda a: np.linalg.slogdet(a + 0.5j * a.T),
    "eigh": lambda a: np.linalg.eigh(_sym(a)),
    "svd": lambda a: np.linalg.svd(a, full_matrices=False),
    "qr": lambda a: np.linalg.qr(a),
    "eig": lambda a: np.linalg.eig(_sym(a)),
}


@pytest.mark.parametrize("name", list(RESULTS))
@pytest.mark.parametrize("output", [0, 1])
def test_a_named_tuple_result_is_checked(name, output):
    result = run_check(build_spec(RESULTS[name], a=A, output=output), {})
    assert result.status == "pass", (result.status, result.message)


def test_slogdet_logabsdet_vjp_is_judged():
    def right(g, a):
        return g * np.linalg.inv(a).T

    def wrong(g, a):
        return g * np.linalg.inv(a)

    f = RESULTS["slogdet"]
    assert run_check(build_spec(f, vjp=right, a=A, output=1), {}).status == "pass"
    assert run_check(build_spec(f, vjp=wrong, a=A, output=1), {}).status == "fail"


def test_the_trace_returns_and_passes_on_named_tuples():
    t = trace(lambda a: np.linalg.slogdet(a), {"a": A}, ["a"], output=1)
    assert t.ok, t.problems
    assert trace(lambda a: np.linalg.slogdet(a), {"a": A}, ["a"]).value == 1.0  # a real sign: plain
    t = trace(lambda a: np.stack(np.linalg.eigh(_sym(a))[::-1][1:] + (np.linalg.slogdet(a)[1] * np.ones(3),)),
              {"a": A}, ["a"])
    assert t.ok, t.problems
    g = t.vjp(np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))["a"]
    np.testing.assert_allclose(g, 3 * np.linalg.inv(A).T, rtol=1e-12)
