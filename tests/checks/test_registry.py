"""gradcli.check: the registration forms, options, inputs and [tool.gradcli] defaults."""
import numpy as np
import pytest

import gradcli
from gradcli.checks.config import load_defaults
from gradcli.checks.registry import build_spec, map_domain, materialize
from gradcli.checks.spec import REGISTRY
from gradcli.core.errors import BadInput


@pytest.fixture(autouse=True)
def clean_registry():
    before = len(REGISTRY)
    yield
    del REGISTRY[before:]


def test_decorator_returns_function_unchanged_with_registration_attributes():
    @gradcli.check(x=np.linspace(-1, 1, 5), w=(3, 4), rtol=1e-7)
    def loss(x, w):
        return np.sum(x) * np.sum(w)

    assert loss(np.ones(2), np.ones(3)) == 6.0
    spec = REGISTRY[-1]
    assert spec.fn is loss and spec.name == "loss" and spec.kind == "autodiff"
    assert spec.inputs["w"] == (3, 4) and spec.options == {"rtol": 1e-7}
    assert spec.file == __file__ and spec.line > 0

    def loss_grad(x, w):
        return None

    assert loss.grad(loss_grad) is loss_grad
    assert spec.grad is loss_grad and spec.kind == "grad"
    assert callable(loss.vjp) and callable(loss.hvp)


def test_call_form_and_vjp_registration():
    def f(x):
        return np.tanh(x)

    def f_vjp(g, x):
        return g

    assert gradcli.check(f, vjp=f_vjp, x=(4,)) is f
    assert REGISTRY[-1].vjp is f_vjp and REGISTRY[-1].kind == "vjp"


def test_string_expression_registers_a_spec():
    spec = gradcli.check("x*sin(y)", grad={"x": "sin(y)", "y": "x*cos(y)"}, x=1.0, y=2.0)
    assert spec is REGISTRY[-1] and spec.kind == "expression" and spec.fn is None
    assert spec.grad == {"x": "sin(y)", "y": "x*cos(y)"}


@pytest.mark.parametrize("kwargs, match", [
    (dict(x=1.0, mode="slow"), "mode"),
    (dict(x=1.0, dtype="float16"), "dtype"),
    (dict(x=1.0, rtol=-1), "rtol"),
    (dict(x=1.0, domain="negative"), "domain"),
    (dict(x=1.0, wrt=["z"]), "wrt"),
    (dict(x=1.0, y=2.0), "no parameter 'y'"),
    (dict(), "no value for parameter 'x'"),
])
def test_bad_registrations_are_bad_input(kwargs, match):
    def f(x):
        return x

    with pytest.raises(BadInput, match=match):
        gradcli.check(f, **kwargs)


def test_bad_expressions_are_bad_input():
    with pytest.raises(BadInput, match="did you mean"):
        gradcli.check("2x", x=1.0)
    with pytest.raises(BadInput, match="no value for 'y'"):
        gradcli.check("x*y", x=1.0)
    with pytest.raises(BadInput, match="not a variable"):
        gradcli.check("x*y", grad={"z": "1"}, x=1.0, y=1.0)


def test_inputs_dict_for_names_that_clash_with_options():
    def f(x, eps):
        return np.sum(x) * eps

    gradcli.check(f, inputs={"x": (4, 3), "eps": 1e-5}, atol=1e-8)
    spec = REGISTRY[-1]
    assert spec.inputs == {"x": (4, 3), "eps": 1e-5} and spec.options == {"atol": 1e-8}


def test_build_spec_does_not_register_or_touch_the_function():
    def f(x):
        return x

    before = len(REGISTRY)
    spec = build_spec(f, x=1.0)
    assert len(REGISTRY) == before and spec.fn is f and not hasattr(f, "grad")


def test_shapes_values_and_constants():
    a = materialize({"x": (2, 3), "y": [1.0, 2.0], "labels": np.array([0, 2]), "s": (), "flag": True}, seed=0)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(a["x"], rng.standard_normal((2, 3)))
    np.testing.assert_array_equal(a["s"], rng.standard_normal(()))
    assert a["y"].dtype == np.float64 and a["labels"].dtype.kind == "i" and a["flag"].dtype == bool
    b = materialize({"x": (2, 3)}, seed=0, dtype=np.float32)
    assert b["x"].dtype == np.float32


def test_domain_mappings():
    z = np.random.default_rng(1).standard_normal(10_000) * 3
    assert (map_domain(z, "positive") >= 0.1).all()
    u = map_domain(z, "unit")
    assert (np.abs(u) < 0.9).all()
    lo_hi = map_domain(z, (2.0, 4.0))
    assert (lo_hi > 2.0).all() and (lo_hi < 4.0).all()
    per_input = materialize({"x": (100,), "y": (100,)}, domain={"x": "positive"})
    assert (per_input["x"] > 0).all() and (per_input["y"] < 0).any()


def test_tool_gradcli_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "m"\n[tool.gradcli]\nrtol = 1e-5\nmode = "fast"\n'
                                             'seed = 3\ndomain = [0.5, 2.0]\n')
    sub = tmp_path / "models" / "deep"
    sub.mkdir(parents=True)
    (sub / "model.py").write_text("")
    assert load_defaults(sub / "model.py") == {"rtol": 1e-5, "mode": "fast", "seed": 3, "domain": (0.5, 2.0)}
    assert load_defaults(sub) == load_defaults(sub / "model.py")


def test_tool_gradcli_missing_or_bad(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "m"\n')
    assert load_defaults(tmp_path) == {}
    (tmp_path / "pyproject.toml").write_text('[tool.gradcli]\nrtoll = 1e-5\n')
    with pytest.raises(ValueError, match="unknown key 'rtoll'"):
        load_defaults(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.gradcli]\nmode = "slow"\n')
    with pytest.raises(ValueError, match="mode"):
        load_defaults(tmp_path)
