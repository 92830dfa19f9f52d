"""Model behaviours that once passed what was not checked: a gradient with an imaginary part, an empty
input, a negative "shape"."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.core.errors import BadInput


def square_sum(x):
    return np.sum(x ** 2)


def test_a_gradient_with_an_imaginary_part_fails():
    r = run_check(build_spec(square_sum, grad=lambda x: 2 * x + 1j, x=(3,)), {})
    assert r.status == "fail" and "imaginary part" in r.message


def test_a_complex_dtype_with_zero_imaginary_part_is_a_real_gradient():
    r = run_check(build_spec(square_sum, grad=lambda x: (2 * x).astype(complex), x=(3,)), {})
    assert r.status == "pass", r.message


def test_an_empty_input_is_skipped_not_passed():
    r = run_check(build_spec(square_sum, grad=lambda x: 3 * x + 7, x=(0,)), {})
    assert r.status == "skipped" and "empty" in r.message


def test_a_tuple_with_a_negative_size_is_refused():
    with pytest.raises(BadInput, match=r"shape has no negative sizes.*x=\[-1\.0, 4\.0\]"):
        from gradcli.checks.registry import materialize
        materialize({"x": (-1, 4)})
    r = run_check(build_spec(square_sum, grad=lambda x: 2 * x, x=(-1, 4)), {})
    assert r.status == "error" and "negative sizes" in r.message


def test_a_complex_input_is_skipped_with_the_reason():
    r = run_check(build_spec(lambda x: np.sum(np.abs(x) ** 2), grad=lambda x: 2 * x, x=np.array([1 + 2j, 3j])), {})
    assert r.status == "skipped" and "complex inputs are not differentiated: x (complex128)" in r.message
