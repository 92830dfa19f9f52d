"""Complex step at large arguments of periodic functions: a step relative to |x| spans many periods
(1e280 at x = 1e300), where tan(x + ih) saturates at i and Im/h reads 1e-280; the absolute step's
resolved imaginary part contradicts it, and that must count against the estimate, so that complex step
cannot vouch there instead of giving a confident wrong number. References: mpmath at 30 digits (with
the working precision the argument reduction of 1e300 needs)."""
import json

import mpmath
import numpy as np
import pytest
from click.testing import CliRunner

from gradcli.cli import main
from gradcli.core.parser import parse
from gradcli.methods import numeric

CASES = {
    "tan(x)": lambda x: 1 / mpmath.cos(x) ** 2,
    "tan(x)**2": lambda x: 2 * mpmath.tan(x) / mpmath.cos(x) ** 2,
    "x*tan(x)": lambda x: mpmath.tan(x) + x / mpmath.cos(x) ** 2,
    "sin(x)": mpmath.cos,
    "sin(x)/cos(x)": lambda x: 1 / mpmath.cos(x) ** 2,
}


def _exact(text, x):
    with mpmath.workdps(400):  # enough digits to reduce 1e300 by pi
        return float(CASES[text](mpmath.mpf(x)))


@pytest.mark.parametrize("x", [1e20, 1e100, 1e200, 1e300, -1e300, 2.5, -7.0])
@pytest.mark.parametrize("text", sorted(CASES))
def test_complex_step_never_claims_digits_it_does_not_have(text, x):
    r = numeric.complex_step(parse(text), {"x": x})
    exact = _exact(text, x)
    if r.status == "unavailable":
        return
    got, err = float(r.jacobian[0, 0]), float(r.error[0, 0])
    if err >= abs(exact):  # as large as the derivative: no digits claimed (the verdict says it cannot vouch)
        return
    assert abs(got - exact) <= max(2 * err, 1e-13 * abs(exact)), (got, err, exact)


@pytest.mark.parametrize("x", [2.5, -7.0, 1e3])
def test_complex_step_still_vouches_at_ordinary_points(x):
    r = numeric.complex_step(parse("tan(x)"), {"x": x})
    exact = _exact("tan(x)", x)
    assert r.status == "ok"
    assert float(r.jacobian[0, 0]) == pytest.approx(exact, rel=1e-13, abs=0.0)
    assert float(r.error[0, 0]) < 1e-10 * abs(exact)


@pytest.mark.parametrize("at", ["x=1e300", "x=-1e300", "x=1e250"])
def test_tan_at_huge_arguments_is_no_false_disagree(at):
    result = CliRunner().invoke(main, ["grad", "tan(x)", "--at", at, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["status"] == "agree"
    assert doc["methods"]["complex_step"]["status"] == "unavailable"
    exact = _exact("tan(x)", float(at[2:]))
    for method in ("forward", "reverse"):
        assert doc["methods"][method]["gradient"]["x"] == pytest.approx(exact, rel=1e-12, abs=0.0)
