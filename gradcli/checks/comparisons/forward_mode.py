"""Forward mode of a framework target with a forward rule (a torch Function's ``jvp``, a ``jax.custom_jvp``):
the framework's J u along seeded random tangents u against J u by directional finite differences of f in
float64, as gradcheck(check_forward_ad=True) and check_grads(modes=["fwd"]) do.

A framework target offers it as ``vjp.framework_jvp(u, **inputs) -> J u`` (u: one array per wrt input,
in the dtype under test), with ``.label`` naming it in messages ("torch's jvp"). Reverse mode says
nothing about a ``jvp`` rule: a Function's backward is what first order checks, so a wrong ``jvp``
passes there; for a ``custom_jvp`` first order checks JAX's transpose of the rule, which drops a
tangent term that transposes to 0 (an output tangent that does not depend on the input tangent).
"""
from __future__ import annotations

import numpy as np

from gradcli.checks.comparisons import numeric as num
from gradcli.checks.comparisons import subgradient
from gradcli.checks.comparisons.judging import judge, zero_of_directions
from gradcli.checks.context import DIRECTIONS, CheckContext, Outcome, Verdict, array_dtype, badness, index_text, \
    summarize
from gradcli.checks.comparisons.findings import max_errors, worst_entries
from gradcli.checks.result import Mismatch
from gradcli.checks.comparisons.under_test import raised


def framework_jvp(ctx: CheckContext):
    """The framework's own jvp of the target, where it has a forward rule, else None."""
    return getattr(ctx.user_vjp, "framework_jvp", None)


def check_forward_mode(ctx: CheckContext) -> Outcome | None:
    """J u from the framework's forward rule against J u by differences -> Outcome (None: no forward rule)."""
    jvp = framework_jvp(ctx)
    if jvp is None:
        return None
    label = getattr(jvp, "label", "the framework's jvp")
    name = getattr(jvp, "method", "framework_jvp")
    rng = np.random.default_rng([ctx.seed, 29])
    us = num.random_directions(ctx.numf, DIRECTIONS, rng)
    sigma = num.noise_level(ctx.numf, ctx.f0, np.random.default_rng([ctx.seed, 31]))
    ests = [num.directional(ctx.numf, ctx.f0, u, ctx.step, ctx.rtol / 10, sigma=sigma) for u in us]
    ref = np.stack([e.value for e in ests])
    err = np.stack([np.where(e.kink, np.inf, e.error) for e in ests])
    dtype = array_dtype(ctx.dtype)
    got = []
    for u in us:
        try:
            ju = jvp({k: np.array(u[k], dtype=dtype) for k in ctx.wrt}, **ctx.fresh_inputs())
        except Exception as exc:  # noqa: BLE001 - the forward rule under test raised: a failure
            return Outcome(verdict=raised("fail", f"forward mode ({label})", exc), stop=True)
        ju = np.asarray(ju, dtype=np.float64).ravel()
        if ju.size != ctx.m:
            return Outcome(verdict=Verdict("fail", f"forward mode ({label}) gives a tangent of {ju.size} entries "
                                                   f"for an output of shape {ctx.out_shape}"), stop=True)
        got.append(ju)
    got = np.stack(got)
    # a tangent that crosses a kink: the rule's value is judged as a subgradient (gradcli.checks.comparisons.subgradient)
    kinked = [a for a, e in enumerate(ests) if e.kink.any()]
    for a in kinked:
        ref[a], err[a] = subgradient.nearest_one_sided(ctx, us[a], got[a])
    finite = np.abs(ref[np.isfinite(ref)])
    # one scale for every entry: J u's entries that cancel to near 0 are held to the size of the rest
    typical = np.full(ref.shape, float(np.median(finite)) if finite.size else 0.0)
    diff, tol, bad, und, live = judge(ctx, got, ref, err, typical, zero_of_directions(ctx, ref.shape))
    summary = f"{DIRECTIONS} random tangents against directional differences"
    if bad.any():
        score = badness(diff, tol, bad)
        picks = [np.unravel_index(i, bad.shape) for i in worst_entries(score, np.zeros((1, ctx.m), dtype=int))]
        found = tuple(_mismatch(ctx, int(j), int(i), ref[j, i], got[j, i]) for j, i in picks)
        m = found[0]
        at = f" at output {index_text(m.output_index)}" if m.output_index else ""
        message = (f"forward mode ({label}) disagrees with finite differences along random tangent {m.direction}"
                   f"{at}: J u is {m.expected:.8g} by differences of f, {label} gives {m.got:.8g} (rel error "
                   f"{m.rel_error:.2g}); {int(bad.sum())} of {bad.size} entries ({DIRECTIONS} tangents × "
                   f"{ctx.m} outputs) disagree: the forward rule is wrong (reverse mode passed)")
        return Outcome(verdict=Verdict("fail", message), mismatches=found, stop=True,
                       errors=max_errors(diff, ref, live),
                       methods=((name, summarize(name, "mismatch", diff, message=summary)),))
    methods = ((name, summarize(name, "ok", diff, message=summary)),)
    if und.any():
        return Outcome(verdict=Verdict("inconclusive", (
            f"first order passed; forward mode ({label}) cannot be decided: the error estimates of the "
            "directional differences are too large for the tolerance; try another point (seed=) or a larger "
            "step (eps=)")), methods=methods, stop=True)
    at_kink = (f" ({len(kinked)} crossing a kink, where it gives a value between the one-sided derivatives)"
               if kinked else "")
    return Outcome(methods=methods,
                   suffix=f"; forward mode: {label} agrees along {DIRECTIONS} random tangents{at_kink}")


def _mismatch(ctx: CheckContext, j: int, i: int, expected, got) -> Mismatch:
    abs_err = abs(float(got) - float(expected))
    rel = abs_err / abs(float(expected)) if expected != 0 else (0.0 if abs_err == 0 else float("inf"))
    at = ctx.out_index(i)
    return Mismatch("J u", at, float(expected), float(got), abs_err, rel, output_index=at, direction=j)
