"""The finite differences' steps evaluated in batches (gradcli.checks.comparisons.batched_steps): the same columns, value
for value, as one call per step (the reference: the same numerics without a batch), gathered a bounded
number of moved elements at a time; a batch that differs from single calls is dropped for them."""
import numpy as np
import pytest

from gradcli.checks.comparisons import batched_steps
from gradcli.checks.comparisons import numeric as num

BASE = {"x": np.array([0.3, -1.2, 2.0, 0.7]), "y": np.array([1.5, 0.4, -0.8, 2.2])}


def f(x, y):
    return x ** 3 * y + x  # products and sums: the same bits however many points an array holds


class Target:
    def __init__(self, shift=0.0):
        self.shift, self.batches, self.points = shift, 0, []

    def __call__(self, inputs, complex_ok=False):
        return f(inputs["x"], inputs["y"])

    def batch(self, points):
        self.batches += 1
        self.points.append(len(points))
        return f(np.stack([p["x"] for p in points]), np.stack([p["y"] for p in points])) + self.shift


def columns(call):
    fn = num.Function(call, BASE, ["x", "y"])
    f0 = f(**BASE)
    elements = [(k, i) for k in ("x", "y") for i in range(4)]
    return fn, num.jacobian_columns(fn, f0, elements, num.H_DEFAULT, 1e-7, complex_step=False, n_total=8)


def single(inputs, complex_ok=False):
    return f(inputs["x"], inputs["y"])


def test_batched_columns_are_the_single_calls_columns(monkeypatch):
    monkeypatch.setattr(batched_steps, "GROUP_ELEMENTS", 16)  # 4 points of one moved input per batch
    target = Target()
    fn, got = columns(target)
    ref_fn, want = columns(single)
    for a, b in ((got.value, want.value), (got.error, want.error), (got.kink, want.kink)):
        assert np.array_equal(a, b)
    # the true Jacobian, diagonal per input: d/dx = 3 x^2 y + 1, d/dy = x^3
    x, y = BASE["x"], BASE["y"]
    assert np.allclose(np.diag(got.value[:, :4]), 3 * x ** 2 * y + 1)
    assert np.allclose(np.diag(got.value[:, 4:]), x ** 3)
    assert fn.batch is not None and target.batches > 1
    assert max(target.points) <= 4 + 1  # a group's points, and the point itself with the first
    assert ref_fn.calls >= 8 * 6  # one call per step without a batch


def test_a_batch_that_differs_from_single_calls_is_dropped():
    target = Target(shift=1e-6)
    fn, got = columns(target)
    _, want = columns(single)
    assert fn.batch is None and target.batches == 1
    assert np.array_equal(got.value, want.value) and np.array_equal(got.error, want.error)


@pytest.mark.parametrize("ulps, same", [(8, True), (10 ** 4, False)])
def test_rounding_is_allowed_a_different_value_is_not(ulps, same):
    ref = np.array([1.0, -2.0, np.inf, 0.5])
    out = ref + np.array([ulps, 0, 0, 0]) * np.finfo(float).eps * 2.0
    assert batched_steps._same(out, ref) is same
