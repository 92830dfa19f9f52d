"""The gradient under test as a function of the inputs, the field that order 2 differentiates: its value
at moved inputs (the hand-written gradient or vjp, or traced AD afresh), its directional derivatives by
differences, and the Hessian-vector products under test (a registered hvp, the framework's own
derivative of its vjp, or differences of the field). Read by gradcli.checks.comparisons.second_order
and the runner's order-2 Taylor test."""
from __future__ import annotations


import numpy as np

from gradcli import trace as tracing
from gradcli.checks.comparisons import numeric as num
from gradcli.checks.context import CheckContext, Verdict, array_dtype
from gradcli.core.constants import CHECK_ESTIMATE_SAFETY
from gradcli.checks.comparisons.under_test import raised, user_hvp


def flat_of(ctx, res) -> np.ndarray:
    wrt = ctx.wrt
    if isinstance(res, dict):
        items = [res[k] for k in wrt]
    elif isinstance(res, (tuple, list)) and (len(wrt) > 1 or (len(res) == 1
                                                              and np.shape(res[0]) == ctx.shapes[wrt[0]])):
        items = list(res)
    else:
        items = [res]
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in items])


def gradient_field(ctx: CheckContext, inputs: dict, w: np.ndarray) -> np.ndarray:
    """The gradient under test of <w, f> at ``inputs`` (float64), flat; raises what the user's code raises
    (the finite differences take that as a step outside the domain)."""
    if ctx.autodiff:
        return ad_field(ctx, inputs, w)
    kw = {k: np.array(v) for k, v in inputs.items()}
    if ctx.with_grad:
        return flat_of(ctx, ctx.fn(**kw)[1]) * float(w[0])
    if ctx.scalar and ctx.vjp is None:
        return flat_of(ctx, ctx.spec.grad(**kw)) * float(w[0])
    # a framework's vjp runs in the dtype under test; its float64 run is the function differentiated here
    vjp = getattr(ctx.vjp, "float64", ctx.vjp)
    return flat_of(ctx, vjp(w.reshape(ctx.out_shape), **kw))


def ad_field(ctx: CheckContext, inputs: dict, w: np.ndarray) -> np.ndarray:
    """gradcli's AD gradient of <w, f> at ``inputs``, traced afresh."""
    if ctx.ad_factory is not None:
        t = ctx.ad_factory(inputs, list(ctx.wrt))
    else:
        t = tracing.trace(ctx.fn, {k: np.array(v) for k, v in inputs.items()}, list(ctx.wrt),
                  0 if ctx.with_grad else ctx.output)
    return ctx.flat(t.vjp(w.reshape(np.shape(t.value))))


def field_function(ctx, field, w):
    return num.Function(lambda inputs, complex_ok=False: field(ctx, inputs, w), ctx.base, list(ctx.wrt))


def derivatives_along(ctx, fn, dirs):
    """d/dt field(x + t v) for each v -> (values (K, n), errors (K, n), kink (K, n), field at x (n,)) or None."""
    g0 = fn.at({})
    if g0 is None or g0.size != ctx.n or not np.all(np.isfinite(g0)):
        return None
    # the field's own noise enters its differences' errors and their kink test, as f's does at first order:
    # a backward whose additions vary between runs (nondet_tol) would otherwise look like a kink. Its largest
    # over the elements: the noise is the backward's, and 7 samples per element measure it only roughly
    sigma = np.max(num.noise_level(fn, g0, np.random.default_rng([ctx.seed, 41])), initial=0.0)
    ests = [num.directional(fn, g0, v, ctx.step, ctx.rtol / 10, sigma=sigma) for v in dirs]
    return (np.stack([e.value for e in ests]), np.stack([e.error for e in ests]),
            np.stack([e.kink for e in ests]), g0)


def zero_within_error(ref, err) -> bool:
    """Every entry of ``ref`` is 0 to its own error estimate (or not finite)."""
    return bool(np.all(~np.isfinite(ref) | (np.abs(ref) <= CHECK_ESTIMATE_SAFETY * err)))


def hv_under_test(ctx: CheckContext):
    """hv(v, w) -> (Hv, error) | Verdict: the registered hvp, else directional differences of the gradient
    under test."""
    if ctx.spec.hvp is not None and ctx.scalar:
        def hv(v, w):
            out = user_hvp(ctx, v)
            return out if isinstance(out, Verdict) else (out, np.zeros_like(out))
        return hv

    if ctx.framework_hvp is not None:
        def framework_hv(v, w):
            products = framework_products(ctx, [v], w)
            if isinstance(products, Verdict):  # torch cannot differentiate the backward: the differences can
                return hv(v, w)
            return products[0][0], np.zeros(ctx.n)
        return framework_hv

    def hv(v, w):
        field = field_function(ctx, gradient_field, w)
        est = num.directional(field, field.at({}), v, ctx.step, ctx.rtol / 10)
        return est.value, est.error
    return hv


#: the framework's own derivative of its vjp: (method name, what it is called in messages)
FRAMEWORK_HVP = {"torch": ("double_backward", "torch's double backward"),
                 "jax": ("vjp_of_vjp", "JAX's vjp of its vjp")}


def framework_label(ctx) -> tuple:
    return FRAMEWORK_HVP.get(ctx.spec.options.get("framework"),
                             ("framework_hvp", "the framework's derivative of its vjp"))


def framework_products(ctx: CheckContext, dirs: list, w: np.ndarray):
    """The framework's own H_w v (K, n) and J v (K, m) for each direction, in the dtype under test | Verdict."""
    dtype = array_dtype(ctx.dtype)
    hvs, jvs = [], []
    for v in dirs:
        try:
            res = ctx.framework_hvp({k: np.array(v[k], dtype=dtype) for k in ctx.wrt}, np.array(w, dtype=dtype),
                                    **ctx.fresh_inputs())
        except Exception as exc:  # noqa: BLE001 - the code under test raised: a failure
            return raised("fail", framework_label(ctx)[1], exc)
        if isinstance(res, Verdict):
            return res
        hvs.append(ctx.flat(res[0]))
        jvs.append(np.asarray(res[1], dtype=np.float64).ravel())
    return np.stack(hvs), np.stack(jvs)
