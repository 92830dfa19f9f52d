"""The data behind ``gradcli plot`` and ``gradcli steps``: plain arrays, no plotting library needed.

``plot_data`` samples a function of one variable and its derivative (the compiled value-and-gradient
program, and sympy's derivative turned back into a graph) over a range. Points outside the domain,
and derivatives at kinks, are NaN; a pole, a jump or a kink *between* two samples is a break: that
segment must not be drawn, or the picture would show a steep line where there is none.

``step_data`` is the classic truncation-versus-round-off picture: the error of forward, central and
complex-step differences against the 35-digit symbolic reference as the step shrinks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.engines.backend import execute
from gradcli.engines.program import compile_graph
from gradcli.verdict.diagnose import diagnose_points, output_masks
from gradcli.core.graph import Graph, evaluate, node_values
from gradcli.methods import numeric, symbolic
from gradcli.methods.differences import switch_sign
from gradcli.core.primitives import PRIMITIVES

EPS = float(np.finfo(np.float64).eps)
TINY = float(np.finfo(np.float64).tiny)
DEFAULT_STEPS = np.logspace(-1, -16, 61)

@dataclass
class PlotData:
    """A function of ``variable`` over ``x`` (the other variables ``fixed``): rows are outputs."""

    variable: str
    fixed: dict
    x: np.ndarray  # (n,)
    f: np.ndarray  # (outputs, n); NaN where undefined
    df: np.ndarray  # (outputs, n); d f / d variable, NaN where it does not exist
    symbolic_df: np.ndarray | None = None  # sympy's derivative evaluated on the grid, when available
    derivative_text: list | None = None  # sympy's derivative per output
    f_breaks: list = field(default_factory=list)  # [output] -> indices i: segment (i, i+1) not drawn
    df_breaks: list = field(default_factory=list)
    symbolic_message: str = ""

    def to_dict(self) -> dict:
        scalar = self.f.shape[0] == 1
        rows = lambda A: None if A is None else (_floats(A[0]) if scalar else [_floats(r) for r in A])
        brk = lambda B: B[0] if scalar else B
        doc = {"variable": self.variable, "fixed": dict(self.fixed), "range": [float(self.x[0]), float(self.x[-1])],
               "points": int(self.x.size), "x": _floats(self.x), "f": rows(self.f), "df": rows(self.df),
               "symbolic_df": rows(self.symbolic_df),
               "derivative": (None if self.derivative_text is None
                              else self.derivative_text[0] if scalar else self.derivative_text),
               "breaks": {"f": brk(self.f_breaks), "df": brk(self.df_breaks)},
               "undefined": {"f": int(np.sum(~np.isfinite(self.f))), "df": int(np.sum(~np.isfinite(self.df)))}}
        if self.symbolic_message:
            doc["symbolic_message"] = self.symbolic_message
        return doc


@dataclass
class StepData:
    """Errors of three difference formulas against the reference, one entry per step."""

    variable: str
    point: dict
    steps: np.ndarray
    reference: float
    reference_method: str  # symbolic; complex_step or richardson when sympy is unavailable
    errors: dict  # forward, central, complex_step -> relative errors (None: unavailable)
    chosen_step: float  # the step gradcli's central method chooses for this variable
    chosen_error: float  # the relative error of gradcli's central estimate
    slopes: dict  # method -> {"truncation": slope or None, "roundoff": slope or None}
    optimum: dict  # method -> the textbook optimal step: eps**(1/2), eps**(1/3), times max(|x|, 1)
    output: int = 0
    messages: dict = field(default_factory=dict)  # method or "reference" -> why

    def to_dict(self) -> dict:
        return {"variable": self.variable, "point": dict(self.point), "output": self.output,
                "reference": _float(self.reference), "reference_method": self.reference_method,
                "steps": _floats(self.steps),
                "errors": {k: None if v is None else _floats(v) for k, v in self.errors.items()},
                "chosen": {"method": "central", "step": _float(self.chosen_step),
                           "error": _float(self.chosen_error)},
                "slopes": {k: {b: _float(s) for b, s in v.items()} for k, v in self.slopes.items()},
                "expected_slopes": {"forward": {"truncation": 1, "roundoff": -1},
                                    "central": {"truncation": 2, "roundoff": -1},
                                    "complex_step": {"truncation": 2, "roundoff": None}},
                "optimum": {k: _float(v) for k, v in self.optimum.items()},
                "messages": dict(self.messages)}


def _float(v):
    return float(v) if v is not None and np.isfinite(v) else None


def _floats(a) -> list:
    a = np.asarray(a, dtype=float)
    return [float(v) if np.isfinite(v) else None for v in a.ravel()]


# --- the function and its derivative over a range -------------------------------------------------

def plot_data(graph: Graph, var: str, lo: float, hi: float, fixed: dict, n: int = 400,
              timeout: float | None = 5.0) -> PlotData:
    """Values and derivatives by ``var`` of every output of ``graph`` at ``n`` points from ``lo`` to
    ``hi``, with every other variable at its value in ``fixed``."""
    if var not in graph.variables:
        raise ValueError(f"{var} is not a variable of the expression")
    x = np.linspace(float(lo), float(hi), int(n))
    inputs = {v: x if v == var else np.float64(fixed[v]) for v in graph.variables}
    m, nv, k = len(graph.outputs), len(graph.variables), graph.variables.index(var)
    with np.errstate(all="ignore"):
        R = execute(compile_graph(graph), inputs, engine="numpy")
    f = np.array(R[:m], dtype=float)
    df = np.array(R[m:].reshape(m, nv, -1)[:, k], dtype=float)
    sym, text, msg = _symbolic_on_grid(graph, var, inputs, x.size, timeout)

    bad_f, bad_df, f_breaks, df_breaks = _defects(graph, var, inputs, x.size)
    bad_f |= ~np.isfinite(f)
    bad_df |= bad_f | ~np.isfinite(df)
    f[bad_f] = np.nan
    df[bad_df] = np.nan
    if sym is not None:
        sym[bad_df | ~np.isfinite(sym)] = np.nan
    f_breaks = [_confirm(f[j], f_breaks[j], pole) for j, pole in enumerate(_pole_sets(f_breaks))]
    df_breaks = [_confirm(df[j], df_breaks[j], pole) for j, pole in enumerate(_pole_sets(df_breaks))]
    return PlotData(var, {v: float(fixed[v]) for v in graph.variables if v != var}, x, f, df, sym, text,
                    f_breaks, df_breaks, msg)


def _symbolic_on_grid(graph, var, inputs, n, timeout):
    """sympy's derivative by ``var`` as a graph, evaluated on the grid -> (values or None, text, why)."""
    from gradcli.methods.sym_graph import Unsupported, to_graph  # imports sympy: only where a plot needs it

    res = symbolic.derivatives(graph, timeout)
    if res.status != "ok":
        return None, None, res.message
    k = graph.variables.index(var)
    try:
        with symbolic.time_limit(timeout):
            g = to_graph([row[k] for row in res.derivatives], graph.variables, symbolic.symbols_of(graph))
    except Unsupported as exc:
        return None, [row[k] for row in res.text], f"sympy's derivative uses {exc}, which cannot be sampled"
    except symbolic.SymbolicTimeout:
        return None, [row[k] for row in res.text], f"sympy's derivative could not be compiled within {timeout:g} s"
    with np.errstate(all="ignore"):
        outs = evaluate(g, inputs)
    values = np.stack([np.broadcast_to(np.asarray(o, dtype=float), (n,)) for o in outs]).astype(float)
    return values, [row[k] for row in res.text], ""


def _defects(graph: Graph, var: str, inputs: dict, n: int):
    """Pointwise: where a value is undefined and where the derivative by ``var`` does not exist (the
    one diagnosis, :func:`gradcli.verdict.diagnose.diagnose_points`, over the grid). Between points: which
    segments cross a pole, a jump or a kink. -> (bad_f, bad_df, f_breaks, df_breaks); breaks are per
    output {index: is_pole}."""
    m = len(graph.outputs)
    # the other variables are held fixed: only kinks and partials along ``var`` count
    bad_f, bad_deriv = diagnose_points(graph, inputs, n=n, wrt=[var], overflow=False)
    bad_df = bad_deriv[:, graph.variables.index(var)]
    f_breaks = [dict() for _ in range(m)]
    df_breaks = [dict() for _ in range(m)]
    depends = graph.depends_on([var])
    reaches = output_masks(graph)
    switched = [i for i, node in enumerate(graph.nodes)
                if depends[i] and node.op in PRIMITIVES and PRIMITIVES[node.op].switch is not None]
    if not switched:
        return bad_f, bad_df, f_breaks, df_breaks
    with np.errstate(all="ignore"):
        vals = node_values(graph, inputs)
    for i in switched:
        prim = PRIMITIVES[graph.nodes[i].op]
        with np.errstate(all="ignore"):
            s = switch_sign(graph, vals, i, np, float, (n,))
        cross = np.flatnonzero(np.isfinite(s[:-1]) & np.isfinite(s[1:]) & (s[:-1] != s[1:]))
        for j in (j for j in range(m) if reaches[i] >> j & 1):
            if prim.switch_kind != "kink":
                f_breaks[j].update({int(c): prim.switch_kind == "pole" for c in cross})
            df_breaks[j].update({int(c): prim.switch_kind == "pole" for c in cross})
    return bad_f, bad_df, f_breaks, df_breaks


def _pole_sets(breaks: list) -> list:
    return [{i for i, pole in b.items() if pole} for b in breaks]


def _confirm(y: np.ndarray, candidates: dict, poles: set) -> list:
    """The segments to leave undrawn. A pole always breaks the line. A jump or kink only where the
    line really jumps: its step is well beyond the steps beside it (``sign(x)*x`` and the derivative
    of ``abs(x)**2`` cross a switching point and stay continuous)."""
    out = []
    n = y.size
    for i in sorted(candidates):
        if i in poles:
            out.append(i)
            continue
        if not (np.isfinite(y[i]) and np.isfinite(y[i + 1])):
            continue  # already a gap
        jump = abs(y[i + 1] - y[i])
        beside = [abs(y[a + 1] - y[a]) for a in (i - 1, i + 1) if 0 <= a < n - 1
                  and np.isfinite(y[a]) and np.isfinite(y[a + 1])]
        if jump > 2 * max(beside, default=0.0) + 1e-12 * max(abs(y[i]), abs(y[i + 1])):
            out.append(i)
    return out


# --- error against the step -----------------------------------------------------------------------

def step_data(graph: Graph, point: dict, var: str | None = None, steps=DEFAULT_STEPS, output: int = 0,
              timeout: float | None = 5.0) -> StepData:
    """The relative error |approx - ref| / max(|ref|, tiny) of forward differences (f(x+h) - f(x))/h,
    central differences (f(x+h) - f(x-h))/2h and complex step Im f(x+ih)/h for every step h, against
    the symbolic reference at ``point``; the step gradcli's central method chooses, with its error;
    the fitted slopes of each branch of the V; the textbook optima.

    Raises ValueError where the reference derivative is not a finite number at the point."""
    var = graph.variables[0] if var is None else var
    k = graph.variables.index(var)
    h = np.asarray(steps, dtype=float)
    x0 = float(point[var])
    messages: dict = {}
    ref, ref_method, ref_lo = _reference(graph, point, k, output, messages, timeout)

    def at(x):
        inputs = {v: (x if v == var else np.float64(point[v])) for v in graph.variables}
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(evaluate(graph, inputs)[output]), h.shape)

    err = lambda approx: _rel_error(approx, ref, ref_lo)
    with np.errstate(all="ignore"):
        fp, f0, fm = at(x0 + h), at(np.float64(x0)), at(x0 - h)
        errors = {"forward": err((fp - f0) / h), "central": err((fp - fm) / (2 * h))}
        blockers = numeric.holomorphic_blockers(graph)
        if blockers:
            errors["complex_step"] = None
            messages["complex_step"] = (f"complex step cannot pass through {', '.join(blockers)} "
                                        "(not holomorphic)")
        else:
            errors["complex_step"] = err(np.imag(at(x0 + 1j * h)) / h)
        c = numeric.central(graph, point)
    chosen = float(c.steps[k]) if c.steps is not None else float("nan")
    chosen_err = float(err(np.asarray([c.jacobian[output, k]]))[0]) if c.jacobian is not None else float("nan")
    if c.status != "ok":
        messages["chosen"] = c.message
    slopes = {name: dict(zip(("truncation", "roundoff"), branch_slopes(h, e) if e is not None else (None, None)))
              for name, e in errors.items()}
    scale = max(abs(x0), 1.0)
    optimum = {"forward": EPS ** 0.5 * scale, "central": EPS ** (1 / 3) * scale}
    return StepData(var, {v: float(point[v]) for v in graph.variables}, h, ref, ref_method, errors, chosen,
                    chosen_err, slopes, optimum, output, messages)


def _reference(graph, point, k, output, messages, timeout):
    """The reference derivative as a double-double (hi, lo), so that errors below 1e-16 still show:
    sympy's 35 digits; where sympy is unavailable, complex step (or Richardson), said in messages."""
    sym = symbolic.symbolic(graph, point, timeout=timeout)
    if sym.status == "ok":
        v = sym.values[output][k]
        hi = float(v)
        return hi, "symbolic", float(v - hi)
    if sym.status == "undefined":
        raise ValueError(sym.message)
    messages["reference"] = sym.message
    for name, method in (("complex_step", numeric.complex_step), ("richardson", numeric.richardson)):
        res = method(graph, point)
        if res.status == "ok" and np.isfinite(res.jacobian[output, k]):
            return float(res.jacobian[output, k]), name, 0.0
    raise ValueError(f"no reference derivative: {sym.message}")


def _rel_error(approx, hi: float, lo: float) -> np.ndarray:
    approx = np.asarray(approx, dtype=float)
    # (approx - hi) is exact when the two are close (Sterbenz): the reference's low part then counts
    return np.abs((approx - hi) - lo) / max(abs(hi), TINY)


def branch_slopes(h, err) -> tuple:
    """Slopes of log10(err) against log10(h) on both sides of the V -> (truncation, roundoff).

    The clean part of a branch lies between 100 times the bottom of the V and 10% relative error:
    nearer the bottom both errors mix, and above 10% the formula has lost every digit (x + h == x) or
    left the asymptotic range. Each slope is the Theil-Sen estimate (the median of the slopes between
    pairs of points at least a decade apart), so an unlucky rounding here and there moves it
    little. None where a branch has fewer than three clean points."""
    h, err = np.asarray(h, dtype=float), np.asarray(err, dtype=float)
    ok = np.isfinite(err) & (err > 0) & (h > 0)
    if ok.sum() < 3:
        return None, None
    L, E = np.log10(h[ok]), np.log10(err[ok])
    order = np.argsort(L)
    L, E = L[order], E[order]
    # round-off is noisy (a factor of 10 from one step to the next): choose the clean part on a running
    # median, since choosing on the raw errors would keep the lucky low ones at one end and the unlucky
    # high ones at the other, and flatten the slope
    smooth = np.array([np.median(E[max(0, i - 3):i + 4]) for i in range(E.size)])
    bottom = int(np.argmin(smooth))
    clean = (smooth > smooth[bottom] + 2) & (smooth < -1)
    right = clean & (L > L[bottom])
    left = clean & (L < L[bottom])
    return _theil_sen(L[right], E[right]), _theil_sen(L[left], E[left])


def _theil_sen(L, E):
    if L.size < 3:
        return None
    i, j = np.triu_indices(L.size, 1)
    dL = L[j] - L[i]
    far = np.abs(dL) >= 1.0
    if far.sum() >= 3:
        i, j, dL = i[far], j[far], dL[far]
    return float(np.median((E[j] - E[i]) / dL))


def segments(x: np.ndarray, y: np.ndarray, breaks=()) -> list:
    """The pieces of a line to draw: runs of finite values, also cut after every index in ``breaks``
    (a pole or a jump between two samples) -> [(xs, ys), ...]."""
    ok = np.isfinite(y)
    cut = np.zeros(y.size, dtype=bool)  # cut[i]: a new piece starts at i
    cut[0] = True
    cut[1:] = ~ok[:-1]
    for i in breaks:
        if 0 <= i < y.size - 1:
            cut[i + 1] = True
    starts = np.flatnonzero(cut & ok)
    pieces = []
    for s in starts:
        e = s
        while e + 1 < y.size and ok[e + 1] and not cut[e + 1]:
            e += 1
        pieces.append((x[s:e + 1], y[s:e + 1]))
    return pieces
