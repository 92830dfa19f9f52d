"""Numerical differences over an array namespace ``xp``, for one point and for a batch alike (a point is a
batch of one): central differences with their one step selection, Ridders' tableau (also ``gradcli check``'s)
and the step the arithmetic really takes.

Arrays carry the variables before the points: ``x`` is (n, P); a stencil evaluation maps deltas (M, n, P)
(row i moves variable j by deltas[i, j]) to outputs (n_out, M, n, P). The callers say how f is evaluated.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradcli.core.graph import Graph, graph_sweep, walk
from gradcli.core.primitives import PRIMITIVES, NumericOps
from gradcli.methods.quiet import quiet
from gradcli.methods.reverse import local_partials
from gradcli.methods.tableau import ridders, tableau_rows

from gradcli.core.constants import (
    CENTRAL_CANDIDATES, ESTIMATE_GAP, ILL_CONDITIONED, RIDDERS_CON, RIDDERS_H0, RIDDERS_ROWS)

OFFSETS = (1.0, -1.0, 2.0, -2.0, 4.0, -4.0)  # the stencil rows of one candidate: +-h, +-2h, +-4h


@quiet
def representable(x, h):
    """The step the float arithmetic actually takes, so that (x + h) - x == h exactly."""
    return (x + h) - x


@quiet
def candidate_scales(xp, x):
    """Per variable and point, the length scales over which f might vary: powers of ten from
    1e-6*min(|x|, 1) (room to fit beside a domain edge) up to max(|x|, 1) (a relative step for large x)
    -> (n, K, P), largest first."""
    ax = xp.abs(x)
    lo = xp.log10(xp.where(ax > 0, xp.minimum(ax, 1.0), 1.0)) - 6
    hi = xp.log10(xp.maximum(ax, 1.0))
    k = xp.linspace(0.0, 1.0, CENTRAL_CANDIDATES)
    return 10.0 ** (hi[:, None] - (hi - lo)[:, None] * k[None, :, None])


#: A result's absolute rounding in gradual underflow, in units of eps: eps * (|v| + this) bounds the
#: rounding of v whether it is normal, subnormal or flushed to 0.
_UNDERFLOW = float(np.finfo(np.float64).smallest_subnormal / np.finfo(np.float64).eps)


@quiet
def rounding_scale(graph: Graph, inputs: dict, xp=np, n: int | None = None):
    """Per output and point, the sum over the rounded operations that move with the variables of
    |adjoint| x (|value| + the underflow spacing in units of eps): eps/2 times it bounds, to first order,
    how far rounding their results moves the output, so it is the size a difference quotient's
    round-off is relative to, not |f|. At sin(x - 1/8e-11) the output is 0.2 but its argument, -1.25e10,
    is rounded to 2e-6, which no step below that can see through (both ends round to the same argument
    and the quotient reads 0).
    Deterministic, unlike rounding probes, whose signs can cancel along a chain. ``n``: the number of
    points, where no value says it (a constant formula). -> (n_out, P)"""
    ops = NumericOps(xp)
    # numpy scalars, not Python floats: 1/0 is inf to be reported, not a ZeroDivisionError
    inputs = {k: np.float64(v) if isinstance(v, (int, float)) else v for k, v in inputs.items()}
    vals = walk(graph, ops, inputs, keep=True)
    partial = local_partials(graph, vals, ops)
    nodes = graph.nodes
    P = n or max([int(v.size) for v in vals if getattr(v, "ndim", 0)] or [1])
    out = xp.zeros((len(graph.outputs), P))
    for r, o in enumerate(graph.outputs):
        if not graph.active[o]:
            continue
        total = [xp.zeros(P)]

        def seen(i, g, edges):
            if nodes[i].op not in ("var", "const") and not PRIMITIVES[nodes[i].op].exact:
                total[0] = total[0] + xp.abs(g) * (xp.abs(vals[i]) + _UNDERFLOW)
        graph_sweep(graph, r, partial, xp.ones_like(vals[o]), observe=seen)
        out[r] = total[0]
    return out


def probe_patterns(side):
    """The two patterns of one more ulp per operation that the rounding probes use, as functions of the
    node: ``side`` gives each stencil row's sign (+1 for x + h, -1 for x - h). In the first the two ends
    of a stencil are rounded the opposite way (f's own rounding, alike at both ends, then counts
    twice); in the second the same way, which is what shows rounding that changes sign with the slope
    between the ends (at a minimum: Himmelblau's residuals cancel to 0 at the point)."""
    same = abs(side)
    return (lambda i: side * (-1.0) ** i, lambda i: same * (-1.0) ** (i // 2))


@quiet
def central_candidates(xp, x, rows, eps, probe=False, straddle=None, noise_scale=None, bounded=False, which=None):
    """Central differences at steps h, 2h, 4h for every candidate scale, with error estimates.

    ``rows(deltas, signs)`` evaluates the stencil, ``signs`` (None, or ``signs(i)``: +-1 per row for node i)
    rounding every operation one ulp up or down; with ``probe`` two such patterns measure the rounding of
    intermediate values. ``straddle(k, reach)`` -> bool (K, P): does moving variable k by ``reach`` cross a
    kink, jump or pole. ``noise_scale`` (per output, or (n_out, P)) is the size rounding is relative to
    where that is more than |f| (:func:`rounding_scale`); ``bounded`` charges the rounding bound
    eps*|x*f'| instead of probing.
    ``which``: the candidates to try (indices, largest scale first; all by default).
    -> (D1, est, hs, settled): estimates and their errors (K, n_out, n, P), steps (K, n, P), and where
    round-off already outweighs truncation and no smaller step disagrees (K, n_out, n, P): there a smaller
    step can only be worse, since its round-off grows faster than its truncation shrinks."""
    st = _stencil(xp, x, rows, eps, which, noise_scale)
    noise = _round_off(xp, st, rows, probe, bounded)
    d1, d2 = xp.abs(st.D2 - st.D1), xp.abs(st.D4 - st.D2)
    # in the asymptotic range the error falls like h**2, so D(4h)-D(2h) is about 4 times
    # D(2h)-D(h); anything else (a period or a pole within the stencil) voids the estimate
    asymptotic = (d1 <= 2 * noise) | ((d2 >= 2 * d1) & (d2 <= 8 * d1))
    own = xp.where(asymptotic, d1 / 3 + noise, xp.inf)
    own = xp.where(xp.isfinite(own) & xp.isfinite(st.D1), own, xp.inf)
    own = _unresolved(xp, st, own, straddle)
    # no step can be in the h**2 regime when a smaller one is clearly out of it (not merely noisy): at
    # sin(x) at 1e16 or tan(x) next to pi/2 the smallest step float64 allows already spans a period or
    # the pole, and a huge step that looks converged (it spans a near-whole number of periods) is not
    out = ~asymptotic & (d1 > 8 * noise) & xp.isfinite(st.D1)
    smaller_out = xp.flip(xp.cumsum(xp.flip(out, axis=0), axis=0) > 0, axis=0)
    void = xp.zeros_like(out)
    void[:-1] = smaller_out[1:]
    own = xp.where(void, xp.inf, own)
    est = _against_smaller(xp, st.D1, own)
    settled = asymptotic & (d1 / 3 <= 2 * noise) & (est <= own) & xp.isfinite(own)
    return st.D1, est, st.hs, settled


@dataclass(frozen=True)
class _Stencil:
    """What the steps of :func:`central_candidates` share: the candidate steps, f on their stencils and
    the differences there. Arrays are the namespace's (on the device in batch mode)."""

    x: object  # the points (n, P)
    eps: float
    hs: object  # the steps (K, n, P)
    clamped: object  # where the natural step was below one ulp of x, which was taken instead (K, n, P)
    offsets: object  # :data:`OFFSETS` as an array
    Fv: object  # f at x +-h, +-2h, +-4h (K, 6, n_out, n, P)
    D1: object  # the central differences at h (K, n_out, n, P); D2 and D4 at 2h and 4h
    D2: object
    D4: object
    scale: object  # noise_scale as (n_out, P) or (n_out, 1), or None


def _by_candidate(F, K: int, m: int, shape):
    """f over the deltas of K candidates of m rows each, (n_out, K * m, n, P) -> (K, m, n_out, n, P);
    ``shape`` is x's (n, P)."""
    return F.reshape(F.shape[0], K, m, *shape).transpose(1, 2, 0, 3, 4)


def _stencil(xp, x, rows, eps, which, noise_scale) -> _Stencil:
    """The candidate steps, f at +-h, +-2h and +-4h for each, and the central differences there."""
    scales = candidate_scales(xp, x)
    if which is not None:
        scales = scales[:, list(which)]
    K = scales.shape[1]
    n, P = x.shape
    # no step below one ulp of x: it would round to 0 and say nothing, where the smallest step x can take
    # is what shows that f varies faster than any step can follow (sin(x) at 1e150, whose ulp spans
    # 1e133 periods: without it, a step of 6e144 looks converged on a derivative of 1e-146)
    ulp = xp.nextafter(xp.abs(x), xp.inf) - xp.abs(x)
    natural = [eps ** (1 / 3) * scales[:, k] for k in range(K)]
    clamped = xp.stack([h < ulp for h in natural])  # (K, n, P)
    hs = xp.stack([representable(x, xp.maximum(h, ulp)) for h in natural])
    offsets = xp.asarray(OFFSETS, dtype=x.dtype)
    deltas = (offsets[None, :, None, None] * hs[:, None]).reshape(K * len(OFFSETS), n, P)
    Fv = _by_candidate(rows(deltas, None), K, len(OFFSETS), (n, P))
    h = hs[:, None]
    scale = None
    if noise_scale is not None:
        scale = xp.asarray(noise_scale, dtype=x.dtype)
        scale = scale[:, None] if scale.ndim == 1 else scale
    return _Stencil(x=x, eps=eps, hs=hs, clamped=clamped, offsets=offsets, Fv=Fv,
                    D1=(Fv[:, 0] - Fv[:, 1]) / (2 * h), D2=(Fv[:, 2] - Fv[:, 3]) / (4 * h),
                    D4=(Fv[:, 4] - Fv[:, 5]) / (8 * h), scale=scale)


def _round_off(xp, st: _Stencil, rows, probe, bounded):
    """The round-off each difference at h may carry (K, n_out, n, P)."""
    # f's own rounding, plus the rounding of intermediate values as large as x (sin(100*x)
    # at x = 1e4 carries eps*1e6 in its argument), which does not look like noise across nearby steps.
    # The rounding probes (one more ulp per operation) measure it; without them the bound eps*|x*f'|
    # stands in (which would also charge sin(x) at x = 1e15, whose steps are exact)
    eps, Fv, h = st.eps, st.Fv, st.hs[:, None]
    jiggle = _probed(xp, st, rows, probe)
    bound = xp.abs(st.x)[None, None] * xp.abs(st.D1) if bounded else 0.0
    noise = 4 * eps * ((xp.abs(Fv[:, 0]) + xp.abs(Fv[:, 1])) / 2 + bound) / h
    noise = xp.fmax(noise, jiggle)
    if st.scale is not None:  # outputs that cancel carry rounding relative to their terms, not to |f|
        noise = xp.fmax(noise, 8 * eps * st.scale[None, :, None, :] / h)
    return noise


def _probed(xp, st: _Stencil, rows, probe):
    """Four times the largest change of the differences at h under the rounding probes (0 without them)."""
    # the probes need only the rows +-h (evaluation is elementwise: the other rows would not change them)
    K = st.hs.shape[0]
    n, P = st.x.shape
    h = st.hs[:, None]
    inner = (st.offsets[None, :2, None, None] * h).reshape(K * 2, n, P)
    side = xp.tile(xp.sign(st.offsets[:2]), K)
    jiggle = xp.zeros_like(st.D1)
    for pattern in probe_patterns(side) if probe else ():
        Fj = _by_candidate(rows(inner, pattern), K, 2, (n, P))
        jiggle = xp.fmax(jiggle, 4 * xp.abs((Fj[:, 0] - Fj[:, 1]) / (2 * h) - st.D1))
    return jiggle


def _unresolved(xp, st: _Stencil, own, straddle):
    """``own`` with inf where no step resolves f': one ulp of x moves f visibly, or the stencil straddles a
    kink, jump or pole."""
    # where one ulp of x already moves f by a visible share of its size, no difference quotient resolves
    # f': the samples alias (sin(x + k ulp) at 1e150 is a smooth-looking sinusoid in k), so every step,
    # however converged it looks, says nothing
    Fv = st.Fv
    size = (xp.abs(Fv[:, 0]) + xp.abs(Fv[:, 1])) / 2
    if st.scale is not None:
        size = xp.fmax(size, st.scale[None, :, None, :])
    jumpy = st.clamped[:, None] & (xp.abs(Fv[:, 0] - Fv[:, 1]) / 2 > ILL_CONDITIONED * size)
    own = xp.where(jumpy.any(axis=0)[None], xp.inf, own)
    # a stencil that reaches across a kink, jump or pole averages two sides
    for k in range(st.x.shape[0]) if straddle is not None else ():
        hit = straddle(k, 4 * st.hs[:, k])
        own[:, :, k] = xp.where(hit[:, None], xp.inf, own[:, :, k])
    return own


def _against_smaller(xp, D1, own):
    """Each candidate's error estimate: its own error, or its gap to a smaller step where that is larger."""
    # a step is only as good as its agreement with every smaller one, beyond their own error:
    # for abs(x) at x = 1e-160 all steps above 1e-160 agree on 0, and only the smaller ones know
    est = own.copy()
    for k in range(own.shape[0] - 1):
        gap = xp.abs(D1[k] - D1[k + 1:]) - own[k + 1:]
        gap = xp.where(xp.isfinite(gap), gap, 0.0)
        est[k] = xp.maximum(est[k], gap.max(axis=0))
    return est


@quiet
def best_central(xp, D1, est, hs):
    """Per entry, the candidate step with the smallest error estimate -> (J, err, steps, chosen): J and
    err (n_out, n, P), the steps of the candidate best for every output (n, P), the choice per entry."""
    best = xp.argmin(est, axis=0)
    pick = lambda A: xp.take_along_axis(A, best[None], axis=0)[0]
    steps = xp.take_along_axis(hs, xp.argmin(est.max(axis=1), axis=0)[None], axis=0)[0]
    return pick(D1), pick(est), steps, best


#: The first pass tries the natural step (scale max(|x|, 1), the largest candidate) and the smallest one:
#: the gap between them is the cross-check that, in the full search, every smaller candidate gives (a
#: kink, a jump or structure finer than the natural step shows at the smallest one).
FIRST_PASS = (0, CENTRAL_CANDIDATES - 1)


@quiet
def select_central(xp, x, rows_for, eps, probe=False, straddle_for=None, noise_scale=None, bounded=False):
    """The one step selection of central differences, for a point and a batch alike: a first pass over
    :data:`FIRST_PASS`, then the full search of :func:`central_candidates` only for the points where some
    entry is not settled at the natural step (truncation still above round-off, or the smallest step
    disagrees), gathered so that the rest never pay for it. Where every entry is settled the full search
    would pick the natural step too: every other candidate is smaller. ``rows_for(idx)`` and
    ``straddle_for(idx)`` give :func:`central_candidates`' ``rows`` and ``straddle`` over the points
    ``idx`` (None: every point); ``noise_scale`` is per output or (n_out, P).
    -> (D1, est, hs) over every candidate (K, ...) as :func:`central_candidates`; a candidate a point did
    not try has D1 and h nan and estimate inf."""
    kinks = straddle_for or (lambda idx: None)
    D1, est, hs, settled = central_candidates(xp, x, rows_for(None), eps, probe=probe, straddle=kinks(None),
                                              noise_scale=noise_scale, bounded=bounded, which=FIRST_PASS)
    K = CENTRAL_CANDIDATES
    D1_all = xp.full((K,) + D1.shape[1:], xp.nan, dtype=D1.dtype)
    est_all = xp.full((K,) + est.shape[1:], xp.inf, dtype=est.dtype)
    hs_all = xp.full((K,) + hs.shape[1:], xp.nan, dtype=hs.dtype)
    first = list(FIRST_PASS)
    D1_all[first], est_all[first], hs_all[first] = D1, est, hs
    P = x.shape[-1]
    redo = xp.nonzero(~settled[0].reshape(-1, P).all(axis=0))[0]
    if int(redo.shape[0]):
        scale = None if noise_scale is None or xp.ndim(noise_scale) < 2 else noise_scale[:, redo]
        D1r, estr, hsr, _ = central_candidates(xp, x[:, redo], rows_for(redo), eps, probe=probe,
                                               straddle=kinks(redo), bounded=bounded,
                                               noise_scale=noise_scale if scale is None else scale)
        D1_all[..., redo], est_all[..., redo], hs_all[..., redo] = D1r, estr, hsr
    return D1_all, est_all, hs_all


@quiet
def richardson(xp, x, rows, central_J, central_err, central_steps, eps, trace=None, noise_scale=None,
               probe=None, gather=False):
    """Ridders' extrapolation of central differences over steps h0, h0/2, h0/4, ..., h0 a few thousand
    times central's chosen step (where they found f's length scale): each column of the tableau cancels
    one more power of h**2. ``rows(deltas, idx=None)`` as for :func:`central_candidates`, over the points
    ``idx`` (all by default; with ``gather``, the tableau goes on only for the points still unsure, as
    :func:`ridders` does); ``central_*`` their result;
    ``noise_scale`` (n_out, P) the size f's rounding is relative to (:func:`rounding_scale`), where that
    is more than |f|; ``probe(deltas, signs)`` the rows rounded one more ulp per operation, as for
    :func:`central_candidates`' probes. -> (J, err, steps (rows, n, P), h0 (n, P))."""
    h0 = RIDDERS_H0 * central_steps / eps ** (1 / 3)
    hs = [representable(x, h0 / RIDDERS_CON ** k) for k in range(RIDDERS_ROWS)]
    trace = {} if trace is None else trace
    best, err = ridders(tableau_rows(xp, rows, hs), RIDDERS_ROWS, central_J.shape, xp=xp, dtype=x.dtype,
                        trace=trace, gather=gather)
    f0 = xp.abs(rows(xp.zeros((1,) + x.shape, dtype=x.dtype))[:, 0, :1])
    if noise_scale is not None:  # outputs that cancel carry rounding relative to their terms, not to |f|
        f0 = xp.fmax(f0, xp.asarray(noise_scale, dtype=x.dtype)[:, None])
    # the extrapolated value still carries f's rounding: that of the differences at the smallest step
    # the chosen entry used (each of the two evaluations off by eps/2 of f's scale), which the tableau's
    # columns amplify by up to 2.1; four times that, as the scale is a first-order bound
    row = xp.maximum(trace["chosen_row"], 0).astype(x.dtype)
    used = h0[None] / RIDDERS_CON ** row
    err = err + 8 * eps * xp.abs(best) + 4 * eps * f0 / used
    if probe is not None:
        # the rounding the scale cannot see (a stationary point, where f's first-order rounding is 0 at x
        # but not at x +- h; inexact constants), probed at the smallest step any output used
        h = representable(x, used.min(axis=0))
        ends = xp.stack([h, -h])
        F = rows(ends)
        D0 = (F[:, 0] - F[:, 1]) / (2 * h)
        jiggle = xp.zeros_like(err)
        for pattern in probe_patterns(xp.asarray([1.0, -1.0], dtype=x.dtype)):
            Fp = probe(ends, pattern)
            jiggle = xp.fmax(jiggle, 4 * xp.abs((Fp[:, 0] - Fp[:, 1]) / (2 * h) - D0))
        err = err + 2.1 * jiggle  # the columns' amplification, as above
    # cross-check with plain central differences: a gap beyond central's own error bound means the
    # tableau agreed by luck, and the estimate must say so
    # (where central differences have no estimate of their own, their whole gap counts)
    gap = xp.abs(best - central_J) - xp.where(xp.isfinite(central_err), ESTIMATE_GAP * central_err, 0.0)
    err = xp.where(xp.isfinite(gap), xp.maximum(err, gap), err)
    err = xp.where(xp.isfinite(central_err), err, xp.inf)  # no step of central's to start from: nothing to say
    return best, err, xp.stack(hs), h0


@quiet
def complex_step(xp, x, rows, rel, tiny, eps, probe=None):
    """f'(x) = Im f(x + ih) / h: no subtraction in the step, exact to rounding for any small h; valid
    only where every primitive on the path is holomorphic (the caller checks). ``rows(deltas)`` takes
    complex deltas; ``rel`` is the step relative to |x| and ``tiny`` the smallest step. ``probe(deltas,
    signs)`` evaluates the rows with every operation rounded one more ulp (``signs(i)``: +-1 per row for
    node i), as central differences' probes do: the program's own cancellations reach Im f through its
    real parts ((1 - cos(x))/x**2 at 1e-3 loses 4 digits so), and no comparison of steps can see that.
    -> (J, err, h): J is nan where no step of this kind is valid."""
    # three steps: relative to |x| (right for log(x) at tiny x), absolute (keeps f'*h from underflowing
    # at small x, and at large x sees structure on the scale of 1: tan(x) at 1e100 has a period of pi,
    # which a step of 1e80 spans many times over), and 1e-10 times smaller (exposes structure finer
    # than the step). Any of them would do for a well-behaved f, so where they differ, the difference
    # is the error estimate. The first step whose Im part is clear of underflow (above tiny/eps) gives
    # the estimate; the absolute step has no say where it is not small against x (at x = 1e-200 it
    # would measure log near 1e-20*i, not near x).
    ax = xp.abs(x)
    h = xp.where(x == 0, rel, xp.maximum(rel * ax, tiny))
    steps = (h, xp.full_like(h, rel), xp.maximum(h * 1e-10, tiny))
    Fv = rows(1j * xp.stack(steps))
    Im = [xp.imag(Fv[:, k]) for k in range(len(steps))]
    Js = [im / step for im, step in zip(Im, steps)]
    admitted = (True, ((x == 0) | (rel <= 1e-8 * ax))[None], True)
    says = [(xp.abs(im) >= tiny / eps) & xp.isfinite(im) & ok for im, ok in zip(Im, admitted)]
    J = xp.where(says[0], Js[0], xp.where(says[1], Js[1], xp.where(says[2], Js[2], xp.nan)))
    # every admitted step is heard against the estimate, unless the estimate says its Im part would
    # have underflowed: a 0 where f'*h should have been 1e-3 is evidence, a 0 where it is 1e-320 is not.
    # A step whose own Im part is resolved is evidence whatever the estimate says: at x = 1e300 the
    # relative step (1e280) spans many periods of tan, whose value there saturates at i, so the estimate
    # reads 1e-280, and the absolute step's Im part of 3e-20 (f' = 3.02) must not go unheard
    spread = xp.zeros_like(J)
    for Jk, step, ok, resolved in zip(Js, steps, admitted, says):
        heard = xp.isfinite(J) & ((xp.abs(J) * step >= tiny / eps) | resolved) & ok
        spread = xp.maximum(spread, xp.where(heard, xp.abs(Jk - J), 0.0))
    # every step exactly 0: the derivative is 0 to every step's resolution (f' = 0, or none moves f)
    zero = (Im[0] == 0) & (Im[1] == 0) & (Im[2] == 0)
    J = xp.where(zero, 0.0, J)
    if probe is not None:  # twice the largest change under two patterns of one more ulp per operation
        for pattern in probe_patterns(xp.ones(1, dtype=x.dtype)):
            Jp = xp.imag(probe(1j * steps[0][None], pattern)[:, 0]) / steps[0]
            spread = xp.fmax(spread, xp.where(says[0], 2 * xp.abs(Jp - Js[0]), 0.0))
    # below |x| = 1e-280 the relative step would underflow and the floor of 1e-300 is no longer small
    # against x (sqrt(x) at 1e-305): no step of this kind is valid there
    J = xp.where(((x == 0) | (rel * ax >= tiny))[None], J, xp.nan)
    return J, 4 * eps * xp.abs(J) + spread, h


@quiet
def straddles(graph: Graph, inputs: dict, k: int, reach, xp, dtype, N):
    """Per point: does moving variable k by up to +-``reach`` cross a pole, jump or kink of the table
    (a switching function changes sign between the point and either end)? There a difference quotient
    measures an average of two sides, not the derivative: near min(x, 2) in float32 it returns 0.5."""
    name = graph.variables[k]
    # a switch whose arguments do not move with variable k keeps its sign at every level (a division by
    # a constant), and one that is not live at the point (x**2's pole test) cannot flip: neither costs
    # the six evaluations at the levels
    moves = graph.depends_on([name])
    switched = [i for i, node in enumerate(graph.nodes) if node.op in PRIMITIVES and PRIMITIVES[node.op].switch
                and any(moves[a] for j, a in enumerate(node.args) if j in (PRIMITIVES[node.op].switch_reads
                                                                         or range(len(node.args))))]
    hit = xp.zeros(N, dtype=bool)
    if not switched:
        return hit
    # only what the switches read is evaluated (abs(x - 1) needs x - 1, not the rest of the graph)
    roots = sorted({a for i in switched for a in graph.nodes[i].args})
    sub = graph.upstream(roots)
    ops = NumericOps(xp)
    here = dict(zip(roots, walk(sub, ops, inputs)))
    signs = {i: switch_sign(graph, here, i, xp, dtype, (N,)) for i in switched}
    x = inputs[name]
    moved = dict(inputs)
    # both ends at reach, reach/2, reach/4 against the point: a switch that flips twice within the
    # reach (tan of a fast-growing argument) still shows at some level
    moved[name] = xp.stack([x + sign * reach / 2 ** j for j in range(3) for sign in (-1, 1)])  # (6, N)
    vals = dict(zip(roots, walk(sub, ops, moved)))
    for i, s0 in signs.items():
        sw = switch_sign(graph, vals, i, xp, dtype, (6, N))
        hit |= xp.isfinite(s0) & (xp.isfinite(sw) & (sw != s0)).any(axis=0)
    return hit


@quiet
def switch_sign(graph: Graph, vals, i: int, xp, dtype, shape):
    """The sign of node i's switching function over ``vals`` (its arguments' values by node index; NaN
    where the switch is not live)."""
    node = graph.nodes[i]
    args = [xp.broadcast_to(xp.asarray(vals[a], dtype=dtype), shape) for a in node.args]
    return xp.sign(PRIMITIVES[node.op].switch(xp, *args))
