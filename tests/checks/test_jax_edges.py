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


Z = np.array([1 + 2j, -0.5 + 0.3j, 2 - 1j])


def _sqnorm(z):
    return jnp.sum(jnp.real(z * jnp.conj(z)))


def _square(z):
    return z * z


# JAX's convention: the cotangent of a real function of z is dL/dRe z - i dL/dIm z, the conjugate of
# PyTorch's; so |z|^2 pulls back to 2 conj(z) (JAX's own grad) and PyTorch's 2 z is wrong here; a
# holomorphic z^2 pulls g back to g * 2z, and g * conj(2z) (PyTorch's rule) is wrong
COMPLEX_RULES = [
    ("sqnorm", _sqnorm, lambda z, g: (2 * g * jnp.conj(z),), "pass"),
    ("sqnorm in PyTorch's convention", _sqnorm, lambda z, g: (2 * g * z,), "fail"),
    ("square", _square, lambda z, g: (2 * z * g,), "pass"),
    ("square in PyTorch's convention", _square, lambda z, g: (2 * jnp.conj(z) * g,), "fail"),
]


@pytest.mark.parametrize("primal, bwd, expected", [r[1:] for r in COMPLEX_RULES], ids=[r[0] for r in COMPLEX_RULES])
def test_complex_inputs_to_a_custom_vjp_get_check_grads_verdict(primal, bwd, expected):
    rule = _vjp_rule(primal, bwd)
    assert _check_grads(rule, Z) == expected
    r = run(rule, z=Z)
    assert r.status == expected, r.message
    if expected == "fail":
        assert r.mismatches and r.mismatches[0].input == "z"


@pytest.mark.parametrize("conjugates, expected", [(False, "pass"), (True, "fail")])
def test_complex_inputs_to_a_custom_jvp_in_forward_mode(conjugates, expected):
    @jax.custom_jvp
    def exp(z):
        return jnp.exp(z)

    @exp.defjvp
    def exp_jvp(primals, tangents):
        t = jnp.conj(tangents[0]) if conjugates else tangents[0]
        return exp(primals[0]), jnp.exp(primals[0]) * t
    assert _check_grads(exp, Z, modes=("fwd",)) == expected
    r = run(exp, z=Z)
    assert r.status == expected, r.message
