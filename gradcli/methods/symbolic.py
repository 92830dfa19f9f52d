"""The symbolic reference: the graph rebuilt as a sympy expression, differentiated by sympy's own
rules (never by gradcli's partials) and evaluated to 35 significant digits.

Symbols are real, so ``abs`` differentiates to ``sign`` rather than to a complex expression. The
point is the exact binary value of the float the other methods used, so the reference measures the
methods' error and nothing else; constants keep the exact decimal the user wrote (0.1 is 1/10).
"""
from __future__ import annotations

import importlib
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from gradcli.core.graph import Graph
from gradcli.core.primitives import PRIMITIVES, sympy_constant

DIGITS = 35
DEFAULT_TIMEOUT = 5.0


def load_sympy():
    """sympy, imported on first need: it takes most of a second to import, and a run that asks for no
    symbolic result (``--method forward,reverse``, ``--help``) should not pay for it."""
    return importlib.import_module("sympy")


class SymbolicTimeout(Exception):
    pass


class NoExactValue(ValueError):
    """A constant of the graph has no exact value sympy could use (see ``Const.exact``)."""


@contextmanager
def time_limit(seconds: float | None):
    """Interrupt sympy after ``seconds`` (SIGALRM: only possible in the main thread; elsewhere no limit)."""
    usable = seconds and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise SymbolicTimeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class SymbolicResult:
    status: str  # ok | undefined | unavailable
    message: str = ""
    derivatives: list = field(default_factory=list)  # [output][variable] sympy expressions
    values: list = field(default_factory=list)  # [output][variable] sympy Floats (None: undefined)
    text: list = field(default_factory=list)  # [output][variable] strings
    function_values: list = field(default_factory=list)


def symbols_of(graph: Graph) -> dict:
    sympy = load_sympy()
    return {name: sympy.Symbol(name, real=True) for name in graph.variables}


class _Terms(list):
    """The summands of an add/sub chain not yet handed to sympy: sympy.Add(a, b) flattens ``a`` every
    time, so building a 20,000-term sum pairwise is quadratic; one Add(*terms) at the end is not."""


def to_sympy(graph: Graph, symbols: dict | None = None) -> list:
    """The outputs of ``graph`` as sympy expressions (a loop over the nodes, no recursion)."""
    sympy = load_sympy()
    symbols = symbols or symbols_of(graph)
    users = graph.uses()
    exprs: list = []

    def value(i):
        e = exprs[i]
        if isinstance(e, _Terms):
            exprs[i] = e = sympy.Add(*e)
        return e

    for i, node in enumerate(graph.nodes):
        if node.op == "var":
            exprs.append(symbols[node.attr])
        elif node.op == "const":
            exact = node.attr.exact()
            if exact is None:
                raise NoExactValue(node.attr.inexact_reason())
            exprs.append(sympy_constant(exact) if isinstance(exact, str)
                         else sympy.Rational(exact.numerator, exact.denominator))
        elif node.op in ("add", "sub"):
            a, b = node.args
            # extend the left chain in place when this node is its only user
            terms = exprs[a] if isinstance(exprs[a], _Terms) and users[a] == 1 else _Terms([value(a)])
            terms.append(value(b) if node.op == "add" else -value(b))
            exprs.append(terms)
        else:
            exprs.append(PRIMITIVES[node.op].sympy(*(value(a) for a in node.args)))
    return [value(o) for o in graph.outputs]


def tidy(d):
    """A sympy derivative without its DiracDelta terms."""
    # d/dx sign(x) is 2*DiracDelta(x): zero wherever the derivative exists (kinks are reported apart)
    sympy = load_sympy()
    return d.replace(sympy.DiracDelta, lambda *a: sympy.S.Zero)


def second_derivatives(ds: list, xs: list) -> list:
    """sympy's Hessian from the first derivatives ``ds`` by the symbols ``xs``: d/dx_j of d/dx_i for
    j >= i, mirrored (sympy.hessian's order), each :func:`tidy`."""
    sympy = load_sympy()
    n = len(xs)
    H = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            H[i][j] = H[j][i] = tidy(sympy.diff(ds[i], xs[j]))
    return H


#: evalf's working-precision ceilings (digits), tried in turn until the result is certified to the
#: digits asked for: 1 - tanh(300)**2 cancels 260 digits, beyond sympy's default of 100
MAX_DIGITS = (100, 1000, 4000)


def _evalf(expr, digits, subs):
    sympy = load_sympy()
    from_evalf = sympy.core.evalf
    try:
        # a pole that sits on an exact constant (tan(pi*x) at x = 1/2) is a finite, confident-looking
        # number to evalf, whose pi has finitely many digits; exact substitution sees it
        exact = expr.xreplace(subs)
        if exact.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            return None
        for maxn in MAX_DIGITS:
            try:
                return _number(expr.evalf(n=digits, subs=subs, maxn=maxn, strict=True))
            except from_evalf.PrecisionExhausted:
                continue
        # no precision certifies it: an exact zero (sin(pi*x) at x = 1) or a value that hides one
        if exact.is_zero:
            return sympy.Float(0, DIGITS)
        return _number(exact.evalf(n=digits, maxn=MAX_DIGITS[-1]))
    except ArithmeticError:  # mpmath divides by zero where the expression has a pole
        return None


def _number(v):
    """A finite real sympy Float, or None for zoo/nan/complex results."""
    sympy = load_sympy()
    if v is None or not v.is_Number or v.is_infinite or v is sympy.nan or v.has(sympy.I):
        return None
    if v.is_Float and v._prec < 16:
        # evalf's mark for a cancellation it could not resolve within ~500 bits ("0.e-153"): a zero
        return sympy.Float(0, DIGITS)
    return sympy.Float(v, DIGITS) if v.is_finite else None


def failure(exc: BaseException, timeout, doing: str = "differentiate this expression") -> str:
    """Why sympy gave no result, for the method's message: its time limit, its recursion, a constant
    with no exact value, or one of its own internal errors (which are sympy's to fix, not the user's)."""
    if isinstance(exc, SymbolicTimeout):
        return f"sympy did not finish within {timeout:g} s"
    if isinstance(exc, (RecursionError, MemoryError)):
        return "the expression is too deep for sympy"
    if isinstance(exc, NoExactValue):
        return str(exc)
    try:  # sympy's messages may be objects of its own, whose str() can fail too
        text = str(exc).splitlines()[0][:200] if str(exc) else ""
    except Exception:
        text = ""
    if isinstance(exc, (TypeError, ValueError, ArithmeticError)):  # e.g. Min of a complex constant
        return f"sympy cannot {doing} ({text or type(exc).__name__})"
    return f"sympy failed to {doing}, an error inside sympy ({type(exc).__name__}{': ' + text if text else ''})"


def derivatives(graph: Graph, timeout: float | None = DEFAULT_TIMEOUT) -> SymbolicResult:
    """sympy's derivative of every output by every variable, as expressions and strings."""
    sympy = load_sympy()
    syms = symbols_of(graph)
    try:
        with time_limit(timeout):
            outs = to_sympy(graph, syms)
            ds = [[tidy(sympy.diff(f, syms[v])) for v in graph.variables] for f in outs]
            text = [[sympy.sstr(d) for d in row] for row in ds]
    except Exception as exc:  # the time limit, and sympy's own internal failures (an AttributeError...)
        return SymbolicResult("unavailable", failure(exc, timeout))
    res = SymbolicResult("ok", derivatives=ds, text=text)
    res.function_values = outs
    return res


def remaining(timeout: float | None, started: float) -> float | None:
    """What is left of ``timeout`` seconds (None or 0: no limit) since ``time.monotonic()`` was
    ``started``: one limit for the whole symbolic method, not one per phase. Never 0, which would
    mean no limit."""
    if not timeout:
        return timeout
    return max(timeout - (time.monotonic() - started), 1e-3)


def evaluate_at(graph: Graph, point: dict, exprs: list, timeout, digits: int, what: str, limit=None):
    """Nested lists of sympy expressions evaluated at the exact binary ``point`` to ``digits`` digits,
    under the time limit (``limit`` seconds if given, what is left of ``timeout``; ``timeout`` names
    it in the message) -> (the same nesting of Floats (None: not a finite real), "") or (None-filled
    nesting, why sympy could not)."""
    sympy = load_sympy()
    syms = symbols_of(graph)
    subs = {syms[v]: sympy.Rational(float(point[v])) for v in graph.variables}

    def walk(e):
        return [walk(x) for x in e] if isinstance(e, list) else _evalf(e, digits, subs)

    try:
        with time_limit(timeout if limit is None else limit):
            return [walk(e) for e in exprs], ""
    except SymbolicTimeout:
        why = f"sympy could not evaluate within {timeout:g} s"
    except Exception as exc:  # sympy's own failures inside evalf (an AttributeError of its cache...)
        why = failure(exc, timeout, f"evaluate {what}")
    return [None] * len(exprs), why


def symbolic(graph: Graph, point: dict, timeout: float | None = DEFAULT_TIMEOUT,
             digits: int = DIGITS) -> SymbolicResult:
    """Symbolic derivatives evaluated at ``point`` to ``digits`` significant digits, all within ``timeout``."""
    started = time.monotonic()
    res = derivatives(graph, timeout)
    if res.status != "ok":
        return res
    evaluated, failed = evaluate_at(graph, point, [res.derivatives, res.function_values], timeout, digits,
                                    "the derivative", limit=remaining(timeout, started))
    if failed:
        return SymbolicResult("unavailable", failed, derivatives=res.derivatives, text=res.text)
    res.values, res.function_values = evaluated
    if any(v is None for row in res.values for v in row):
        res.status = "undefined"
        res.message = "the symbolic derivative is not a finite real number at this point"
    return res
