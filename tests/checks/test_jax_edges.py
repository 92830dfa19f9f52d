"""JAX checks at their edges: a rule that cannot run, a check on top of jax.jit, a gradient with an
imaginary part for a real input, and complex inputs in the convention numpy checks use, each against
what JAX itself (calling the function, jax.test_util.check_grads) says."""
import textwrap

import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax.test_util import check_grads  # noqa: E402


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def _check_grads(f, *args, modes=("rev",)):
    """check_grads' verdict: "pass" or "fail"."""
    jax.config.update("jax_enable_x64", True)
    try:
        check_grads(f, tuple(jnp.asarray(a) for a in args), order=1, modes=list(modes))
    except AssertionError:
        return "fail"
    return "pass"


@pytest.mark.parametrize("kind", ["custom_vjp", "custom_jvp"])
def test_a_rule_that_was_never_defined_is_an_error_not_a_failed_gradient(kind):
    f = getattr(jax, kind)(lambda x: jnp.sin(x))
    with pytest.raises(AttributeError, match="No (VJP|JVP) defined"):
        f(jnp.ones(3))  # JAX cannot even call it
    r = run(f, x=(3,))
    assert r.status == "error", r.message
    assert r.message.startswith("the function raised AttributeError") and "defined" in r.message


def test_a_check_on_top_of_jax_jit_reports_its_file_and_line(tmp_path):
    from cli_helpers import check, strict_json
    path = tmp_path / "jitted_model.py"
    path.write_text(textwrap.dedent("""\
        import jax
        import jax.numpy as jnp
        import gradcli


        @gradcli.check(x=(3,), framework="jax")
        @jax.jit
        def jitted(x):
            return jnp.sin(x).sum()
        """))
    res = check(path, "-k", "jitted_model", "--json")
    doc = strict_json(res.stdout)
    assert res.exit_code == 0, res.output
    (c,) = doc["checks"]
    assert (c["name"], c["file"].endswith("jitted_model.py"), c["line"]) == ("jitted", True, 6)


def _vjp_rule(primal, bwd):
    f = jax.custom_vjp(primal)
    f.defvjp(lambda x: (primal(x), x), bwd)
    return f


def test_a_complex_gradient_for_a_real_input_fails_naming_it():
    def primal(x):
        return jnp.sin(x).sum()
    imaginary = _vjp_rule(primal, lambda x, g: (g * jnp.cos(x) + 1j * g,))
    cast = _vjp_rule(primal, lambda x, g: ((g * jnp.cos(x)).astype(jnp.complex128),))  # imaginary part 0
    r = run(imaginary, x=(3,))
    assert r.status == "fail" and "imaginary part" in r.message and "'x'" in r.message, r.message
    assert run(cast, x=(3,)).status == "pass"
