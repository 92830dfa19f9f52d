"""``gradcli.compile(expr)``: parse and compile once, then value and gradient for arrays of points."""
from __future__ import annotations

import numpy as np

from gradcli.core.parser import parse_expression
from gradcli.core.errors import BadInput
from gradcli.core.graph import node_values
from gradcli.engines.backend import choose_engine, execute
from gradcli.engines.program import Program, compile_graph


class CompiledExpression:
    """An expression compiled to a value-and-gradient program, reusable for any number of batches.

    >>> f = compile("x*y + sin(x)")
    >>> value, grad = f.value_and_grad(x=[0.0, 1.0], y=2.0)
    >>> value.shape, sorted(grad)
    ((2,), ['x', 'y'])
    """

    def __init__(self, expr: str):
        self.expression = expr
        self.graph = parse_expression(expr)
        if _divides_by_constant_zero(self.graph):
            # a program that is inf or nan wherever it runs is a mistake to say at once, not to compile
            raise BadInput("cannot compile the expression: it divides by a constant that is 0 in float64 "
                           "(such as x/0, or a literal like 1e-400 that float64 rounds to 0)")
        self.program: Program = compile_graph(self.graph)

    @property
    def variables(self) -> tuple:
        """The variable names, in the order of the expression's first use."""
        return tuple(self.program.variables)

    @property
    def n_outputs(self) -> int:
        """How many values the expression has (1 for a scalar expression)."""
        return self.program.n_outputs

    def __repr__(self):
        return f"gradcli.compile({self.expression!r})"

    def value_and_grad(self, device: str = "cpu", dtype=None, chunk: int | None = None, engine: str = "auto",
                       **arrays):
        """Value and gradient at many points: ``(value, {name: gradient})``.

        Pass one array (or scalar) per variable, by name; they broadcast against each other. For a
        scalar expression ``value`` and each gradient have the broadcast shape (``(N,)`` for 1-D
        arrays of N points); for a vector-valued expression with m values, ``value`` has shape
        ``(m, N)`` and each gradient ``(m, N)`` (row i is the derivative of value i).

        ``device`` is ``"cpu"`` or ``"cuda"`` (CuPy arrays come back); ``dtype`` is float64 or
        float32 (default: float32 if every array is float32, else float64); ``chunk`` tunes the CPU
        chunk length; ``engine`` is ``numpy``, ``numba`` or ``cuda``, or ``auto``: the rule of
        :func:`gradcli.engines.backend.choose_engine`, from the number of points and the program's size
        alone, so the same call gives the same bits in every process. A value outside the domain is NaN or inf, as numpy gives it, with two
        exceptions of the compiler's algebra: ``x*0`` is 0 and ``x + 0`` is x even where x is inf or
        NaN. A gradient there is what the rule gives (``1/x`` for ``log(x)`` at -1): look at the value.
        Raises :class:`gradcli.BadInput` for missing or unknown variable names and bad arrays.
        """
        names = self.variables
        missing = [v for v in names if v not in arrays]
        if missing:
            raise BadInput(f"no values for {', '.join(missing)}: pass "
                           + ", ".join(f"{v}=array" for v in missing)
                           + f" (the variables of {self.expression!r}: {', '.join(names) or 'none'})")
        extra = [k for k in arrays if k not in names]
        if extra:
            raise BadInput(f"{', '.join(extra)} {'is not a variable' if len(extra) == 1 else 'are not variables'}"
                           f" of {self.expression!r} (its variables: {', '.join(names) or 'none'})")
        try:
            choose_engine(0, len(self.program), device, engine)  # the engine and device go together
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk <= 0):
            raise BadInput(f"chunk needs a positive number of points, got {chunk!r}")
        xp = np
        if device == "cuda":
            try:
                import cupy as xp  # noqa: F811 - the CUDA backend needs it anyway
            except ImportError:
                raise BadInput("device 'cuda' needs CuPy and a CUDA GPU (pip install 'gradcli[gpu]')") from None
        try:
            values = {k: xp.asarray(arrays[k]) for k in names}
        except Exception as exc:
            raise BadInput(f"the values must be numeric arrays: {exc}") from None
        for k, a in values.items():
            if a.dtype.kind not in "biuf":
                raise BadInput(f"the values of {k} must be real numbers, got an array of {a.dtype}")
        if dtype is None:
            dtype = np.float32 if values and all(a.dtype == np.float32 for a in values.values()) else np.float64
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise BadInput(f"dtype must be float32 or float64, got {dtype!r}") from None
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise BadInput(f"dtype must be float32 or float64, got {dtype}")
        try:
            shape = np.broadcast_shapes(*(a.shape for a in values.values())) if values else ()
        except ValueError:
            raise BadInput("the arrays do not broadcast: shapes "
                           + ", ".join(f"{k}{tuple(a.shape)}" for k, a in values.items())) from None
        n = int(np.prod(shape))
        flat = {k: (a.reshape(-1) if a.shape == shape else xp.broadcast_to(a, shape).reshape(-1))
                if a.size != 1 else a.reshape(-1) for k, a in values.items()}
        R = execute(self.program, flat, device=device, dtype=dtype, chunk=chunk, engine=engine)
        R = xp.broadcast_to(R.reshape(R.shape[0], -1), (R.shape[0], n))
        m, nv = self.n_outputs, len(names)
        lead = () if m == 1 else (m,)
        value = R[:m].reshape(lead + shape)
        J = R[m:].reshape(m, nv, *shape)
        grads = {v: J[:, i].reshape(lead + shape) for i, v in enumerate(names)}
        return value, grads


def compile(expr: str) -> CompiledExpression:  # noqa: A001 - the public name the contract gives it
    """Parse and compile ``expr`` once; ``.value_and_grad(**arrays)`` then runs it on batches.

    Raises :class:`gradcli.BadInput` for an expression that does not parse.
    """
    return CompiledExpression(expr)


def _divides_by_constant_zero(graph) -> bool:
    with np.errstate(all="ignore"):
        vals = node_values(graph, {v: np.float64(1.0) for v in graph.variables})
    return any(n.op == "div" and not graph.active[n.args[1]] and vals[n.args[1]] == 0 for n in graph.nodes)
