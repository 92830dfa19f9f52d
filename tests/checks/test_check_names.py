"""``gradcli.check(..., name=...)``: a check named other than its function, for targets whose own name
says nothing (a custom_jvp registered directly, a lambda, an expression), and -k selects it."""
import numpy as np
import pytest

import gradcli
from gradcli.checks.collect import matches
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.checks.spec import REGISTRY
from gradcli.core.errors import BadInput


@pytest.fixture(autouse=True)
def clean_registry():
    before = len(REGISTRY)
    yield
    del REGISTRY[before:]


def test_every_form_takes_a_name():
    gradcli.check(lambda x: np.sum(x ** 2), grad=lambda x: 2 * x, x=(3,), name="square")
    assert REGISTRY[-1].name == "square"

    @gradcli.check(x=(3,), name="cubed")
    def f(x):
        return np.sum(x ** 3)
    assert REGISTRY[-1].name == "cubed" and REGISTRY[-1].fn is f
    spec = gradcli.check("x*sin(y)", x=1.0, y=2.0, name="product")
    assert spec.name == "product" and spec.expression == "x*sin(y)"
    assert build_spec(np.tanh, x=(2,), name="tanh_named").name == "tanh_named"
    # without it, the function's name and the expression, as before
    assert build_spec(np.tanh, x=(2,)).name == "tanh"


def test_name_is_not_an_input_and_a_named_input_still_can_be():
    spec = build_spec(lambda x, name: np.sum(x * name), inputs={"x": (2,), "name": 2.0}, name="scaled")
    assert spec.name == "scaled" and set(spec.inputs) == {"x", "name"}
    assert run_check(spec, {}).status == "pass"


@pytest.mark.parametrize("bad", ["", "  ", "two\nlines", 5])
def test_a_bad_name_is_bad_input(bad):
    with pytest.raises(BadInput, match="name= must be a non-empty one-line string"):
        build_spec(np.tanh, x=(2,), name=bad)


def test_a_jax_custom_jvp_registered_directly_is_named_and_selected():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @jax.custom_jvp
    def rule(x):
        return jnp.sin(x)

    @rule.defjvp
    def rule_jvp(primals, tangents):
        return jnp.sin(primals[0]), jnp.cos(primals[0]) * tangents[0]

    spec = build_spec(rule, x=(4,), name="sine")
    assert spec.name == "sine" and spec.options["framework"] == "jax"
    assert matches("sine", spec.name, spec.file) and not matches("rule", spec.name, spec.file)
    assert run_check(spec, {}).status == "pass"
