"""The numerics of a check meet infinite and NaN values of f on purpose (a pole or a domain edge within
a step, overflow): they read them as "no estimate" and print nothing about them."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from cli_helpers import check, model, strict_json
from gradcli.checks.comparisons import numeric as num
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

EDGES = {
    "overflow_near": (lambda x: np.exp(x), np.array([700.0, 1.0, 2.0])),
    "overflow_at_a_step": (lambda x: np.sum(np.exp(x)), np.array([709.0, 2.0])),
    "minus_inf_within_a_step": (lambda x: np.where(x > 0, x, -np.inf) * np.array([1, 2, 3.0]),
                                np.array([1e-4, 1.0, 2.0])),
    "huge_values": (lambda x: np.exp(x) * 1e300, np.array([1.0, 2.0])),
}


@pytest.mark.parametrize("name", EDGES)
def test_no_numpy_warning_from_gradcli_on_infinite_values(name):
    f, x = EDGES[name]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run_check(build_spec(f, x=x), {})
        run_check(build_spec(f, x=x, mode="fast"), {})
    ours = [f"{w.filename}:{w.lineno}: {w.message}" for w in seen if "gradcli" in w.filename]
    assert ours == [], ours


MODEL = '''
@gradcli.check(x=np.array([700.0, 1.0, 2.0]))
def overflow_near(x):
    return np.exp(x)

@gradcli.check(x=np.array([709.0, 2.0]))
def overflow_at_a_step(x):
    return np.sum(np.exp(x))

@gradcli.check(x=np.array([1e-4, 1.0, 2.0]))
def minus_inf_within_a_step(x):
    return np.where(x > 0, x, -np.inf) * np.array([1, 2, 3.0])
'''


def test_check_stderr_is_clean(tmp_path):
    r = check(model(tmp_path / "edges.py", "import numpy as np\nimport gradcli\n", MODEL), "--json")
    assert len(strict_json(r.stdout)["checks"]) == 3
    assert r.stderr == ""


def test_noise_of_huge_values_is_measured_not_overflowed():
    """f's noise at values near 1e300 is the same relative noise as at 1: the difference table is
    taken in units of |f|, whose squares cannot overflow."""
    x = np.array([0.3, 0.7])

    def noisy(scale):
        return num.Function(lambda inp: scale * np.sin(inp["x"]).astype(np.float32).astype(float), {"x": x}, ["x"])

    f0 = np.sin(x).astype(np.float32).astype(float)
    small = num.noise_level(noisy(1.0), f0, np.random.default_rng(0))
    huge = num.noise_level(noisy(1e300), 1e300 * f0, np.random.default_rng(0))
    assert np.all(small > 0) and np.all(np.isfinite(huge))
    np.testing.assert_allclose(huge / 1e300, small, rtol=1e-6)
