"""Framework checks at second order (torch's double backward, JAX's vjp of its vjp) and torch's
backward determinism, each torch case also run through torch's own gradgradcheck / gradcheck."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.core.errors import BadInput

torch = pytest.importorskip("torch")

from torch_corpus import Cube, CubeDetachedGradOut, CubeDetachedX, CubeWGradNoGrad  # noqa: E402 - needs torch


def run(fn, **kw):
    return run_check(build_spec(fn, **kw), {})


class CubeOnce(Cube):
    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g[:, None] * 3 * x ** 2 * w, (g[:, None] * x ** 3).sum(0)


class TanhSavedIntermediate(torch.autograd.Function):
    """Saves tanh(x), computed inside forward where autograd does not record it: a constant to the
    double backward."""

    @staticmethod
    def forward(ctx, x):
        t = torch.tanh(x)
        ctx.save_for_backward(t)
        return t * x

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * (t + x_of(t) * (1 - t ** 2))


def x_of(t):
    return torch.atanh(t)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * g * x


class SquareMutatesSaved(Square):
    """Doubles its saved input in place: the first backward is right, a second raises."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x.mul_(2)
        return g * x


class SquareMutatesKept(torch.autograd.Function):
    """Keeps 2x on ctx (no version check) and doubles it in place: a second backward gives 4x."""

    @staticmethod
    def forward(ctx, x):
        ctx.twice = 2 * x
        return x * x

    @staticmethod
    def backward(ctx, g):
        ctx.twice.mul_(1.0)
        out = g * ctx.twice
        ctx.twice.mul_(2.0)
        return out


class SquareJitters(Square):
    """Each backward call is off by 1e-12 relative more than the last (an atomic-add order, say)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        ctx.calls = getattr(ctx, "calls", 0) + 1
        return 2 * g * x * (1 + 1e-12 * ctx.calls)


def _inputs(cls, seed=0):
    rng = np.random.default_rng(seed)
    if cls.forward.__code__.co_argcount == 3:
        return (torch.tensor(rng.standard_normal((3, 4)), requires_grad=True),
                torch.tensor(rng.standard_normal(4), requires_grad=True))
    return (torch.tensor(rng.standard_normal(5), requires_grad=True),)


def _gradgradcheck(cls) -> bool:
    try:
        return bool(torch.autograd.gradgradcheck(cls.apply, _inputs(cls), raise_exception=True))
    except Exception:  # noqa: BLE001 - gradgradcheck says no by raising
        return False


def _check(cls, **kw):
    names = ("x", "w") if cls.forward.__code__.co_argcount == 3 else ("x",)
    shapes = {"x": (3, 4), "w": (4,)} if len(names) == 2 else {"x": (5,)}
    return run(cls.apply, **{n: shapes[n] for n in names}, **kw)


def test_a_differentiable_backward_passes_order_two_as_gradgradcheck_does():
    assert _gradgradcheck(Cube)
    r = _check(Cube, order=2)
    assert r.status == "pass", r.message
    assert "torch's double backward agrees along the inputs and the cotangent" in r.message
    assert r.methods["double_backward"].status == "ok" and r.methods["double_backward_cotangent"].status == "ok"
    assert r.second_order["checks"]["hvp"] == "ok" and r.second_order["checks"]["cotangent"] == "ok"


def test_once_differentiable_is_skipped_at_order_two_with_the_reason():
    # gradgradcheck calls it a Jacobian mismatch (the error node is cut off from the inputs)
    assert not _gradgradcheck(CubeOnce)
    assert _check(CubeOnce).status == "pass"
    r = _check(CubeOnce, order=2)
    assert r.status == "skipped" and "once_differentiable" in r.message and "first order passed" in r.message


def test_a_detached_input_term_fails_order_two_naming_the_pair():
    assert not _gradgradcheck(CubeDetachedX)
    assert _check(CubeDetachedX).status == "pass"
    r = _check(CubeDetachedX, order=2)
    assert r.status == "fail" and r.mismatches[0].input == "x", r.message
    assert "torch's double backward" in r.message and "the gradient for x is wrong as a function of x" in r.message


def test_a_gradient_under_no_grad_fails_order_two_naming_the_cross_term():
    # gradgradcheck passes this one: it leaves out the backward's outputs that do not require grad. The
    # true cross term d(grad w)/dx = 3 x^2 g is far from the 0 torch's double backward gives.
    x, w = _inputs(Cube)
    g = torch.ones(3, dtype=torch.float64)
    (gw,) = torch.autograd.grad((x ** 3 * w).sum(-1), [w], grad_outputs=g, create_graph=True)
    (cross,) = torch.autograd.grad(gw.sum(), [x])
    assert torch.allclose(cross, 3 * x.detach() ** 2) and cross.abs().min() > 1e-3
    assert _check(CubeWGradNoGrad).status == "pass"
    r = _check(CubeWGradNoGrad, order=2)
    # reverse over reverse: the x entries of the double backward carry d(grad w)/dx along w's directions
    assert r.status == "fail" and {m.input for m in r.mismatches} == {"x"}, r.message
    assert "the gradient for w is wrong as a function of x" in r.message


def test_a_saved_forward_intermediate_fails_order_two():
    assert not _gradgradcheck(TanhSavedIntermediate)
    assert _check(TanhSavedIntermediate).status == "pass"
    r = _check(TanhSavedIntermediate, order=2)
    assert r.status == "fail" and r.mismatches[0].input == "x", r.message
    assert "a forward intermediate saved for backward" in r.message


class SquareWrongBackward(Square):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x


class CubeThroughAWrongFunction(torch.autograd.Function):
    """Right at first order, but its backward squares x with a Function whose own backward is wrong (3x
    for 2x): torch's double backward goes through that rule. Nothing is detached."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * SquareWrongBackward.apply(x) * g


class CubeWiggle(CubeThroughAWrongFunction):
    """A backward off by 1e-7 sin(1e5 x): right at the inputs to 1e-7, its derivative off by 1e-2."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (3 * x * x + 1e-7 * torch.sin(1e5 * x).detach()) * g


def test_order_two_hints_name_what_was_checked_and_only_the_frameworks_causes():
    for cls in (CubeThroughAWrongFunction, CubeWiggle):
        assert not _gradgradcheck(cls) and _check(cls).status == "pass", cls.__name__
    r = _check(CubeThroughAWrongFunction, order=2)
    assert r.status == "fail" and "torch's double backward" in r.message, r.message
    assert "call a Function whose own backward is wrong" in r.message and "stop_gradient" not in r.message
    r = _check(CubeWiggle, order=2)
    assert r.status == "fail" and "differences of torch's backward" in r.message, r.message
    assert "torch's backward is right at the inputs but not as a function of them" in r.message
    assert "hand-written" not in r.message and "cached or frozen" not in r.message


def test_a_detached_grad_output_fails_in_the_cotangent_direction():
    assert not _gradgradcheck(CubeDetachedGradOut)
    assert _check(CubeDetachedGradOut).status == "pass"
    r = _check(CubeDetachedGradOut, order=2)
    assert r.status == "fail" and "cotangent direction" in r.message and "g.detach()" in r.message, r.message
    assert r.methods["double_backward"].status == "ok"
    assert r.methods["double_backward_cotangent"].status == "mismatch"


def test_a_scalar_output_checks_the_cotangent_too():
    def loss(x):
        return CubeDetachedGradOut.apply(x, torch.ones(4, dtype=x.dtype)).sum()

    assert run(loss, x=(3, 4), framework="torch").status == "pass"
    r = run(loss, x=(3, 4), framework="torch", order=2)
    assert r.status == "fail" and "cotangent direction" in r.message, r.message


def test_a_module_passes_order_two_against_torch_autograd():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    r = run(net, x=(2, 3), order=2)
    assert r.status == "pass", r.message
    assert r.methods["double_backward"].status == "ok"


def test_the_torch_corpus_at_order_two_agrees_with_gradgradcheck():
    import warnings

    import torch_corpus as corpus

    for case in [c for c in corpus.CASES if not c.buggy]:
        f, tensors = corpus.gradcheck_call(case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = bool(torch.autograd.gradgradcheck(f, tensors, raise_exception=False))
        r = run_check(build_spec(case.target(), **case.inputs, **case.options, order=2), {})
        # a correct first-order rule that saves a forward intermediate is wrong at second order
        assert r.status == ("pass" if expected else "fail"), (case.name, r.message)


def test_a_float32_module_is_differentiated_in_float64_at_order_two():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    r = run(net, x=(2, 3), order=2)
    assert r.dtype == "float32" and r.status == "pass", r.message
    assert _check(Cube, order=2, dtype="float32").status == "pass"
    assert _check(CubeDetachedX, order=2, dtype="float32").status == "fail"


def _gradcheck_twice(cls) -> bool:
    """torch's own gradcheck, which also runs the backward twice (nondet_tol=0)."""
    try:
        return bool(torch.autograd.gradcheck(cls.apply, _inputs(cls), raise_exception=True))
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.parametrize("cls", [SquareMutatesSaved, SquareMutatesKept])
def test_a_backward_that_mutates_saved_state_fails_as_not_deterministic(cls):
    assert not _gradcheck_twice(cls)
    r = _check(cls)
    assert r.status == "fail" and "not deterministic" in r.message and "in place" in r.message, r.message


def test_nondet_tol_allows_a_tiny_difference():
    assert _gradcheck_twice(Square)
    assert _check(Square).status == "pass"
    r = _check(SquareJitters)
    assert r.status == "fail" and "not deterministic" in r.message and "nondet_tol" in r.message, r.message
    with pytest.raises(RuntimeError):
        torch.autograd.gradcheck(SquareJitters.apply, _inputs(SquareJitters))
    assert torch.autograd.gradcheck(SquareJitters.apply, _inputs(SquareJitters), nondet_tol=1e-9)
    assert _check(SquareJitters, nondet_tol=1e-9).status == "pass"
    # the project's defaults take it too
    assert run_check(build_spec(SquareJitters.apply, x=(5,)), {"nondet_tol": 1e-9}).status == "pass"


def test_nondet_tol_must_be_a_non_negative_number():
    with pytest.raises(BadInput, match="nondet_tol"):
        build_spec(Square.apply, x=(5,), nondet_tol=-1)


# JAX runs in a fresh interpreter: once this process had started JAX's runtime it could not be forked
# safely, and the tests that come after this file fork (tests/conftest.py puts only files named *jax*
# last).
JAX_CASES = r"""
import json
import jax
import jax.numpy as jnp
from jax.test_util import check_grads
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check

jax.config.update("jax_enable_x64", True)


def rule(bwd):
    def cube(x, w):
        return jnp.sum(x ** 3 * w, axis=-1)
    f = jax.custom_vjp(cube)
    f.defvjp(lambda x, w: (cube(x, w), (x, w)), bwd)
    return f


sg = jax.lax.stop_gradient
square = jax.custom_vjp(lambda x: x * x)
square.defvjp(lambda x: (x * x, x), lambda x, g: (3 * x * g,))
cases = {
    "right": rule(lambda r, g: (g[:, None] * 3 * r[0] ** 2 * r[1], jnp.sum(g[:, None] * r[0] ** 3, 0))),
    "stopped_input": rule(lambda r, g: (g[:, None] * 3 * sg(r[0]) ** 2 * r[1], jnp.sum(g[:, None] * r[0] ** 3, 0))),
    "stopped_cotangent": rule(lambda r, g: (sg(g)[:, None] * 3 * r[0] ** 2 * r[1],
                                            jnp.sum(sg(g)[:, None] * r[0] ** 3, 0))),
    # the bwd squares x with a custom_vjp whose own rule is wrong (3x for 2x); nothing is stopped
    "inner_rule": rule(lambda r, g: (g[:, None] * 3 * square(r[0]) * r[1], jnp.sum(g[:, None] * r[0] ** 3, 0))),
    # off by 1e-7 sin(1e5 x): right at the inputs, its derivative off by 1e-2
    "wiggle": rule(lambda r, g: (g[:, None] * (3 * r[0] ** 2 + 1e-7 * sg(jnp.sin(1e5 * r[0]))) * r[1],
                                 jnp.sum(g[:, None] * r[0] ** 3, 0))),
}
x = jax.random.normal(jax.random.PRNGKey(0), (3, 4))
w = jax.random.normal(jax.random.PRNGKey(1), (4,))
out = {}
for name, f in cases.items():
    try:
        check_grads(f, (x, w), order=2, modes=["rev"])
        reference = "pass"
    except AssertionError:
        reference = "fail"
    runs = [run_check(build_spec(f, x=(3, 4), w=(4,), order=order), {}) for order in (1, 2)]
    out[name] = {"check_grads": reference, "order1": runs[0].status, "order2": runs[1].status,
                 "message": runs[1].message, "inputs": sorted({m.input for m in runs[1].mismatches})}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def jax_results():
    import importlib.util
    import json
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", JAX_CASES], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jax_a_right_custom_vjp_passes_order_two_as_check_grads_does(jax_results):
    r = jax_results["right"]
    assert r["check_grads"] == "pass" and r["order2"] == "pass", r["message"]
    assert "JAX's vjp of its vjp agrees along the inputs and the cotangent" in r["message"]


def test_jax_stop_gradient_in_bwd_fails_order_two_as_check_grads_does(jax_results):
    r = jax_results["stopped_input"]
    assert r["check_grads"] == "fail" and r["order1"] == "pass"
    assert r["order2"] == "fail" and r["inputs"] == ["x"], r["message"]
    assert "the gradient for x is wrong as a function of x" in r["message"] and "stop_gradient" in r["message"]
    r = jax_results["stopped_cotangent"]
    assert r["check_grads"] == "fail" and r["order1"] == "pass"
    assert r["order2"] == "fail" and "cotangent direction" in r["message"], r["message"]


def test_jax_order_two_hints_name_what_was_checked_and_only_jaxs_causes(jax_results):
    for name in ("inner_rule", "wiggle"):
        r = jax_results[name]
        assert r["check_grads"] == "fail" and r["order1"] == "pass" and r["order2"] == "fail", (name, r["message"])
        assert "hand-written" not in r["message"] and "cached or frozen" not in r["message"], r["message"]
        assert "torch" not in r["message"], r["message"]
    assert "call a custom_vjp/custom_jvp function whose own rule is wrong" in jax_results["inner_rule"]["message"]
    assert "JAX's vjp is right at the inputs but not as a function of them" in jax_results["wiggle"]["message"]
