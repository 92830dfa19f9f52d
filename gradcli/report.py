"""Reports: plain data with an exit code. Every renderer (table, JSON) is a function of these."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: The process exit codes shared by every command (DESIGN.md section 3).
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT, EXIT_UNDEFINED = 0, 1, 2, 3

METHOD_ORDER = ("symbolic", "forward", "reverse", "central", "richardson", "complex_step")


def finite_or_none(v):
    """JSON has no inf/nan: non-finite numbers become null (the status next to them says why)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def symbolic_document(variables, symbolic):
    """Derivative strings for JSON: {var: text} for one output, a list of those for several."""
    if symbolic is None:
        return None
    if len(symbolic) > 1:
        return [dict(zip(variables, row)) for row in symbolic]
    return dict(zip(variables, symbolic[0]))


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


def _exit_code(status: str) -> int:
    return {"agree": EXIT_OK, "disagree": EXIT_MISMATCH}.get(status, EXIT_UNDEFINED)


def _null_matrix(a) -> list | None:
    return None if a is None else [[finite_or_none(v) for v in row] for row in np.asarray(a, dtype=float)]


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


def _common(report, doc: dict) -> dict:
    """The header and trailer every single-point document shares (grad and hessian)."""
    head = {"expression": report.expression, "variables": list(report.variables),
            "point": {k: finite_or_none(v) for k, v in report.point.items()}}
    doc = {**head, **doc}
    if report.message:
        doc["message"] = report.message
    if report.diagnostics:
        doc["diagnostics"] = [{"kind": d.kind, "op": d.op, "message": d.message} for d in report.diagnostics]
    if report.warnings:
        doc["warnings"] = list(report.warnings)
    if report.direction is not None:
        doc["direction"] = dict(zip(report.variables, (finite_or_none(v) for v in report.direction)))
    return doc


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
        return _exit_code(self.status)

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

    def _matrix(self, jac):
        if jac is None:  # same shape, all null: doc["methods"][m]["gradient"]["x"] always works
            jac = np.full((len(self.values), len(self.variables)), np.nan)
        if self.vector:
            return [[finite_or_none(v) for v in row] for row in jac]
        return {v: finite_or_none(g) for v, g in zip(self.variables, jac[0])}

    def to_dict(self) -> dict:
        """Exactly the ``gradcli grad --json`` document."""
        key = "jacobian" if self.vector else "gradient"
        methods = {}
        for name, m in self.methods.items():
            entry = {key: self._matrix(m.jacobian), "max_rel_error": finite_or_none(m.max_rel_error),
                     "status": m.status}
            if m.rel_error is not None:
                entry["rel_error"] = self._matrix(m.rel_error)
            if m.error_estimate is not None:
                entry["error_estimate"] = self._matrix(m.error_estimate)
            if m.message:
                entry["message"] = m.message
            d = self.directional.get(name)
            if d is not None:
                entry["directional_derivative"] = ([finite_or_none(v) for v in d.derivative] if self.vector
                                                   else finite_or_none(d.derivative[0]))
                entry["directional_rel_error"] = finite_or_none(d.derivative_rel_error)
            methods[name] = entry
        symbolic = symbolic_document(self.variables, self.symbolic)
        return _common(self, {
            "value": [finite_or_none(v) for v in self.values] if self.vector else finite_or_none(self.values[0]),
            "symbolic": symbolic,
            "reference": self.reference,
            "reference_digits": symbolic_document(self.variables, self.reference_digits),
            "methods": methods,
            "status": self.status,
        })


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
        return _exit_code(self.status)

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
        methods = {}
        n = len(self.variables)
        for name, m in self.methods.items():
            H = m.jacobian if m.jacobian is not None else np.full((n, n), np.nan)
            entry = {"hessian": _null_matrix(H), "max_rel_error": finite_or_none(m.max_rel_error),
                     "status": m.status}
            if m.rel_error is not None:
                entry["rel_error"] = _null_matrix(m.rel_error)
            if m.error_estimate is not None:
                entry["error_estimate"] = _null_matrix(m.error_estimate)
            if m.message:
                entry["message"] = m.message
            d = self.directional.get(name)
            if d is not None:
                entry["directional_derivative"] = finite_or_none(d.derivative[0])
                entry["directional_rel_error"] = finite_or_none(d.derivative_rel_error)
                entry["hvp"] = None if d.hvp is None else [finite_or_none(v) for v in d.hvp]
                entry["hvp_rel_error"] = finite_or_none(d.hvp_rel_error)
            methods[name] = entry
        return _common(self, {
            "value": finite_or_none(self.value),
            "gradient": self.gradient,
            "symbolic": self.symbolic,
            "symbolic_gradient": (None if self.symbolic_gradient is None
                                  else dict(zip(self.variables, self.symbolic_gradient))),
            "reference": self.reference,
            "methods": methods,
            "symmetry": {k: finite_or_none(v) for k, v in self.symmetry.items()},
            "eigenvalues": None if self.eigenvalues is None else [finite_or_none(v) for v in self.eigenvalues],
            "definiteness": self.definiteness,
            "status": self.status,
        })
