"""The tape: a Wengert list of traced operations, swept forward (jvp) and backward (vjp).

Record once, sweep both ways: every operation on traced arrays appends one :class:`Node` that holds the
ids of its traced parents and two closures over the values it needs,

* ``jvp(tangents) -> tangent``: ``tangents`` has one entry per parent, ``None`` for a zero tangent;
* ``vjp(g) -> adjoints``: one entry per parent, ``None`` where nothing flows back.

Both are linear maps of the node's local derivative, so a forward sweep and a reverse sweep over the
same tape are exact transposes of each other (the identity <u, vjp(v)> = <jvp(u), v> holds to rounding).
For complex values the cotangents follow PyTorch's convention (dL/dRe + i dL/dIm): vjp is the adjoint
of jvp under Re<a, b> = Re(sum(conj(a) * b)); see gradcli.trace.linear.

Both sweeps are loops over node ids (no recursion), so very long chains work. The tape also collects
the *problems* met while tracing (a call that cannot be traced, a conversion that cut the trace), each
with the user's file:line and the tape position, which says whether it can affect a given output.
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
from dataclasses import dataclass

import numpy as np

_GRADCLI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep


class Node:
    __slots__ = ("parents", "jvp", "vjp", "shape", "dtype")

    def __init__(self, parents, jvp, vjp, shape, dtype):
        self.parents = parents
        self.jvp = jvp
        self.vjp = vjp
        self.shape = shape
        self.dtype = dtype


@dataclass(frozen=True)
class Problem:
    """Something that makes the traced derivative untrustworthy from tape position ``at`` on."""

    kind: str  # "untraceable" | "cut"
    call: str  # "np.linalg.svd", "np.asarray", "float()"
    file: str  # the user's file (full path), "" when unknown
    line: int
    at: int  # len(tape) when it happened: only nodes created later can be affected

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}" if self.file else "unknown location"

    def __str__(self) -> str:
        if self.kind == "untraceable":
            return f"{self.call} is not traceable ({self.where})"
        return f"{self.call} cut the trace ({self.where})"


# installed libraries (scipy calling np.asarray on a traced array) and the standard library are not
# where the user's call is; they are skipped too, unless nothing else is left
_LIBRARY_DIRS = tuple({os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items()
                       if k in ("stdlib", "platstdlib", "purelib", "platlib")})


def user_frame():
    """The innermost frame outside gradcli and numpy: the line of user code that made the call."""
    fallback = None
    f = sys._getframe(1)
    while f is not None:
        name = os.path.abspath(f.f_code.co_filename)
        if not (name.startswith(_GRADCLI_DIR) or name.startswith(_NUMPY_DIR)):
            if not name.startswith(_LIBRARY_DIRS):
                return f.f_code.co_filename, f.f_lineno
            fallback = fallback or (f.f_code.co_filename, f.f_lineno)
        f = f.f_back
    return fallback or ("", 0)


def source_line(file: str, line: int) -> str:
    return linecache.getline(file, line) if file else ""


class Tape:
    """Nodes in creation order; the first ones are the inputs (no parents)."""

    def __init__(self):
        self.nodes: list[Node] = []
        self.problems: list[Problem] = []
        # plain ndarrays that received traced values in place (np.add.at, out=): id -> (array, Traced,
        # pending Problem or None). A later traced call that meets the array uses the Traced instead.
        self.shadows: dict[int, tuple] = {}

    def __len__(self):
        return len(self.nodes)

    def add(self, parents, jvp, vjp, shape, dtype) -> int:
        self.nodes.append(Node(tuple(parents), jvp, vjp, tuple(shape), np.dtype(dtype)))
        return len(self.nodes) - 1

    def problem(self, kind: str, call: str) -> Problem:
        file, line = user_frame()
        p = Problem(kind, call, file, line, len(self.nodes))
        last = self.problems[-1] if self.problems else None
        same = last is not None and (last.kind, last.file, last.line, last.at) == (kind, file, line, p.at)
        if same and (kind == "cut" or last.call == call):
            return last  # np.array([...]) calls __array__ and float() on the same elements: one cut
        self.problems.append(p)
        return p

    # --- sweeps -------------------------------------------------------------------------------------
    def ancestors(self, out: int) -> set[int]:
        seen = {out}
        for i in range(out, -1, -1):
            if i in seen:
                seen.update(self.nodes[i].parents)
        return seen

    def forward(self, out: int, tangents: dict[int, np.ndarray]):
        """Push tangents of input nodes to node ``out``; ``None`` when it gets no tangent."""
        tan = dict(tangents)
        for i in range(out + 1):
            node = self.nodes[i]
            if not node.parents:
                continue
            ts = [tan.get(p) for p in node.parents]
            if all(t is None for t in ts):
                continue
            t = node.jvp(ts)
            if t is not None:
                t = np.asarray(t)
                if t.shape != node.shape:
                    t = np.broadcast_to(t, node.shape)
                tan[i] = t
        return tan.get(out)

    def backward(self, out: int, cotangent: np.ndarray) -> dict[int, np.ndarray]:
        """Pull a cotangent on node ``out`` back to every input node it reaches."""
        adj = {out: cotangent}
        grads = {}
        for i in range(out, -1, -1):
            g = adj.pop(i, None)
            if g is None:
                continue
            node = self.nodes[i]
            if not node.parents:
                grads[i] = g
                continue
            for p, c in zip(node.parents, node.vjp(g)):
                if c is None:
                    continue
                shape = self.nodes[p].shape
                if np.shape(c) != shape:  # a rule may hand back a broadcastable piece
                    c = np.broadcast_to(c, shape)
                adj[p] = c if p not in adj else adj[p] + c
        return grads


def cut_name(file: str, line: int) -> str:
    """Name the numpy call that converted a traced array, from the user's source line."""
    text = source_line(file, line)
    if re.search(r"\]\s*(\*\*|//|[-+*/@%])?=[^=]", text):  # out[t] = h: numpy converts h to store it
        return "assignment into a plain ndarray"
    for name in ("asarray", "asanyarray", "ascontiguousarray", "asfarray", "array"):
        if f"{name}(" in text:
            return f"np.{name}"
    return "conversion to a plain ndarray (__array__)"
