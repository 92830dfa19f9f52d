"""A corpus of small JAX custom rules, each buggy one beside its correct twin (no tests here).

tests/checks/test_jax_corpus.py asserts gradcli's verdict on every case and compares it with
jax.test_util.check_grads. Every rule is a ``jax.custom_vjp`` or ``jax.custom_jvp`` function, named as its
case is, on arrays of at most ~64 elements.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from gradcli.checks.registry import materialize

C_GELU = math.sqrt(2.0 / math.pi)


def _named(name: str, primal):
    """``primal`` under the name ``name``; it keeps primal's signature, by which gradcli binds the inputs."""
    @functools.wraps(primal)
    def fun(*args, **kw):
        return primal(*args, **kw)
    fun.__name__ = fun.__qualname__ = name
    return fun


@functools.cache
def _jit_primal(primal):
    # compiling is most of what this corpus costs (JAX compiles each jitted function once per shape and dtype,
    # and unjitted, every operation): one jitted primal serves a family's every rule, and each bwd is jitted
    return jax.jit(primal)


def vjp_rule(name: str, primal, bwd):
    """``primal`` as a custom_vjp named ``name``: fwd saves the inputs, ``bwd(inputs, g)`` is the rule."""
    jitted = _jit_primal(primal)
    f = jax.custom_vjp(_named(name, jitted))
    f.defvjp(lambda *args: (jitted(*args), args), jax.jit(bwd))
    return f


def jvp_rule(name: str, primal, tangent):
    """``primal`` as a custom_jvp named ``name`` whose output tangent is ``tangent(primals, tangents)``."""
    jitted = _jit_primal(primal)
    f = jax.custom_jvp(_named(name, jitted))
    f.defjvp(lambda primals, tangents: (jitted(*primals), tangent(primals, tangents)))
    return f


# Each ``_*_bwd`` / ``_*_tangent`` factory's keywords default to the right rule: one keyword, one bug.

# --- fused softmax cross-entropy ------------------------------------------------------------------

def xent(z, labels):
    """The batch mean of -log softmax(z)[label]; the integer labels are constants."""
    return -jnp.take_along_axis(jax.nn.log_softmax(z, axis=1), labels[:, None], axis=1).mean()


def _xent_bwd(onehot=True, divide=True):
    def bwd(res, g):
        z, labels = res
        p = jax.nn.softmax(z, axis=1)
        if onehot:
            p = p - jax.nn.one_hot(labels, z.shape[1], dtype=z.dtype)
        return g * p / (z.shape[0] if divide else 1), None  # None: integer labels take no cotangent
    return bwd


# --- RMSNorm over the last axis -------------------------------------------------------------------

def _rms(x, eps):
    return jnp.sqrt((x * x).mean(-1, keepdims=True) + eps)


def rmsnorm(x, w):
    """x / sqrt(mean(x^2) + 1e-5) * w."""
    return x / _rms(x, 1e-5) * w


def _rmsnorm_bwd(eps=1e-5, axis=-1):
    def bwd(res, g):
        x, w = res
        r = _rms(x, eps)  # recomputed, as a bwd may, with an eps of its own
        xh, gxh = x / r, g * w
        return (gxh - xh * (gxh * xh).mean(axis, keepdims=True)) / r, (g * xh).sum(0)
    return bwd


def _rmsnorm_remat_bwd(res, g):
    # a rematerialising bwd, the forward recomputed and differentiated here, with the root mean square
    # under stop_gradient: a term that depends on x, so x's gradient loses its projection
    x, w = res
    again = lambda x, w: x / jax.lax.stop_gradient(_rms(x, 1e-5)) * w  # noqa: E731
    return jax.vjp(again, x, w)[1](g)


# --- GELU (tanh approximation) --------------------------------------------------------------------

def gelu(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1 + jnp.tanh(C_GELU * (x + 0.044715 * x ** 3)))


def _gelu_bwd(k=3 * 0.044715, with_g=True):
    def bwd(res, g):
        (x,) = res
        t = jnp.tanh(C_GELU * (x + 0.044715 * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * C_GELU * (1 + k * x * x)
        return (g * d if with_g else d,)
    return bwd


# --- attention scores and linear ------------------------------------------------------------------

def scores(q, k):
    """q k^T / sqrt(d)."""
    return q @ k.T / math.sqrt(q.shape[1])


def _scores_bwd(transpose=True, scale=True):
    def bwd(res, g):
        q, k = res
        c = math.sqrt(q.shape[1])
        # as many queries as keys: g and g.T have one shape, so only the values can tell
        return g @ k / (c if scale else 1), (g.T if transpose else g) @ q / c
    return bwd


def linear(x, W, b):
    """x W + b; W is square here, so that the shapes hide a missing transpose."""
    return x @ W + b


def _linear_bwd(transpose=True, bias=True):
    def bwd(res, g):
        x, W, b = res
        return g @ (W.T if transpose else W), x.T @ g, g.sum(0) if bias else jnp.zeros_like(b)
    return bwd


# --- a stopped gradient in a custom_jvp ------------------------------------------------------------

def l2_normalize(x):
    """x / ||x|| over the last axis."""
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def _l2_tangent(stop=False):
    def tangent(primals, tangents):
        (x,), (t,) = primals, tangents
        n = jnp.linalg.norm(x, axis=-1, keepdims=True)
        y = x / n
        proj = y * (y * t).sum(-1, keepdims=True) / n
        # stop_gradient of a tangent is right in forward mode and has no transpose in reverse mode
        return t / n - (jax.lax.stop_gradient(proj) if stop else proj)
    return tangent


# --- reductions and elementwise -------------------------------------------------------------------

def logsumexp(x):
    """log sum exp over the last axis."""
    return jax.nn.logsumexp(x, axis=-1)


def _logsumexp_bwd(by_max=False):
    def bwd(res, g):
        (x,) = res
        m = x.max(-1, keepdims=True) if by_max else jax.nn.logsumexp(x, axis=-1, keepdims=True)
        return (g[:, None] * jnp.exp(x - m),)
    return bwd


def softplus(x):
    return jnp.logaddexp(x, 0.0)


def _softplus_tangent(sign=1.0):
    def tangent(primals, tangents):
        (x,), (t,) = primals, tangents
        return t * jax.nn.sigmoid(sign * x)
    return tangent


def _softplus_bwd(cancels=False):
    def bwd(res, g):
        (x,) = res
        # 1 - 1 / (1 + e^x) is sigmoid(x) in exact arithmetic; for x << 0, the difference of two numbers near 1
        return (g * (1 - 1 / (1 + jnp.exp(x))) if cancels else g * jax.nn.sigmoid(x),)
    return bwd


# --- rules that differ from the derivative on purpose ---------------------------------------------
# A straight-through estimator or a clipped gradient is a deliberate choice of a training recipe, but it is
# not the derivative of the function: gradcli checks derivatives, so it fails them, and rightly so.

def quantize(x):
    """round(x): a staircase, whose derivative is 0 between its steps."""
    return jnp.round(x)


def _quantize_bwd(straight_through=False):
    def bwd(res, g):
        return (g if straight_through else jnp.zeros_like(g),)
    return bwd


def identity(x):
    return x


def _identity_bwd(clip=None):
    def bwd(res, g):
        return (g if clip is None else jnp.clip(g, -clip, clip),)
    return bwd


# --- the rules ------------------------------------------------------------------------------------

RULES = {f.fun.__name__: f for f in [
    vjp_rule("xent", xent, _xent_bwd()),
    vjp_rule("xent_no_batch_divide", xent, _xent_bwd(divide=False)),  # the forward's mean forgotten
    vjp_rule("xent_no_onehot", xent, _xent_bwd(onehot=False)),  # softmax alone: the label's -1 missing
    vjp_rule("rmsnorm", rmsnorm, _rmsnorm_bwd()),
    vjp_rule("rmsnorm_eps_mismatch", rmsnorm, _rmsnorm_bwd(eps=1e-3)),
    vjp_rule("rmsnorm_wrong_axis", rmsnorm, _rmsnorm_bwd(axis=0)),  # the projection over the batch
    vjp_rule("rmsnorm_stopped_rms", rmsnorm, _rmsnorm_remat_bwd),
    vjp_rule("gelu", gelu, _gelu_bwd()),
    vjp_rule("gelu_wrong_constant", gelu, _gelu_bwd(k=0.044715)),  # the cube's 3 dropped
    vjp_rule("gelu_forgets_g", gelu, _gelu_bwd(with_g=False)),  # the local derivative, not a vjp
    vjp_rule("scores", scores, _scores_bwd()),
    vjp_rule("scores_missing_transpose", scores, _scores_bwd(transpose=False)),
    vjp_rule("scores_missing_scale", scores, _scores_bwd(scale=False)),
    vjp_rule("linear", linear, _linear_bwd()),
    vjp_rule("linear_missing_transpose", linear, _linear_bwd(transpose=False)),
    vjp_rule("linear_zero_bias", linear, _linear_bwd(bias=False)),  # b's gradient stopped: zeros
    jvp_rule("l2_normalize_jvp", l2_normalize, _l2_tangent()),
    jvp_rule("l2_normalize_jvp_stopped", l2_normalize, _l2_tangent(stop=True)),
    vjp_rule("logsumexp", logsumexp, _logsumexp_bwd()),
    vjp_rule("logsumexp_by_max", logsumexp, _logsumexp_bwd(by_max=True)),  # the max is not the normaliser
    jvp_rule("softplus_jvp", softplus, _softplus_tangent()),
    jvp_rule("softplus_jvp_wrong_sign", softplus, _softplus_tangent(sign=-1.0)),
    vjp_rule("softplus_negative", softplus, _softplus_bwd()),
    vjp_rule("softplus_cancels", softplus, _softplus_bwd(cancels=True)),
    vjp_rule("quantize", quantize, _quantize_bwd()),
    vjp_rule("quantize_straight_through", quantize, _quantize_bwd(straight_through=True)),
    vjp_rule("identity", identity, _identity_bwd()),
    vjp_rule("clip_gradient", identity, _identity_bwd(clip=0.5)),
]}


# --- the cases ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    target: object  # the custom_vjp / custom_jvp function given to gradcli.check
    inputs: dict
    buggy: bool
    bad: frozenset = frozenset()  # the inputs the failure names (a bug's mismatches are exactly these)
    says: str = ""  # text the failure message holds where no value is compared (JAX raised)
    dtypes: tuple = ("float64", "float32")  # where the verdict holds; a cancellation bug is float32's
    twin: str = ""  # the correct case a bug is a variant of
    options: dict = field(default_factory=dict)  # gradcli.check options besides dtype (seed=, wrt=)


def _c(name, inputs, rule=None, **kw):
    return Case(name, RULES[rule or name], inputs, False, **kw)


def _b(name, inputs, twin, bad=(), **kw):
    return Case(name, RULES[name], inputs, True, frozenset(bad), twin=twin, **kw)


# one shape, (3, 4), wherever a case allows: what JAX compiles for one case's shapes and dtype serves the next
XENT = {"z": (3, 4), "labels": np.array([1, 0, 3])}
NORM = {"x": (3, 4), "w": (4,)}
X = {"x": (3, 4)}
QK = {"q": (3, 4), "k": (3, 4)}
LIN = {"x": (3, 4), "W": (4, 4), "b": (4,)}
LOW = {"x": np.random.default_rng(0).uniform(-12.0, -9.0, size=(3, 4))}  # sigmoid(x) is 6e-6 to 1e-4
# at least 0.2 from every half-integer, where round jumps: the staircase is flat about each point
STEPS = {"x": np.array([[-1.8, -1.2, -0.8, -0.3], [0.1, 0.3, 0.7, 1.1], [1.3, 1.7, 2.2, 2.8]])}

CASES = [
    _c("xent", XENT),
    _b("xent_no_batch_divide", XENT, "xent", {"z"}),
    _b("xent_no_onehot", XENT, "xent", {"z"}),
    _c("rmsnorm", NORM),
    _b("rmsnorm_eps_mismatch", NORM, "rmsnorm", {"x", "w"}),
    _b("rmsnorm_wrong_axis", NORM, "rmsnorm", {"x"}),
    _b("rmsnorm_stopped_rms", NORM, "rmsnorm", {"x"}),
    _c("gelu", X),
    _b("gelu_wrong_constant", X, "gelu", {"x"}),
    _b("gelu_forgets_g", X, "gelu", {"x"}),
    _c("scores", QK),
    _b("scores_missing_transpose", QK, "scores", {"k"}),
    _b("scores_missing_scale", QK, "scores", {"q"}),
    _c("linear", LIN),
    _b("linear_missing_transpose", LIN, "linear", {"x"}),
    _b("linear_zero_bias", LIN, "linear", {"b"}),
    _c("linear_zero_bias_wrt_x_W", LIN, rule="linear_zero_bias", options={"wrt": ["x", "W"]}),  # b not asked for
    _c("l2_normalize_jvp", X),
    # JAX cannot transpose the tangent rule: no gradient to compare, a fail with JAX's message
    _b("l2_normalize_jvp_stopped", X, "l2_normalize_jvp", says="Transpose rule"),
    _c("logsumexp", X),
    _b("logsumexp_by_max", X, "logsumexp", {"x"}),
    _c("softplus_jvp", X),
    _b("softplus_jvp_wrong_sign", X, "softplus_jvp", {"x"}),
    # float32 cancellation: right in exact arithmetic, 1e-3 to 1e-2 off in float32, where 1 - 1 / (1 + e^x) cancels
    _c("softplus_negative", LOW),
    _b("softplus_cancels", LOW, "softplus_negative", {"x"}, dtypes=("float32",)),
    # not derivatives on purpose (see above): gradcli fails them
    _c("quantize", STEPS),
    _b("quantize_straight_through", STEPS, "quantize", {"x"}),
    _c("identity", X),
    _b("clip_gradient", X, "identity", {"x"}),
]
BY_NAME = {c.name: c for c in CASES}


# --- the same check for jax.test_util.check_grads -------------------------------------------------

def values(case: Case) -> dict:
    """The input values gradcli's check of ``case`` draws (name -> float64 or integer numpy array)."""
    return materialize(case.inputs, int(case.options.get("seed", 0)), case.options.get("domain"))


def check_grads_call(case: Case):
    """-> (f, args): ``f(*args)`` is the case's target of its float inputs (float64 jax arrays), its other
    inputs closed over as constants, for ``jax.test_util.check_grads``. Needs jax_enable_x64."""
    given = {k: jnp.asarray(v) for k, v in values(case).items()}
    wrt = case.options.get("wrt") or [k for k, v in given.items() if jnp.issubdtype(v.dtype, jnp.floating)]

    def f(*xs):
        return case.target(**{**given, **dict(zip(wrt, xs))})
    return f, tuple(given[k] for k in wrt)
