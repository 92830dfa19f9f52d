"""The optional ``fast`` path: a Program run by a compiled numba interpreter on every core.

``pip install gradcli[fast]``.

The kernel is an interpreter, compiled once (and cached on disk by numba), that walks an instruction
array: nothing of the user's is ever compiled. Its instructions are the primitive table's entries in
table order, each one's loop built from the entry's ``numba`` form (a scalar function or a
:mod:`.vecmath` loop), so a new primitive needs nothing here; the one piece of generated source is
the dispatch over the opcodes, made of opcode numbers and names this module makes. Each thread owns a register file of
``block`` elements per register (:meth:`NumbaPlan.block`: the file fits in L2); for every block of
points it runs the instructions in order, each one a tight loop over the block. The opcode is
dispatched once per instruction and block, not per element, so the loops are as fused as a
hand-written kernel's as far as memory is concerned, and no Python runs between instructions.
Constants live in registers filled once per thread. The threads are Python's (the kernel releases
the GIL), one block in every ``threads`` each.

The results follow numpy's ufuncs (NaN propagation of ``minimum``/``maximum``, ``heaviside(x, 0)``,
the stable ``sigmoid``/``softplus``). exp, log, sin, cos, tanh, cosh and sigmoid are :mod:`.vecmath`'s
vectorised loops (within 2 ulp, numpy's special values exactly); the other transcendental functions
come from LLVM's libm. Either can differ from numpy's in the last bit or two.
"""
from __future__ import annotations

import hashlib
import threading

import numpy as np

from gradcli.core.primitives import PRIMITIVES
from gradcli.engines.program import Program
from gradcli.engines.cpu import n_threads, pool, prepare_inputs

try:  # the optional extra
    import numba

    from gradcli.engines import vecmath
except Exception:  # pragma: no cover - depends on the environment
    numba = None

BLOCK = 512  # the fewest points per block (the per-instruction dispatch is paid per block)
REGISTER_FILE = 256 * 1024  # bytes: what fits in L2 beside the inputs and outputs

# The opcode of each primitive is its place in the table; the engine's own two instructions follow:
# ``sincos`` (sin into d, cos into b: one range reduction for both) and ``copy``.
TABLE_OPS = tuple(name for name, p in PRIMITIVES.items() if p.numba is not None)
OPS = TABLE_OPS + ("sincos", "copy")
OPCODE = {name: i for i, name in enumerate(OPS)}


def _code_key(code) -> tuple:
    """What a function compiles to, deterministically (no addresses, unlike repr of a code object)."""
    consts = tuple(_code_key(c) if hasattr(c, "co_code") else repr(c) for c in code.co_consts)
    return code.co_code, code.co_names, consts


def table_fingerprint() -> int:
    """A digest of everything compiled into the kernel besides this file: the table's forms in their
    opcode order and vecmath's source. numba keys its disk cache on this file alone, so the kernel
    carries the digest as a constant and :func:`run_range` recompiles a kernel cached with another."""
    h = hashlib.sha256()
    for name in TABLE_OPS:
        form = PRIMITIVES[name].numba
        h.update(repr((name, form if isinstance(form, str) else _code_key(form.__code__))).encode())
    if numba is not None:
        with open(vecmath.__file__, "rb") as f:
            h.update(f.read())
    return int(h.hexdigest()[:15], 16)


FINGERPRINT = table_fingerprint()


def available() -> bool:
    return numba is not None


# error_model="numpy": x/0 is inf or NaN as in numpy (numba's default raises ZeroDivisionError, and its
# check per element also keeps LLVM from vectorising the loop)
if numba is not None:
    _JIT = dict(boundscheck=False, error_model="numpy")

    def _loop(prim):
        """The instruction's loop over a block, ``loop(o, x, y, n, w, wi)``, from the entry's form."""
        form = prim.numba
        if isinstance(form, str):
            vectorised = getattr(vecmath, form)

            def loop(o, x, y, n, w, wi):
                vectorised(x, o, n, w, wi)
        elif prim.arity == 1:
            f = numba.njit(inline="always", error_model="numpy")(form)

            def loop(o, x, y, n, w, wi):
                for i in range(n):
                    o[i] = f(x[i])
        else:
            f = numba.njit(inline="always", error_model="numpy")(form)

            def loop(o, x, y, n, w, wi):
                for i in range(n):
                    o[i] = f(x[i], y[i])
        return numba.njit(inline="always", **_JIT)(loop)

    def _sincos(o, x, y, n, w, wi):
        vecmath.sincos(x, o, y, n, w)

    def _copy(o, x, y, n, w, wi):
        for i in range(n):
            o[i] = x[i]

    def _block_source():
        """The kernel's dispatch: one branch per opcode, in the table's order. Only opcode numbers and
        names made here (``_loop3``) reach the source, never anything of the user's. A literal if/elif
        chain over inlined loops compiles as one function, as fast as a hand-written kernel (a tree of
        closures, which needs no source, took twice as long to compile cold)."""
        lines = ["def _block(code, r, n, w, wi):",
                 "    for j in range(code.shape[0]):",
                 "        op, d, a, b = code[j, 0], code[j, 1], code[j, 2], code[j, 3]",
                 "        o, x, y = r[d], r[a], r[b]"]
        for k in range(len(OPS)):
            lines.append(f"        {'if' if k == 0 else 'elif'} op == {k}:")
            lines.append(f"            _loop{k}(o, x, y, n, w, wi)")
        return "\n".join(lines) + "\n"

    _namespace = {f"_loop{k}": loop for k, loop in enumerate(
        [_loop(PRIMITIVES[name]) for name in TABLE_OPS]
        + [numba.njit(inline="always", **_JIT)(f) for f in (_sincos, _copy)])}
    exec(compile(_block_source(), "<gradcli numba dispatch>", "exec"), _namespace)  # noqa: S102
    _block = numba.njit(**_JIT)(_namespace["_block"])

    @numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
    def _worker(code, n_regs, const_base, consts, inputs, n_vars, out_src, out, block, t, n_threads,
                start, stop, fingerprint):
        """Blocks t, t + n_threads, ... of points start:stop; the GIL is released, so the threads of
        :func:`run_range` run these side by side (numba's own ``parallel=True`` would do the same
        but costs several more seconds to compile). False, doing nothing, when compiled for
        another table than ``fingerprint``'s."""
        if fingerprint != FINGERPRINT:
            return False
        n_blocks = (stop - start + block - 1) // block
        r = np.empty((n_regs, block), dtype=out.dtype)
        w = np.empty((3, block), dtype=np.float64)  # vecmath's scratch
        wi = w.view(np.int64)
        for c in range(consts.shape[0]):
            r[const_base + c, :] = consts[c]
        for k in range(t, n_blocks, n_threads):
            s = start + k * block
            n = min(block, stop - s)
            for v in range(n_vars):
                src = inputs[v]
                if src.shape[0] == 1:  # a scalar, broadcast
                    r[v, :n] = src[0]
                else:
                    r[v, :n] = src[s:s + n]
            _block(code, r, n, w, wi)
            for m in range(out_src.shape[0]):
                out[m, s:s + n] = r[out_src[m], :n]
        return True


class NumbaPlan:
    """The instruction array of a Program.

    Registers: the program's, then one per constant (filled once per thread), then one per fused
    sin/cos pair: ``sin(a)`` and ``cos(a)`` of the same register become one ``sincos`` loop at the
    first of the two (one range reduction serves both) and a copy at the second.
    """

    def __init__(self, program: Program, dtype):
        code = list(program.instructions)
        R = program.n_registers
        consts: dict = {}
        for ins in code:
            for a in ins.args:
                if not isinstance(a, int):
                    consts.setdefault(float(a), R + len(consts))
        for o in program.outputs:
            if not isinstance(o, int):
                consts.setdefault(float(o), R + len(consts))
        n_regs = R + len(consts)

        def reg(a):
            return a if isinstance(a, int) else consts[float(a)]

        rows: list = [None] * len(code)
        done = set()
        for j1, ins in enumerate(code):
            if j1 in done:
                continue
            if ins.op in ("sin", "cos") and ins.out != ins.args[0]:
                a = ins.args[0]
                other = "cos" if ins.op == "sin" else "sin"
                for j2 in range(j1 + 1, len(code)):
                    later = code[j2]
                    if later.op == other and later.args[0] == a:
                        temp, n_regs = n_regs, n_regs + 1
                        sin_d, cos_d = (ins.out, temp) if ins.op == "sin" else (temp, ins.out)
                        rows[j1] = (OPCODE["sincos"], sin_d, a, cos_d)
                        rows[j2] = (OPCODE["copy"], later.out, temp, 0)
                        done.add(j2)
                        break
                    if later.out == a:
                        break
            if rows[j1] is None:
                if ins.op not in OPCODE:
                    raise ValueError(f"primitive {ins.op!r} has no numba form in the table")
                args = [reg(x) for x in ins.args] + [0, 0]
                rows[j1] = (OPCODE[ins.op], ins.out, args[0], args[1])
        self.dtype = np.dtype(dtype)
        self.n_regs = n_regs
        self.const_base = R
        self.consts = np.array(sorted(consts, key=consts.get), dtype=self.dtype)
        self.code = np.array(rows, dtype=np.int64).reshape(-1, 4)
        self.out_src = np.array([reg(o) for o in program.outputs], dtype=np.int64)
        self.n_vars = len(program.variables)

    def block(self) -> int:
        """Points per block: the largest power of two up to 2048 whose register file (and vecmath's
        scratch) stays within REGISTER_FILE bytes, and at least BLOCK."""
        per_point = (self.n_regs + 3) * 8
        b = 2048
        while b > BLOCK and b * per_point > REGISTER_FILE:
            b //= 2
        return b


_COMPILED = threading.Event()


def compiled() -> bool:
    """Whether the kernel is ready in this process (its first call compiles or loads it)."""
    return _COMPILED.is_set()


def execute(program: Program, inputs: dict, dtype=np.float64, block: int | None = None) -> np.ndarray:
    """All outputs of ``program`` at N points, as :func:`gradcli.engines.cpu.execute`, on numba threads."""
    arrays, N = prepare_inputs(program, inputs)
    out = np.empty((len(program.outputs), N), dtype=dtype)
    run_range(NumbaPlan(program, dtype), stack(arrays, N, dtype), out, 0, N, block=block)
    return out


#: Up to this many variables the kernel reads the caller's arrays in place (a tuple of this many
#: 1-D arrays, padded, so that numba compiles one signature); beyond, they are copied into one array.
DIRECT = 8


def stack(arrays: list, N: int, dtype):
    """The inputs in the form the kernel reads: a tuple of DIRECT 1-D arrays (each of N points or
    one scalar; the caller's own arrays where they are contiguous, writeable and of ``dtype``), or
    one (n_vars, N) array for more variables."""
    dtype = np.dtype(dtype)
    if len(arrays) <= DIRECT:
        own = []
        for a in arrays:
            a = np.ascontiguousarray(a, dtype=dtype)
            own.append(a if a.flags.writeable else a.copy())
        pad = np.empty(0, dtype=dtype)
        return tuple(own + [pad] * (DIRECT - len(own)))
    x = np.empty((len(arrays), N), dtype=dtype)
    for v, a in enumerate(arrays):
        x[v] = a if a.shape[0] != 1 else a[0]
    return x


def run_range(plan: NumbaPlan, x, out: np.ndarray, start: int, stop: int, block: int | None = None) -> None:
    """Points ``start:stop`` into ``out[:, start:stop]``; ``x`` from :func:`stack`."""
    if numba is None:
        raise RuntimeError("numba is not installed (pip install 'gradcli[fast]')")
    if stop <= start:
        return
    block = int(block or plan.block())
    n_blocks = (stop - start + block - 1) // block
    threads = min(n_threads(), n_blocks)

    def work(t):
        return _worker(plan.code, plan.n_regs, plan.const_base, plan.consts, x, plan.n_vars, plan.out_src,
                       out, block, t, threads, start, stop, FINGERPRINT)

    def run():
        if threads == 1:
            return work(0)
        return all([f.result() for f in [pool().submit(work, t) for t in range(threads)]])

    if not run():  # loaded from a disk cache written for another table: compile afresh, once
        _worker.recompile()
        run()
    _COMPILED.set()
