"""jax targets: the custom rules of a custom_vjp / custom_jvp function (or JAX's own AD) checked against
gradcli's numerics."""
import sys
from functools import partial

import numpy as np
import pytest

from gradcli.checks.targets import jax_target
from gradcli.checks.registry import build_spec, materialize
from gradcli.checks.runner import run_check
from gradcli.core.errors import BadInput

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


def _vjp_rule(primal, bwd):
    """``primal`` as a custom_vjp whose fwd saves the inputs and whose bwd is ``bwd(inputs, g)``."""
    f = jax.custom_vjp(primal)
    f.defvjp(lambda *args: (primal(*args), args), bwd)
    return f


def softplus_primal(x):
    return jnp.logaddexp(x, 0.0)


softplus = _vjp_rule(softplus_primal, lambda r, g: (g * jax.nn.sigmoid(r[0]),))
softplus_forgets_g = _vjp_rule(softplus_primal, lambda r, g: (jax.nn.sigmoid(r[0]),))
softplus_wrong_constant = _vjp_rule(softplus_primal, lambda r, g: (0.5 * g * jax.nn.sigmoid(r[0]),))
# a bug only float32 could hide behind, were the tolerance loose: 1e-3 relative
softplus_off_1e3 = _vjp_rule(softplus_primal, lambda r, g: (g * jax.nn.sigmoid(r[0]) * (1 + 1e-3),))


def rmsnorm_primal(x, w):
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w


def _rmsnorm_bwd(axis):
    def bwd(res, g):
        x, w = res
        r = jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
        xh, gxh = x / r, g * w
        return (gxh - xh * (gxh * xh).mean(axis, keepdims=True)) / r, (g * xh).sum(0)
    return bwd


rmsnorm = _vjp_rule(rmsnorm_primal, _rmsnorm_bwd(-1))
rmsnorm_wrong_axis = _vjp_rule(rmsnorm_primal, _rmsnorm_bwd(0))
rmsnorm_drops_w = _vjp_rule(rmsnorm_primal, lambda r, g: (_rmsnorm_bwd(-1)(r, g)[0], None))
rmsnorm_one_gradient = _vjp_rule(rmsnorm_primal, lambda r, g: (_rmsnorm_bwd(-1)(r, g)[0],))


def linear_primal(x, W):
    return x @ W


linear = _vjp_rule(linear_primal, lambda r, g: (g @ r[1].T, r[0].T @ g))
# with a square W the shapes agree: only the values are wrong
linear_missing_transpose = _vjp_rule(linear_primal, lambda r, g: (g @ r[1].T, g.T @ r[0]))


@jax.custom_jvp
def log1pexp(x):
    return jnp.log1p(jnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * jax.nn.sigmoid(x)  # stays finite where exp(x)/(1+exp(x)) would not


@jax.custom_jvp
def log1pexp_wrong_tangent(x):
    return jnp.log1p(jnp.exp(x))


@log1pexp_wrong_tangent.defjvp
def _log1pexp_wrong_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp_wrong_tangent(x), t * jax.nn.sigmoid(-x)


@jax.custom_jvp
def safe_norm(x):
    return jnp.sqrt(jnp.sum(x * x))


@safe_norm.defjvp
def _safe_norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = safe_norm(x)
    return n, jnp.where(n == 0, 0.0, jnp.vdot(x, t) / jnp.where(n == 0, 1.0, n))


def test_correct_rules_pass():
    r = run(softplus, x=(5, 3))
    assert r.status == "pass", r.message
    assert r.name == "softplus_primal" and r.kind == "vjp" and "JAX's vjp" in r.message
    assert run(rmsnorm, x=(4, 8), w=(8,)).status == "pass"
    assert run(linear, x=(3, 4), W=(4, 4)).status == "pass"
    assert run(log1pexp, x=(6,)).status == "pass"  # through JAX's transpose of the jvp rule
    assert run(safe_norm, x=(5,)).status == "pass"


@pytest.mark.parametrize("target, inputs, bad", [
    (softplus_forgets_g, {"x": (5, 3)}, "x"),
    (softplus_wrong_constant, {"x": (5, 3)}, "x"),
    (linear_missing_transpose, {"x": (3, 4), "W": (4, 4)}, "W"),
    (rmsnorm_wrong_axis, {"x": (4, 8), "w": (8,)}, "x"),
    (log1pexp_wrong_tangent, {"x": (6,)}, "x"),
])
def test_buggy_rules_fail_naming_the_input(target, inputs, bad):
    r = run(target, **inputs)
    assert r.status == "fail", r.message
    assert r.mismatches and {m.input for m in r.mismatches} == {bad}


def test_none_from_bwd_is_a_zero_cotangent_and_fails_naming_the_input():
    r = run(rmsnorm_drops_w, x=(4, 8), w=(8,))
    assert r.status == "fail", r.message
    assert {m.input for m in r.mismatches} == {"w"}
    assert run(rmsnorm_drops_w, x=(4, 8), w=(8,), wrt=["x"]).status == "pass"


def test_wrong_gradient_count_or_shape_fails_with_jaxs_message():
    r = run(rmsnorm_one_gradient, x=(4, 8), w=(8,))
    assert r.status == "fail"
    assert r.message.startswith("JAX's vjp raised") and "Custom VJP bwd rule must produce" in r.message
    summed = _vjp_rule(linear_primal, lambda r, g: (g @ r[1].T, (r[0].T @ g).sum()))
    r = run(summed, x=(3, 4), W=(4, 4))
    assert r.status == "fail" and "Custom VJP bwd rule" in r.message and "shape" in r.message


def test_dtype_float32_passes_a_right_rule_and_fails_a_float32_sized_bug():
    r = run(softplus, x=(5, 3), dtype="float32")
    assert r.status == "pass", r.message
    assert run(rmsnorm, x=(4, 8), w=(8,), dtype="float32").status == "pass"
    r = run(softplus_off_1e3, x=(5, 3), dtype="float32")
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"x"}
    assert run(softplus, x=(5, 3), dtype="bfloat16").status == "pass"


def test_the_vjp_runs_in_the_dtype_under_test_at_the_rounded_point():
    spec = build_spec(linear_primal, x=(3, 4), W=jnp.asarray(np.eye(4) * 0.3 + 0.1, dtype=jnp.float16),
                      dtype="float32", framework="jax")
    inputs = materialize(jax_target.as_arrays(spec.inputs), 0)
    fn, vjp, _, inputs = jax_target.functions(spec, spec.options, inputs)
    x32, w16 = jnp.asarray(inputs["x"], jnp.float32), jnp.asarray(inputs["W"], jnp.float16)
    assert np.array_equal(np.asarray(x32, np.float64), inputs["x"])  # the point is a float32 point
    g = np.linspace(-1, 1, 12).reshape(3, 4)
    _, pullback = jax.vjp(lambda a, b: a @ b, x32, w16)
    want = pullback(jnp.asarray(g, jnp.float32))
    got = vjp(g, **inputs)
    assert np.array_equal(got["x"], np.asarray(want[0], np.float64))
    assert np.array_equal(got["W"], np.asarray(want[1], np.float64))  # W keeps its own float16
    assert jax_target.run_dtype_name(linear_primal, spec.options, spec.inputs) == "float16"
    assert jax_target.run_dtype_name(linear_primal, {}, {"x": (3,)}) == "float64"
    # the reference runs in float64
    assert np.allclose(fn(**inputs), inputs["x"] @ inputs["W"], rtol=1e-15, atol=0)


def test_plain_function_of_jax_arrays_uses_jaxs_own_ad():
    def layer(x, W, b):
        return jnp.tanh(x @ W + b), x.sum()

    r = run(layer, x=(3, 4), W=(4, 2), b=(2,), framework="jax")
    assert r.status == "pass", r.message
    assert run(layer, x=(3, 4), W=(4, 2), b=(2,), framework="jax", output=1).status == "pass"
    assert run(jnp.sin, x=(4,), framework="jax").status == "pass"  # positional-only parameters
    assert run(jax.jit(lambda x: jnp.cos(x).sum()), x=(3,), framework="jax").status == "pass"
    # a stopped gradient: JAX's gradient is wrong for this function, and the numerics say so
    r = run(lambda x: (jax.lax.stop_gradient(x) ** 2).sum() + x.sum(), x=(3,), framework="jax")
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"x"}


def test_integer_inputs_are_constants():
    @partial(jax.custom_vjp, nondiff_argnums=(1,))
    def power(x, n):
        return x ** n

    power.defvjp(lambda x, n: (x ** n, x), lambda n, x, g: (g * n * x ** (n - 1),))
    assert run(power, x=(4,), n=3).status == "pass"
    r = run(lambda x, axis: jnp.sum(x ** 2, axis=axis), x=(3, 2), axis=1, framework="jax")
    assert r.status == "pass", r.message


def test_fast_mode_and_order_two():
    r = run(rmsnorm_wrong_axis, x=(4, 8), w=(8,), mode="fast")
    assert r.status == "fail" and r.mode == "fast" and {m.input for m in r.mismatches} == {"x"}, r.message
    r = run(rmsnorm, x=(4, 8), w=(8,), mode="fast")
    assert r.status == "pass" and r.mode == "fast"
    r = run(softplus, x=(4,), order=2)
    assert r.status == "pass", r.message


def test_inputs_bind_by_name_or_by_position():
    def scale(*args):
        a, b = args
        return a * b

    scaled = _vjp_rule(scale, lambda r, g: (g * r[1], g * r[0]))
    assert run(scaled, p=(3,), q=(3,)).status == "pass"  # *args: positional, in the order given
    assert run(linear, W=(4, 2), x=(3, 4)).status == "pass"  # by name, whatever the order
    assert run(linear, a=(3, 4), b=(4, 2)).status == "pass"  # no name matches: positional
    swapped = _vjp_rule(linear_primal, lambda r, g: (r[0].T @ g, g @ r[1].T))
    assert run(swapped, x=(4, 4), W=(4, 4)).status == "fail"


def test_bad_jax_checks_are_refused_at_registration():
    with pytest.raises(BadInput, match="no parameter 'z'"):
        build_spec(rmsnorm, x=(4, 8), z=(8,))
    with pytest.raises(BadInput, match="no value for parameter 'w'"):
        build_spec(rmsnorm, x=(4, 8))
    with pytest.raises(BadInput, match="jax's own gradients"):
        build_spec(softplus, vjp=lambda g, x: g, x=(3,))
    with pytest.raises(BadInput, match="is a jax.custom_vjp .*framework='torch' cannot check it"):
        build_spec(softplus, x=(3,), framework="torch")
    with pytest.raises(BadInput, match="applies to torch checks only"):
        build_spec(softplus, x=(3,), device="cuda")


def test_complex_inputs_are_checked_as_parts():
    r = run(lambda z: jnp.abs(z).sum(), z=np.array([1 + 2j, 3 - 1j]), framework="jax")
    assert r.status == "pass", r.message
    assert any("z: complex, checked as real and imaginary parts" in n for n in r.notes)


def test_detects_only_custom_rules():
    assert jax_target.detects(softplus) and jax_target.detects(log1pexp)
    assert not jax_target.detects(softplus_primal)
    assert not jax_target.detects(jax.jit(softplus_primal))
    assert jax_target.display_name(log1pexp) == "log1pexp"


def test_without_jax_the_check_is_an_error_naming_the_extra(monkeypatch):
    spec = build_spec(lambda x: x * 2, x=(3,), framework="jax")
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax now raises ImportError
    assert not jax_target.detects(softplus_primal) and not jax_target.detects(object())
    r = run_check(spec, {})
    assert r.status == "error"
    assert "pip install 'gradcli[jax]'" in r.message
    assert run(lambda x: np.sum(x ** 2), x=(3,)).status == "pass"  # numpy checks still run


def test_the_primal_without_its_rule_is_a_second_reference():
    r = run(rmsnorm, x=(4, 8), w=(8,))
    assert r.status == "pass" and r.reference == "jax_autodiff", (r.reference, r.notes)
    r = run(rmsnorm_wrong_axis, x=(4, 8), w=(8,))
    assert r.status == "fail" and r.reference == "jax_autodiff"
    assert run(lambda x: jnp.sum(jnp.tanh(x)), x=(3,), framework="jax").reference == "richardson"


def test_hand_written_gradients_with_jax_arrays_are_checked(monkeypatch):
    import gradcli.checks.registry as registry

    found = []
    monkeypatch.setattr(registry, "REGISTRY", found)

    @registry.check(x=(3, 4), W=(4, 2), framework="jax")
    def layer(x, W):
        return jnp.tanh(x @ W)

    @layer.vjp
    def layer_vjp(g, x, W):
        d = g * (1 - jnp.tanh(x @ W) ** 2)
        return d @ W.T, x.T @ d

    @registry.check(x=(5,), framework="jax")
    def cube(x):
        return jnp.sum(x ** 3)

    cube.grad(lambda x: 3 * x)  # the missing factor x
    r = [run_check(s, {}) for s in found]
    assert [x.status for x in r] == ["pass", "fail"], [x.message for x in r]
    assert r[0].reference == "jax_autodiff" and {m.input for m in r[1].mismatches} == {"x"}


JAX_MODEL = '''
import jax, jax.numpy as jnp, gradcli

@jax.custom_vjp
def softplus(x):
    return jnp.logaddexp(x, 0.0)

softplus.defvjp(lambda x: (softplus(x), x), lambda x, g: (0.5 * g * jax.nn.sigmoid(x),))
gradcli.check(softplus, x=(5,))
'''


def test_a_process_that_started_jax_runs_model_files_in_fresh_interpreters(tmp_path):
    """A fork of a process whose JAX runtime is running hangs or aborts in its first JAX call: the
    pytest plugin in a JAX project, or gradcli driven from Python after JAX work."""
    from cli_helpers import check, strict_json

    assert float(jnp.sum(jnp.ones((50, 50)) @ jnp.ones((50, 50)))) == 125000.0  # JAX's runtime is up here
    (tmp_path / "rule.py").write_text(JAX_MODEL)
    res = check(tmp_path / "rule.py", "--json", "--timeout", "60")
    doc = strict_json(res.stdout)
    assert res.exit_code == 1 and doc["checks"][0]["status"] == "fail", res.output  # the 0.5 is caught
    (tmp_path / "slow.py").write_text("import time, gradcli\n\n@gradcli.check(x=(2,))\ndef slow(x):\n"
                                      "    time.sleep(60)\n    return (x * x).sum()\n")
    res = check(tmp_path / "slow.py", "--json", "--timeout", "2")
    doc = strict_json(res.stdout)
    assert doc["checks"][0]["status"] == "error" and "2 s" in doc["checks"][0]["message"], doc


def test_torchs_options_from_the_project_or_command_line_leave_jax_checks_alone():
    spec = build_spec(softplus, x=(5,))
    assert run_check(spec, {"autocast": "bf16", "device": "cuda"}).status == "pass"  # --autocast, [tool.gradcli]
    with pytest.raises(BadInput, match="applies to torch checks only"):
        build_spec(softplus, x=(5,), autocast="bf16")  # set on the check itself: refused


def test_a_jitted_custom_rule_is_still_a_jax_check():
    # jax.jit(rule) hides the custom_vjp behind a PjitFunction: it is checked as the rule it wraps,
    # not skipped as a numpy function
    from gradcli.checks.registry import build_spec
    from gradcli.checks.runner import run_check

    def softplus_with(bwd_sign):
        @jax.custom_vjp
        def softplus(x):
            return jnp.log1p(jnp.exp(x))
        softplus.defvjp(lambda x: (softplus(x), x), lambda x, g: (g * jax.nn.sigmoid(bwd_sign * x),))
        return softplus

    right = run_check(build_spec(jax.jit(softplus_with(1.0)), x=(4,)), {})
    wrong = run_check(build_spec(jax.jit(softplus_with(-1.0)), x=(4,)), {})
    assert right.status == "pass" and right.kind == "vjp", right.message
    assert wrong.status == "fail", wrong.message
