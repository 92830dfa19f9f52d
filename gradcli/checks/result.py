"""Results of ``gradcli check``: plain data, the JSON document and the exit code (docs/contract.md, the model file).

The runner fills these; the table, JSON and JUnit renderers only read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gradcli.render.json import check_document, check_method_document, check_result_document, mismatch_document
from gradcli.verdict.exit_codes import EXIT_INTERRUPTED, exit_code

#: Check statuses, and whether each one fails the run (exit 1).
STATUSES = ("pass", "fail", "error", "inconclusive", "nondifferentiable", "undefined", "skipped")
FAILING = ("fail", "error", "inconclusive")


@dataclass
class Mismatch:
    """One element where the gradient under test and the reference disagree."""

    input: str  # the input's name
    index: tuple  # the element's index in that input (() for a scalar)
    expected: float  # the reference
    got: float  # the gradient under test
    abs_error: float
    rel_error: float
    output_index: tuple | None = None  # for full-Jacobian (vjp) checks: the output element
    direction: int | None = None  # order 2: the random direction the element was compared along

    def to_dict(self) -> dict:
        return mismatch_document(self)


@dataclass
class MethodSummary:
    """How one reference or the gradient under test compares, for the report's methods table."""

    name: str  # traced_reverse | traced_forward | central | richardson | complex_step | hand_written
    status: str  # ok | mismatch | unavailable | error | used (the reference) ...
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    message: str = ""

    def to_dict(self) -> dict:
        return check_method_document(self)


@dataclass
class CheckResult:
    name: str  # the function's name (qualified by file when names collide)
    file: str
    line: int
    kind: str  # grad | vjp | autodiff (no hand-written gradient: gradcli's AD vs numerics) | expression | reference
    status: str  # one of STATUSES
    message: str = ""
    methods: dict = field(default_factory=dict)  # name -> MethodSummary
    mismatches: list = field(default_factory=list)  # Mismatch, worst first (capped)
    reference: str = ""  # which reference decided: traced AD, richardson, ...
    mode: str = ""  # full | fast
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    seconds: float = 0.0
    traceback: str = ""  # the user's own frames, for status error / a raising gradient
    notes: list = field(default_factory=list)  # e.g. "np.asarray cut the trace at line 12; numerics used"
    order: int = 1  # 2: the gradient's own derivative (Hessian-vector products) is checked too
    second_order: dict | None = None  # order 2: what was compared (see gradcli.checks.comparisons.second_order)
    taylor: object = None  # TaylorResult of the first-order Taylor-remainder test, when it ran
    taylor2: object = None  # TaylorResult of the second-order test (with the Hv term), when it ran
    dtype: str = "float64"  # the dtype the gradient under test was computed in (autocast: its dtype)
    digits: dict | None = None  # below float64: input -> correct digits of the gradient under test
    underflow: dict | None = None  # below float64: input -> share of entries 0 where the reference is not
    kernel: list | None = None  # reference= checks: gradcli.checks.kernels.criterion.Quantity per output and input

    @property
    def taylor_slope(self) -> float | None:
        return None if self.taylor is None else self.taylor.slope

    @property
    def taylor_verdict(self) -> str:
        """right | wrong | undetermined, or "" when the test did not run."""
        return "" if self.taylor is None else self.taylor.verdict

    @property
    def taylor_slope2(self) -> float | None:
        return None if self.taylor2 is None else self.taylor2.slope

    @property
    def taylor_verdict2(self) -> str:
        return "" if self.taylor2 is None else self.taylor2.verdict

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def to_dict(self) -> dict:
        return check_result_document(self)


@dataclass
class CheckReport:
    checks: list = field(default_factory=list)  # CheckResult, in collection order
    errors: list = field(default_factory=list)  # files that could not be imported / registered nothing
    interrupted: bool = False  # the user's Ctrl-C stopped the run: ``checks`` are those that finished
    planned: int | None = None  # how many checks the run was to have (None: all of ``checks``)
    #: after a stop: how many model files were never imported, so their checks are not in ``planned``
    #: (None: not known, the run stopped before its files were found)
    unreached: int | None = 0

    def summary(self) -> dict:
        """Counts by status, as the summary line words them: ``inconclusive`` apart from ``failed``, and
        ``errors`` with the files that could not be collected (JUnit's errors too)."""
        count = lambda *s: sum(1 for c in self.checks if c.status in s)
        return {"passed": count("pass"), "failed": count("fail"), "inconclusive": count("inconclusive"),
                "errors": count("error") + len(self.errors), "skipped": count("skipped"),
                "nondifferentiable": count("nondifferentiable"), "undefined": count("undefined"),
                "total": len(self.checks)}

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return exit_code(*(["bad_input"] if self.errors else []), *(c.status for c in self.checks))

    def to_dict(self) -> dict:
        return check_document(self)
