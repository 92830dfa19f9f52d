"""``trace(fn, inputs, wrt)``: run numpy code once on traced arrays, then sweep the tape both ways."""
from __future__ import annotations

import numpy as np

from gradcli.trace.array import Traced, lift
from gradcli.trace.substitution import tracing
from gradcli.trace.tape import Problem, Tape


class Trace:
    """The result of :func:`trace`: the output value, whether the trace can be trusted, and sweeps.

    ``ok`` is True when the output is traced and nothing that could affect it went wrong: a problem
    recorded after the output was computed (``print(float(loss))``) cannot, and is kept in ``notes``.
    """

    def __init__(self, tape: Tape, inputs: dict, wrt: list[str], ids: dict[str, int], result):
        self._tape, self._ids, self.wrt = tape, ids, list(wrt)
        self._shapes = {n: np.shape(inputs[n]) for n in wrt}
        self._dtypes = {n: np.asarray(inputs[n]).dtype for n in wrt}
        if isinstance(result, np.ndarray) and tape.shadows:
            result = lift(tape, result)  # an np.add.at / out= buffer returned as the output
        self._out = result._node if isinstance(result, Traced) else None
        self.value = np.array(result._value if isinstance(result, Traced) else result)
        self.problem_details: list[Problem] = []
        self.notes: list[str] = []
        if self._out is None:
            self.problem_details = list(tape.problems)
            self.problems = list(dict.fromkeys(str(p) for p in tape.problems))
            if tape.problems:
                self.problems.append("the output is a plain array: the trace was cut on the way to it")
            else:
                self.problems.append("the output does not depend on any differentiated input "
                                     f"({', '.join(wrt)}): it is a plain array")
        else:
            for p in tape.problems:
                (self.problem_details if p.at <= self._out else []).append(p)
                if p.at > self._out:
                    self.notes.append(f"{p} after the output was computed: it does not affect it")
            self.problems = list(dict.fromkeys(str(p) for p in self.problem_details))  # once per line
            self.notes = list(dict.fromkeys(self.notes))
            reached = tape.ancestors(self._out)
            missing = [n for n in wrt if ids[n] not in reached]
            if missing:
                self.notes.append(f"the output does not depend on {', '.join(missing)}: its gradient is zero")
        self.ok = self._out is not None and not self.problems

    def _zeros(self, name):
        return np.zeros(self._shapes[name], self._dtype(name))

    def _dtype(self, name):
        dt = self._dtypes[name]
        return dt if dt.kind in "fc" else np.dtype(float)

    def vjp(self, cotangent) -> dict[str, np.ndarray]:
        """The reverse sweep: cotangent (the output's shape) -> one adjoint per wrt input, its shape."""
        g = np.asarray(cotangent)
        if g.shape != self.value.shape:
            if g.size != self.value.size:
                raise ValueError(f"cotangent shape {g.shape} does not match the output {self.value.shape}")
            g = g.reshape(self.value.shape)
        if self._out is None:
            return {n: self._zeros(n) for n in self.wrt}
        grads = self._tape.backward(self._out, g)
        out = {}
        for n in self.wrt:
            a = grads.get(self._ids[n])
            if a is not None and self._dtype(n).kind != "c":
                a = np.real(a)  # a real input's cotangent is the real part of what reaches it
            out[n] = self._zeros(n) if a is None else np.array(np.broadcast_to(a, self._shapes[n]),
                                                               dtype=np.result_type(self._dtype(n), a))
        return out

    def jvp(self, tangents: dict[str, np.ndarray]) -> np.ndarray:
        """The forward sweep over the recorded tape: input tangents (missing: zero) -> output tangent."""
        unknown = set(tangents) - set(self.wrt)
        if unknown:
            raise ValueError(f"tangents for inputs that are not differentiated: {sorted(unknown)}")
        dtype = self.value.dtype if self.value.dtype.kind in "fc" else np.dtype(float)
        if self._out is None:
            return np.zeros(self.value.shape, dtype)
        seeds = {self._ids[n]: np.broadcast_to(np.asarray(t), self._shapes[n]) for n, t in tangents.items()}
        t = self._tape.forward(self._out, seeds)
        if t is None:
            return np.zeros(self.value.shape, dtype)
        return np.array(np.broadcast_to(t, self.value.shape))

    def gradient(self) -> dict[str, np.ndarray]:
        """vjp(1) for an output of size 1 (shapes (), (1,), (1, 1)...)."""
        if self.value.size != 1:
            raise ValueError(f"gradient() needs an output of size 1, not shape {self.value.shape}; use vjp")
        return self.vjp(np.ones(self.value.shape, self.value.dtype if self.value.dtype.kind in "fc" else float))

    def __repr__(self):
        return f"Trace(ok={self.ok}, shape={self.value.shape}, problems={self.problems})"


def trace(fn, inputs: dict, wrt: list[str], output: int | None = None) -> Trace:
    """Call ``fn(**inputs)`` with the ``wrt`` inputs traced and return a :class:`Trace` of the output.

    Inputs not in ``wrt`` (integer labels, masks, settings) are passed as given. When ``fn`` returns a
    tuple or list, ``output`` selects the element (default 0). Exceptions raised by ``fn`` propagate.
    """
    missing = [n for n in wrt if n not in inputs]
    if missing:
        raise ValueError(f"wrt names inputs that are not given: {missing}")
    tape = Tape()
    args, ids = dict(inputs), {}
    for name in wrt:
        value = np.array(inputs[name])  # a copy: the user's function must not see our saved values change
        ids[name] = tape.add((), None, None, value.shape, value.dtype)
        args[name] = Traced(value, ids[name], tape)
    with tracing(fn):  # np.array of lists and scipy's python-level functions route traced values
        result = fn(**args)
    if isinstance(result, (tuple, list)):
        result = result[0 if output is None else output]
    elif output not in (None, 0):
        raise ValueError(f"output={output} selects from a tuple, but the function returned {type(result).__name__}")
    return Trace(tape, inputs, wrt, ids, result)
