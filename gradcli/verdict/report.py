"""Reports: plain data with an exit code. Every renderer (table, JSON) is a function of these; the
JSON documents are :mod:`gradcli.render.json`'s, and ``to_dict()`` hands over to it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradcli.verdict.exit_codes import exit_code
from gradcli.render.json import finite_or_none, grad_document, hessian_document

METHOD_ORDER = ("symbolic", "forward", "reverse", "central", "richardson", "complex_step")


@dataclass
class Diagnostic:
    """Why a point is not an ordinary one: ``kind`` is ``undefined`` or ``nondifferentiable``."""

    kind: str
    op: str
    message: str


@dataclass
class MethodResult:
    name: str
    jacobian: np.ndarray | None  # rows = outputs, columns = variables; nan where undefined
    status: str  # ok | mismatch | undefined | unavailable | error
    message: str = ""
    abs_error: np.ndarray | None = None
    rel_error: np.ndarray | None = None
    tolerance: np.ndarray | None = None
    error_estimate: np.ndarray | None = None
    seconds: float = 0.0

    @property
    def hessian(self) -> np.ndarray | None:
        """The matrix under its Hessian name, for results of ``gradcli hessian``."""
        return self.jacobian

    @property
    def max_rel_error(self) -> float | None:
        if self.rel_error is None or not np.isfinite(self.rel_error).any():
            return None
        return float(np.nanmax(np.where(np.isfinite(self.rel_error), self.rel_error, np.nan)))


@dataclass
class Directional:
    """A directional derivative (grad·v, or J·v for a vector-valued expression) and, for the Hessian,
    the Hessian-vector product H·v, each with its largest relative error against the reference."""

    derivative: np.ndarray  # one entry per output
    derivative_rel_error: float | None = None
    hvp: np.ndarray | None = None
    hvp_rel_error: float | None = None


def relative_error(got, ref) -> float | None:
    """max |got - ref| / |ref| (absolute where ref is 0); None where either is not finite."""
    got, ref = np.atleast_1d(np.asarray(got, dtype=float)), np.atleast_1d(np.asarray(ref, dtype=float))
    if not (np.isfinite(got).all() and np.isfinite(ref).all()):
        return None
    err = np.abs(got - ref)
    return float(np.max(np.where(ref != 0, err / np.where(ref != 0, np.abs(ref), 1.0), err), initial=0.0))


@dataclass
class GradReport:
    """The comparison at one point: what ``gradcli grad`` prints and ``gradcli.grad`` returns."""

    expression: str
    variables: list
    point: dict
    values: list  # one per output, None where undefined
    symbolic: list | None  # [output][variable] derivative strings, None when sympy was unavailable
    reference: str  # symbolic | consensus | richardson
    methods: dict  # name -> MethodResult, in METHOD_ORDER
    status: str  # agree | disagree | undefined | nondifferentiable
    message: str = ""
    diagnostics: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    reference_jacobian: np.ndarray | None = None
    #: the symbolic reference to 35 significant digits, as decimal strings ([output][variable]; None
    #: where undefined or when sympy was unavailable): more than float64 can hold, for comparisons
    #: against other high-precision references
    reference_digits: list | None = None
    direction: np.ndarray | None = None  # --direction v: the Jacobian-vector product per method
    directional: dict = field(default_factory=dict)  # method -> Directional

    @property
    def vector(self) -> bool:
        return len(self.values) > 1

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)

    @property
    def value(self):
        return self.values if self.vector else self.values[0]

    @property
    def jacobian(self) -> np.ndarray | None:
        return self.reference_jacobian

    @property
    def gradient(self) -> dict:
        """The reference gradient of a scalar expression, by variable name (None where undefined)."""
        if self.reference_jacobian is None:
            return {v: None for v in self.variables}
        return {v: finite_or_none(g) for v, g in zip(self.variables, self.reference_jacobian[0])}

    def to_dict(self) -> dict:
        """Exactly the ``gradcli grad --json`` document."""
        return grad_document(self)


HESSIAN_ORDER = ("symbolic", "forward_over_reverse", "reverse_over_forward", "central_of_reverse")


@dataclass
class HessianReport:
    """The Hessian of a scalar expression at one point: what ``gradcli hessian`` prints and
    ``gradcli.hessian`` returns. Each method's :class:`MethodResult` holds its Hessian in ``.jacobian``
    (also readable as ``report.methods[name].hessian``)."""

    expression: str
    variables: list
    point: dict
    value: float | None
    gradient_reference: np.ndarray | None  # the reference gradient, nan where undefined
    symbolic: list | None  # [i][j] strings of the second derivatives, None when sympy was unavailable
    reference: str  # symbolic | consensus | central_of_reverse | none
    methods: dict  # name -> MethodResult, in HESSIAN_ORDER
    status: str  # agree | disagree | undefined | nondifferentiable
    message: str = ""
    diagnostics: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    reference_hessian: np.ndarray | None = None
    symmetry: dict = field(default_factory=dict)  # method -> max |H - H^T| / max |H| (None: no matrix)
    eigenvalues: np.ndarray | None = None  # of the symmetrised reference, ascending
    definiteness: str | None = None  # minimum | maximum | saddle | degenerate
    symbolic_gradient: list | None = None  # strings, one per variable
    direction: np.ndarray | None = None
    directional: dict = field(default_factory=dict)  # method -> Directional

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)

    @property
    def hessian(self) -> np.ndarray | None:
        """The reference Hessian (nan where undefined)."""
        return self.reference_hessian

    @property
    def gradient(self) -> dict:
        """The reference gradient by variable name (None where undefined)."""
        g = self.gradient_reference
        if g is None:
            return {v: None for v in self.variables}
        return {v: finite_or_none(x) for v, x in zip(self.variables, g)}

    def to_dict(self) -> dict:
        """Exactly the ``gradcli hessian --json`` document."""
        return hessian_document(self)
