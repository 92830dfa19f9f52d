"""A corpus of small torch custom rules, each buggy one beside its correct twin (no tests here).

tests/checks/test_torch_corpus.py asserts gradcli's verdict on every case and compares it with
torch.autograd.gradcheck; benchmarks/frameworks.py tabulates both. Every rule is a
``torch.autograd.Function`` (some inside an ``nn.Module``) on tensors of at most ~64 elements.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from gradcli.checks.registry import materialize

C_GELU = math.sqrt(2.0 / math.pi)


def _rows(a, n=3, d=6, seed=0):
    return np.random.default_rng(seed).uniform(*a, size=(n, d))


def _variant(base, name: str, backward=None, **bug):
    """A subclass of ``base`` named ``name`` whose backward is ``backward``, else base's with ``bug``'s
    keywords (each keyword of a backward here defaults to the right rule): one bug in base's rule."""
    backward = backward or (lambda ctx, g: base.backward(ctx, g, **bug))
    return type(name, (base,), {"backward": staticmethod(backward), "__module__": __name__})


# --- fused softmax cross-entropy ------------------------------------------------------------------

class Xent(torch.autograd.Function):
    """The batch mean of -log softmax(z)[label]; the integer labels are constants."""

    @staticmethod
    def forward(ctx, z, labels):
        ctx.save_for_backward(z, labels)
        return -(z - torch.logsumexp(z, 1, keepdim=True)).gather(1, labels[:, None]).mean()

    @staticmethod
    def backward(ctx, g, axis=1, onehot=True, divide=True):
        z, labels = ctx.saved_tensors
        p = torch.softmax(z, axis)
        if onehot:
            p = p - torch.nn.functional.one_hot(labels, z.shape[1]).to(z.dtype)
        return g * p / (z.shape[0] if divide else 1), None


XentNoBatchDivide = _variant(Xent, "XentNoBatchDivide", divide=False)  # the forward's mean forgotten
XentNoOneHot = _variant(Xent, "XentNoOneHot", onehot=False)  # softmax alone: the label's -1 missing
XentWrongAxis = _variant(Xent, "XentWrongAxis", axis=0)  # softmax normalised over the batch


# --- RMSNorm and LayerNorm over the last axis -----------------------------------------------------

class RMSNorm(torch.autograd.Function):
    """x / sqrt(mean(x^2) + 1e-5) * w."""

    @staticmethod
    def forward(ctx, x, w):
        r = torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)
        ctx.save_for_backward(x, w, r)
        return x / r * w

    @staticmethod
    def backward(ctx, g, eps=None, axis=-1, use_w=True):
        x, w, r = ctx.saved_tensors
        if eps is not None:  # recomputed, as a backward may, with an eps of its own
            r = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
        xh = x / r
        gxh = g * w if use_w else g
        return (gxh - xh * (gxh * xh).mean(axis, keepdim=True)) / r, (g * xh).sum(0)


RMSNormEpsMismatch = _variant(RMSNorm, "RMSNormEpsMismatch", eps=1e-3)  # the forward's is 1e-5
RMSNormEpsDropped = _variant(RMSNorm, "RMSNormEpsDropped", eps=0.0)  # off by ~eps / mean(x^2): 1e-5
RMSNormWrongDim = _variant(RMSNorm, "RMSNormWrongDim", axis=0)  # the projection over the batch
RMSNormMissingW = _variant(RMSNorm, "RMSNormMissingW", use_w=False)  # g where g * w belongs
RMSNormDropsW = _variant(RMSNorm, "RMSNormDropsW", lambda ctx, g: (RMSNorm.backward(ctx, g)[0], None))


class LayerNorm(torch.autograd.Function):
    """(x - mean) / sqrt(var + 1e-5) * gamma + beta."""

    @staticmethod
    def forward(ctx, x, gamma, beta):
        mu = x.mean(-1, keepdim=True)
        s = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
        ctx.save_for_backward((x - mu) / s, s, gamma)
        return (x - mu) / s * gamma + beta

    @staticmethod
    def backward(ctx, g, mean_term=True, beta_sum=True):
        xh, s, gamma = ctx.saved_tensors
        gxh = g * gamma
        gx = gxh - xh * (gxh * xh).mean(-1, keepdim=True)
        if mean_term:
            gx = gx - gxh.mean(-1, keepdim=True)
        return gx / s, (g * xh).sum(0), g.sum(0) if beta_sum else g.mean(0)


LayerNormNoMeanTerm = _variant(LayerNorm, "LayerNormNoMeanTerm", mean_term=False)  # RMSNorm's rule
LayerNormBetaMean = _variant(LayerNorm, "LayerNormBetaMean", beta_sum=False)  # beta is broadcast: a sum


# --- GELU (tanh approximation) --------------------------------------------------------------------

class Gelu(torch.autograd.Function):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * x * (1 + torch.tanh(C_GELU * (x + 0.044715 * x ** 3)))

    @staticmethod
    def backward(ctx, g, c=C_GELU, k=3 * 0.044715, with_g=True):
        (x,) = ctx.saved_tensors
        t = torch.tanh(c * (x + 0.044715 * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + k * x * x)
        return g * d if with_g else d


GeluWrongConstant = _variant(Gelu, "GeluWrongConstant", k=0.044715)  # the cube's 3 dropped
GeluShortConstant = _variant(Gelu, "GeluShortConstant", c=0.7978)  # sqrt(2/pi) to 4 digits; forward has all
GeluForgetsGradOutput = _variant(Gelu, "GeluForgetsGradOutput", with_g=False)


# --- attention scores and linear ------------------------------------------------------------------

class Scores(torch.autograd.Function):
    """q k^T / sqrt(d)."""

    @staticmethod
    def forward(ctx, q, k):
        ctx.save_for_backward(q, k)
        return q @ k.T / math.sqrt(q.shape[1])

    @staticmethod
    def backward(ctx, g, transpose=True, scale=True):
        q, k = ctx.saved_tensors
        c = math.sqrt(q.shape[1])
        return g @ k / (c if scale else 1), (g.T if transpose else g) @ q / c


ScoresMissingTranspose = _variant(Scores, "ScoresMissingTranspose", transpose=False)  # as many q as k
ScoresMissingScale = _variant(Scores, "ScoresMissingScale", scale=False)  # q's gradient without 1 / sqrt(d)


class Linear(torch.autograd.Function):
    """x W + b; square here, so that the shapes hide the bugs."""

    @staticmethod
    def forward(ctx, x, W, b):
        ctx.save_for_backward(x, W)
        return x @ W + b

    @staticmethod
    def backward(ctx, g, transpose=True, bias_axis=0):
        x, W = ctx.saved_tensors
        return g @ (W.T if transpose else W), x.T @ g, g.sum(bias_axis)


LinearMissingTranspose = _variant(Linear, "LinearMissingTranspose", transpose=False)
LinearBiasWrongAxis = _variant(Linear, "LinearBiasWrongAxis", bias_axis=1)
LinearTwoGradients = _variant(Linear, "LinearTwoGradients", lambda ctx, g: Linear.backward(ctx, g)[:2])


# --- elementwise: sigmoid, tanh, softplus ---------------------------------------------------------

def _elementwise(name: str, f, df):
    """The Function y = f(x) with the rule g * df(x, y), saving input and output as rules that
    differentiate through the output do."""
    def forward(ctx, x):
        y = f(x)
        ctx.save_for_backward(x, y)
        return y

    def backward(ctx, g):
        return g * df(*ctx.saved_tensors)
    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward),
                                                   "__module__": __name__})


_softplus, _sig = torch.nn.functional.softplus, torch.sigmoid
Sigmoid = _elementwise("Sigmoid", _sig, lambda x, s: s * (1 - s))  # right while s is not close to 1
SigmoidOfInput = _elementwise("SigmoidOfInput", _sig, lambda x, s: x * (1 - x))  # the output's rule, fed the input
SigmoidStable = _elementwise("SigmoidStable", _sig, lambda x, s: _sig(x) * _sig(-x))  # 1 - s without a subtraction
Tanh = _elementwise("Tanh", torch.tanh, lambda x, y: 1 - y * y)  # right while |y| is not close to 1
TanhOfInput = _elementwise("TanhOfInput", torch.tanh, lambda x, y: 1 - x * x)
TanhStable = _elementwise("TanhStable", torch.tanh, lambda x, y: 1 / torch.cosh(x) ** 2)
Softplus = _elementwise("Softplus", _softplus, lambda x, y: _sig(x))
SoftplusWrongSign = _elementwise("SoftplusWrongSign", _softplus, lambda x, y: _sig(-x))
# sigmoid(x) as 1 - 1 / (1 + e^x): for x << 0, the difference of two numbers near 1
SoftplusCancels = _elementwise("SoftplusCancels", _softplus, lambda x, y: 1 - 1 / (1 + torch.exp(x)))


# --- reductions: log-sum-exp, L2 normalisation ----------------------------------------------------

class LogSumExp(torch.autograd.Function):
    """log sum exp over the last axis."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, torch.logsumexp(x, -1, keepdim=True))
        return torch.logsumexp(x, -1)

    @staticmethod
    def backward(ctx, g, by_max=False):
        x, m = ctx.saved_tensors
        return g[:, None] * torch.exp(x - (x.max(-1, keepdim=True).values if by_max else m))


LogSumExpByMax = _variant(LogSumExp, "LogSumExpByMax", by_max=True)  # the max is not the normaliser


class L2Normalize(torch.autograd.Function):
    """x / ||x|| over the last axis."""

    @staticmethod
    def forward(ctx, x):
        n = x.norm(dim=-1, keepdim=True)
        ctx.save_for_backward(x / n, n)
        return x / n

    @staticmethod
    def backward(ctx, g):
        y, n = ctx.saved_tensors
        return (g - y * (g * y).sum(-1, keepdim=True)) / n


L2NormalizeNoProjection = _variant(L2Normalize, "L2NormalizeNoProjection",
                                   lambda ctx, g: g / ctx.saved_tensors[1])  # the norm taken as a constant


# --- modules holding custom rules and parameters --------------------------------------------------

class Gain(torch.autograd.Function):
    """x * w, w broadcast over the batch."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0)


GainMean = _variant(Gain, "GainMean", lambda ctx, g: (g * ctx.saved_tensors[1], (g * ctx.saved_tensors[0]).mean(0)))


class GatedBlock(torch.nn.Module):
    """tanh(rule(lin(x), gain)): a Linear, then a custom rule with its own parameter."""

    def __init__(self, rule=Gain, d=4):
        super().__init__()
        self.rule = rule
        self.lin = torch.nn.Linear(d, d)
        self.gain = torch.nn.Parameter(torch.linspace(0.5, 1.5, d))

    def forward(self, x):
        return torch.tanh(self.rule.apply(self.lin(x), self.gain))


class RMSNormLayer(torch.nn.Module):
    def __init__(self, rule=RMSNorm, d=6):
        super().__init__()
        self.rule = rule
        self.weight = torch.nn.Parameter(torch.linspace(0.8, 1.2, d))

    def forward(self, x):
        return self.rule.apply(x, self.weight)


def _module(cls, rule):
    def make():
        torch.manual_seed(0)  # the same parameters on every call: gradcheck sees what gradcli saw
        return cls(rule)
    return make


# --- the cases ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    target: Callable  # -> the thing given to gradcli.check: Fn.apply or a fresh module
    inputs: dict
    buggy: bool
    bad: frozenset = frozenset()  # the inputs the failure names (a bug's mismatches are exactly these)
    says: str = ""  # text the failure message holds where no value is compared (None, a count)
    dtypes: tuple = ("float64", "float32")  # where it shows: a cancellation bug in float32, a 1e-5 one in float64
    twin: str = ""  # the correct case a bug is a variant of
    options: dict = field(default_factory=dict)  # gradcli.check options besides dtype (wrt=, seed=)


def _c(name, target, inputs, **kw):
    return Case(name, target, inputs, False, **kw)


def _b(name, target, inputs, twin, bad=(), **kw):
    return Case(name, target, inputs, True, frozenset(bad), twin=twin, **kw)


def _apply(cls):
    return lambda: cls.apply


XENT = {"z": (4, 5), "labels": np.array([1, 0, 4, 2])}
NORM = {"x": (3, 6), "w": (6,)}
LN = {"x": (3, 6), "gamma": (6,), "beta": (6,)}
X = {"x": (3, 6)}
QK = {"q": (3, 6), "k": (3, 6)}
LIN = {"x": (4, 4), "W": (4, 4), "b": (4,)}
HIGH = {"x": _rows((9.0, 12.0))}  # sigmoid saturates: 1 - s is 1e-4 to 1e-5
LOW = {"x": _rows((-12.0, -9.0))}
TANH_HIGH = {"x": _rows((4.0, 5.5))}  # 1 - tanh^2 is 6e-5 to 1e-3

CASES = [
    _c("xent", _apply(Xent), XENT),
    _b("xent_no_batch_divide", _apply(XentNoBatchDivide), XENT, "xent", {"z"}),
    _b("xent_no_onehot", _apply(XentNoOneHot), XENT, "xent", {"z"}),
    _b("xent_softmax_wrong_axis", _apply(XentWrongAxis), XENT, "xent", {"z"}),
    _c("rmsnorm", _apply(RMSNorm), NORM),
    _b("rmsnorm_eps_mismatch", _apply(RMSNormEpsMismatch), NORM, "rmsnorm", {"x", "w"}),
    # float64 only: 1e-5 relative, under float32's rounding and under gradcheck's rtol
    _b("rmsnorm_eps_dropped", _apply(RMSNormEpsDropped), NORM, "rmsnorm", {"x", "w"}, dtypes=("float64",)),
    _b("rmsnorm_wrong_dim", _apply(RMSNormWrongDim), NORM, "rmsnorm", {"x"}),
    _b("rmsnorm_missing_w", _apply(RMSNormMissingW), NORM, "rmsnorm", {"x"}),
    _b("rmsnorm_none_for_w", _apply(RMSNormDropsW), NORM, "rmsnorm", {"w"}, says="torch's backward gives None for w"),
    _c("rmsnorm_none_for_w_wrt_x", _apply(RMSNormDropsW), NORM, options={"wrt": ["x"]}),  # w is not asked for
    _c("layernorm", _apply(LayerNorm), LN),
    _b("layernorm_no_mean_term", _apply(LayerNormNoMeanTerm), LN, "layernorm", {"x"}),
    _b("layernorm_beta_mean", _apply(LayerNormBetaMean), LN, "layernorm", {"beta"}),
    _c("gelu", _apply(Gelu), X),
    _b("gelu_wrong_constant", _apply(GeluWrongConstant), X, "gelu", {"x"}),
    _b("gelu_short_constant", _apply(GeluShortConstant), X, "gelu", {"x"}, dtypes=("float64",)),
    _b("gelu_forgets_grad_output", _apply(GeluForgetsGradOutput), X, "gelu", {"x"}),
    _c("scores", _apply(Scores), QK),
    _b("scores_missing_transpose", _apply(ScoresMissingTranspose), QK, "scores", {"k"}),
    _b("scores_missing_scale", _apply(ScoresMissingScale), QK, "scores", {"q"}),
    _c("linear", _apply(Linear), LIN),
    _b("linear_missing_transpose", _apply(LinearMissingTranspose), LIN, "linear", {"x"}),
    _b("linear_bias_wrong_axis", _apply(LinearBiasWrongAxis), LIN, "linear", {"b"}),
    _b("linear_two_gradients", _apply(LinearTwoGradients), LIN, "linear", says="incorrect number of gradients"),
    _c("sigmoid", _apply(Sigmoid), X),
    _b("sigmoid_of_input", _apply(SigmoidOfInput), X, "sigmoid", {"x"}),
    _c("tanh", _apply(Tanh), X),
    _b("tanh_of_input", _apply(TanhOfInput), X, "tanh", {"x"}),
    _c("softplus", _apply(Softplus), X),
    _b("softplus_wrong_sign", _apply(SoftplusWrongSign), X, "softplus", {"x"}),
    _c("logsumexp", _apply(LogSumExp), X),
    _b("logsumexp_by_max", _apply(LogSumExpByMax), X, "logsumexp", {"x"}),
    _c("l2_normalize", _apply(L2Normalize), X),
    _b("l2_normalize_no_projection", _apply(L2NormalizeNoProjection), X, "l2_normalize", {"x"}),
    _c("gated_block", _module(GatedBlock, Gain), {"x": (3, 4)}),
    _b("gated_block_gain_mean", _module(GatedBlock, GainMean), {"x": (3, 4)}, "gated_block", {"gain"}),
    _c("rmsnorm_layer", _module(RMSNormLayer, RMSNorm), {"x": (3, 6)}),
    _b("rmsnorm_layer_wrong_dim", _module(RMSNormLayer, RMSNormWrongDim), {"x": (3, 6)}, "rmsnorm_layer", {"x"}),
    # float32 cancellation: right in exact arithmetic, ~1e-3 off in float32 where 1 - s cancels
    _c("sigmoid_stable_saturated", _apply(SigmoidStable), HIGH),
    _b("sigmoid_saturated", _apply(Sigmoid), HIGH, "sigmoid_stable_saturated", {"x"}, dtypes=("float32",)),
    _c("softplus_negative", _apply(Softplus), LOW),
    _b("softplus_cancels", _apply(SoftplusCancels), LOW, "softplus_negative", {"x"}, dtypes=("float32",)),
    _c("tanh_stable_saturated", _apply(TanhStable), TANH_HIGH),
    _b("tanh_saturated", _apply(Tanh), TANH_HIGH, "tanh_stable_saturated", {"x"}, dtypes=("float32",)),
]
BY_NAME = {c.name: c for c in CASES}


# --- the same check for torch.autograd.gradcheck --------------------------------------------------

def values(case: Case) -> dict:
    """The input values gradcli's check of ``case`` draws (name -> float64 or integer numpy array)."""
    return materialize(case.inputs, int(case.options.get("seed", 0)), case.options.get("domain"))


def gradcheck_call(case: Case, dtype=torch.float64):
    """-> (f, tensors): ``f(*tensors)`` is the case's target on its inputs (a module's parameters after its
    inputs), the floating ones in ``dtype`` and requiring grad where ``wrt=`` asks, for
    ``torch.autograd.gradcheck``."""
    target = case.target()
    wrt = case.options.get("wrt")
    given = [torch.tensor(v, dtype=dtype, requires_grad=wrt is None or k in wrt) if v.dtype.kind == "f"
             else torch.as_tensor(v) for k, v in values(case).items()]
    if not isinstance(target, torch.nn.Module):
        return target, tuple(given)
    module = target.to(dtype)
    names = [n for n, p in module.named_parameters() if p.requires_grad]
    params = [p.detach().clone().requires_grad_(True) for n, p in module.named_parameters() if p.requires_grad]
    k = len(given)

    def f(*tensors):
        return torch.func.functional_call(module, dict(zip(names, tensors[k:])), tuple(tensors[:k]))
    return f, tuple(given + params)


def gradcheck(case: Case, dtype=torch.float64, fast_mode=False) -> bool:
    """torch.autograd.gradcheck's verdict on ``case`` at its defaults (eps, atol, rtol); an exception
    from the rule itself (a wrong number of gradients) counts as a failure."""
    f, tensors = gradcheck_call(case, dtype)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradcheck's advice to use float64: the float32 runs mean it
            return bool(torch.autograd.gradcheck(f, tensors, raise_exception=False, fast_mode=fast_mode))
    except RuntimeError:
        return False


# --- second order and forward mode: rules the order-2 and forward-mode tests and benchmarks/frameworks.py
# share (a torch Function each; the bugs are right at first order) ---------------------------------------

class Cube(torch.autograd.Function):
    """y_i = sum_j x_ij^3 w_j: second derivatives in x, and across x and w."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return (x ** 3 * w).sum(-1)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g[:, None] * 3 * x ** 2 * w, (g[:, None] * x ** 3).sum(0)


class CubeDetachedX(Cube):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g[:, None] * 3 * x.detach() ** 2 * w, (g[:, None] * x ** 3).sum(0)


class CubeWGradNoGrad(Cube):
    """The gradient for w computed under no_grad: right at first order, its derivative along x is lost."""

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        with torch.no_grad():
            gw = (g[:, None] * x ** 3).sum(0)
        return g[:, None] * 3 * x ** 2 * w, gw


class CubeDetachedGradOut(Cube):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.detach()
        return g[:, None] * 3 * x ** 2 * w, (g[:, None] * x ** 3).sum(0)


class SinMul(torch.autograd.Function):
    """y = sin(x) * w, with its forward rule: dy = cos(x) w dx + sin(x) dw."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.save_for_forward(x, w)
        return torch.sin(x) * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * torch.cos(x) * w, g * torch.sin(x)

    @staticmethod
    def jvp(ctx, dx, dw):
        x, w = ctx.saved_tensors
        return torch.cos(x) * w * dx + torch.sin(x) * dw


class SinMulJvpDropsW(SinMul):
    """The forward rule forgets the tangent of w; the backward is right."""

    @staticmethod
    def jvp(ctx, dx, dw):
        x, w = ctx.saved_tensors
        return torch.cos(x) * w * dx


class SinMulJvpSign(SinMul):
    @staticmethod
    def jvp(ctx, dx, dw):
        x, w = ctx.saved_tensors
        return -torch.cos(x) * w * dx + torch.sin(x) * dw

