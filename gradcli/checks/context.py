"""What a check's comparisons share: the frozen context built once per check, the outcomes they return,
the named constants and the element bookkeeping (flat column -> input name and index).

The runner (gradcli.checks.runner) builds a :class:`CheckContext` once, after calling the function at
the inputs; the comparison modules (compare, second_order, taylor) read it and return :class:`Outcome`
values; only the runner writes them onto the CheckResult. Nothing here calls user code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from gradcli.checks.result import MethodSummary, Mismatch

#: The unit of rounding (machine epsilon) of each dtype a check may run in; bfloat16 has no numpy dtype.
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
#: The smallest normal number of each dtype: below it a value keeps fewer digits, then flushes to 0.
TINY = {"float64": 2.0 ** -1022, "float32": 2.0 ** -126, "float16": 2.0 ** -14, "bfloat16": 2.0 ** -126}
#: Default relative tolerance by the dtype under test; ``rtol``/``atol`` options replace it. Below float64
#: it is about sqrt(EPS): a correct rule computed in the dtype is off by a few EPS per operation, far
#: below it, and a real bug (a cancellation, a wrong term) by far more. float64's is set by the
#: finite-difference reference, which is good to about 1e-8 relative, not by float64's rounding.
RTOL = {"float64": 1e-6, "float32": 2e-4, "float16": 2e-2, "bfloat16": 6e-2}


def coarsest(*names: str) -> str:
    """The dtype among ``names`` with the coarsest rounding."""
    return max(names, key=EPS.__getitem__)


def array_dtype(name: str) -> str:
    """The numpy dtype that holds values of the dtype ``name`` exactly."""
    return "float32" if name == "bfloat16" else name
FLOOR_ULPS = 10.0
AUTO_FULL_MAX = 10_000  # auto mode: full while the Jacobian has at most this many entries
NUMERIC_CAP = 2000  # full mode with AD: finite differences on a sample above this many elements
SAMPLE = 200
DIRECTIONS = 4
#: Every cotangent v a vjp under test is given is c v, and what it returns is divided by c: with a scalar
#: output's cotangent 1 (and full mode's e_j) alone, a backward that ignores its cotangent would pass. A
#: power of two, so that dividing it out is exact in every dtype; negative, so that a rule that loses the
#: cotangent's sign shows too (gradcli.checks.comparisons.under_test.user_vjp_at).
COTANGENT_SCALE = -2.0
MAX_MISMATCHES = 10
#: The coarsest Taylor-test resolution (relative error in <g, v> that would still show) at which an
#: inconclusive check may be called a pass: coarser than this, a 1e-3 bug could hide.
TAYLOR_RESOLUTION = 1e-3


#: Said of a check whose output the trace finds piecewise constant, once the finite differences agree.
CONSTANT_NOTE = ("the output is piecewise constant in the inputs (it reaches them only through operations such as "
                 "floor, sign or comparisons): its derivative is 0 wherever it exists, as traced")
#: Said when the trace finds the output constant but the finite differences see it move.
UNSEEN_NOTE = ("the trace finds no differentiable route from the inputs to the output, but the finite differences "
               "see the output move: the code reads the inputs in a way the tracer does not follow (x.flat, "
               "x.data?)")


@dataclass(frozen=True)
class Verdict:
    """A status with its message, as a comparison (or a call of the code under test) decided it."""

    status: str
    message: str
    traceback: str = ""  # the user's own frames, when the code under test raised


@dataclass(frozen=True)
class Outcome:
    """What one comparison found; the runner applies it to the CheckResult in this order: notes and
    methods added, the fields that are not None replaced, then ``suffix`` appended to the message."""

    verdict: Verdict | None = None  # None: no status decided here
    methods: tuple = ()  # (name, MethodSummary) pairs, in the order they were decided
    notes: tuple = ()
    reference: str | None = None
    mismatches: tuple | None = None
    errors: tuple | None = None  # (max_abs_error, max_rel_error)
    suffix: str = ""  # appended to the message (a pass that the next comparison extends)
    second_order: dict | None = None
    precision: tuple | None = None  # below float64: (digits, underflow) by input (findings.precision_by_input)
    taylor2: Any = None
    stop: bool = False  # the check ends here: nothing after this comparison runs
    kernel: tuple | None = None  # a kernel check's compared quantities (gradcli.checks.kernels.criterion.Quantity)


@dataclass(frozen=True)
class CheckContext:
    """One check, ready to compare: the spec, its arrays, its options and tolerances, resolved once."""

    spec: Any
    kind: str  # grad | vjp | autodiff | expression (as reported)
    dtype: str  # the dtype under test
    rtol: float
    atol: float
    step: float  # the finite differences' relative step (``eps``)
    seed: int
    order: int
    mode: str  # full | fast
    taylor: bool  # the Taylor test was asked for
    with_grad: bool
    output: int | None
    fn: Callable  # the function under test, called with keywords
    user_vjp: Callable | None  # the vjp of a string check's grad= expressions
    ad_factory: Callable | None  # string checks: gradcli's AD of the expression
    autodiff: bool  # no hand-written gradient: gradcli's AD is what is under test
    inputs: dict  # name -> array in the dtype under test
    base: dict  # name -> the same in float64 (the reference works in float64)
    wrt: tuple
    shapes: dict  # wrt name -> shape
    offsets: np.ndarray  # flat column offsets of the wrt inputs (length len(wrt) + 1)
    out_shape: tuple
    f0: np.ndarray  # the float64 output at the inputs, flat
    user_grads: Any  # with_grad: the gradients the function returned beside its value
    numf: Any  # gradcli.checks.comparisons.numeric.Function over the float64 inputs
    ad: Any  # the traced AD (or the expression's), None where not usable
    setup_notes: tuple = ()  # notes made while the context was built
    #: the trace proves the output piecewise constant in the wrt inputs (it reaches them only through
    #: constant routes: floor, sign, comparisons): its derivative is exactly 0 wherever it exists
    constant: bool = False
    #: framework checks: framework_hvp(v, w, **inputs) -> ({name: H_w v}, J v) | Verdict, the framework's own
    #: derivative of its vjp (torch's double backward): H_w v along v, and along the cotangent w
    framework_hvp: Callable | None = None
    #: what a comparison measured once for the whole check and shares (the scale of an exact zero)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def n(self) -> int:
        return int(self.offsets[-1])

    @property
    def m(self) -> int:
        return int(np.prod(self.out_shape, dtype=np.int64))

    @property
    def scalar(self) -> bool:
        return self.m == 1

    @property
    def vjp(self) -> Callable | None:
        """The vector-Jacobian product under test, if any."""
        return self.user_vjp or self.spec.vjp

    def call(self, inputs: dict, complex_ok: bool = False):
        """The differentiated output of the function at ``inputs`` (fresh copies: f may write to them)."""
        return call_selected(self.fn, inputs, self.with_grad, self.output)

    @property
    def ad_method(self) -> str:
        """The AD reference's name in reports: gradcli's trace, or a framework's AD of the primal."""
        return getattr(self.ad, "method", "traced_reverse")

    @property
    def ad_label(self) -> str:
        return getattr(self.ad, "label", "traced AD")

    def fresh_inputs(self) -> dict:
        return {k: np.array(v) for k, v in self.inputs.items()}

    # --- flat bookkeeping: columns run over the wrt inputs, each flattened, in order ---------------
    def flat(self, d: dict) -> np.ndarray:
        return np.concatenate([np.asarray(d[k], dtype=np.float64).ravel() for k in self.wrt])

    def input_of(self, cols) -> np.ndarray:
        """The wrt position of each flat column index."""
        return np.searchsorted(self.offsets[1:], np.asarray(cols), side="right")

    def label(self, c: int) -> tuple:
        """Flat column index -> (input name, flat index inside that input)."""
        k = int(self.input_of(c))
        return self.wrt[k], int(c - self.offsets[k])

    def unflat_index(self, c: int):
        name, i = self.label(c)
        return name, tuple(int(v) for v in np.unravel_index(i, self.shapes[name])) if self.shapes[name] else ()

    def out_index(self, j: int):
        return tuple(int(v) for v in np.unravel_index(j, self.out_shape)) if self.out_shape else ()

    def floor(self, ref: np.ndarray) -> float:
        """10 ulp, in the dtype under test, of the largest finite |ref|: no tolerance is finer."""
        big = np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0)
        return FLOOR_ULPS * EPS[self.dtype] * big


def call_selected(fn, inputs: dict, with_grad: bool, output):
    """``fn`` at (copies of) ``inputs``, reduced to the output that is differentiated."""
    out = fn(**{k: np.array(v) for k, v in inputs.items()})
    if with_grad:
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError("with_grad=True: the function must return (value, gradients)")
        return out[0]
    if isinstance(out, (tuple, list)):
        return out[0 if output is None else output]
    return out


def combine(*outcomes: Outcome) -> Outcome:
    """Outcomes applied one after the other, as one."""
    methods, notes, fields, suffix, stop = [], [], {}, "", False
    for o in outcomes:
        methods += o.methods
        notes += o.notes
        for name in ("verdict", "reference", "mismatches", "errors", "second_order", "precision", "taylor2"):
            if getattr(o, name) is not None:
                fields[name] = getattr(o, name)
        if o.verdict is not None:
            suffix = ""  # a new message replaces what an earlier outcome appended
        suffix += o.suffix
        stop = stop or o.stop
    return Outcome(methods=tuple(methods), notes=tuple(notes), suffix=suffix, stop=stop, **fields)


def badness(diff, tol, bad) -> np.ndarray:
    """How far past its tolerance each failing entry is (-1 where it passes): a NaN or infinite
    difference is the worst there is, so it sorts first."""
    with np.errstate(all="ignore"):
        ratio = diff / np.where(tol > 0, tol, 1.0)
    return np.where(bad, np.nan_to_num(ratio, nan=np.inf, posinf=np.inf), -1.0)


def summarize(name, status, abs_err=None, rel_err=None, message="") -> MethodSummary:
    def mx(a):
        if a is None:
            return None
        a = np.asarray(a, dtype=np.float64)
        a = a[~np.isnan(a)]  # an inf (got 1 where 0 was expected) is the largest error, not dropped
        return float(a.max()) if a.size else None
    return MethodSummary(name, status, mx(abs_err), mx(rel_err), message)


def mismatch(ctx: CheckContext, c: int, expected, got, j: int | None = None) -> Mismatch:
    name, index = ctx.unflat_index(c)
    abs_err = abs(float(got) - float(expected))
    rel = abs_err / abs(float(expected)) if expected != 0 else (0.0 if abs_err == 0 else float("inf"))
    return Mismatch(name, tuple(int(i) for i in index), float(expected), float(got), abs_err, rel,
                    None if j is None or ctx.scalar else ctx.out_index(j))


def at_text(name, index) -> str:
    """``w[2, 1]``, or ``w`` for a scalar input."""
    return name + (f"[{', '.join(str(int(i)) for i in index)}]" if len(index) else "")


def index_text(at) -> str:
    return "[" + ", ".join(str(int(i)) for i in at) + "]"
