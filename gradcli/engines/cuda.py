"""The compiled program as one fused CUDA kernel (a ``cupy.ElementwiseKernel``).

Each GPU thread runs the whole straight-line program for its point: inputs are read once, every
intermediate lives in registers, and each output is written once, so the kernel moves the fewest bytes
the problem allows (inputs read plus outputs written), where a tape of whole-array operations moves
every intermediate through device memory.

The CUDA source is generated from the program alone. Its names are ones this module makes: inputs
``x<register>``, outputs ``y<index>``, locals ``r<instruction>``, the element type ``T`` and a kernel
name hashed from the source; besides those, only the C math functions of the primitive table's ``cuda``
templates and two bit-casting intrinsics for infinities and NaN. A variable's name, whatever the user
called it, never reaches the compiler. Constants are printed exactly (``repr`` round-trips a double,
and a float32 kernel gets the constant already rounded to float32, as numpy rounds it).

CuPy compiles every kernel with ``-ftz=true``: in float32, subnormal results flush to zero, as in all of
CuPy's own float32 kernels (float64 is unaffected). NVRTC's default FMA contraction is kept: it changes
results in the last place only, and the GPU tests measure errors against the size of the terms.
"""
from __future__ import annotations

import hashlib
import math
import weakref
from typing import NamedTuple

import numpy as np

from gradcli.core.primitives import PRIMITIVES
from gradcli.engines.program import Program

#: The kernel's element type for each supported dtype (CuPy typedefs ``T`` to it).
CTYPES = {"float32": "float", "float64": "double"}

# Bit patterns for the constants that have no decimal literal: C has none for inf and NaN.
_SPECIAL = {
    "float32": ("__int_as_float", {"inf": "0x7f800000", "nan": "0x7fc00000"}),
    "float64": ("__longlong_as_double", {"inf": "0x7ff0000000000000LL", "nan": "0x7ff8000000000000LL"}),
}


class KernelSource(NamedTuple):
    """The pieces of a ``cupy.ElementwiseKernel``: ``ElementwiseKernel(*source)``."""

    in_params: str
    out_params: str
    body: str
    name: str


def _dtype_name(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in CTYPES:
        raise ValueError(f"the CUDA kernel computes in float32 or float64, not {name}")
    return name


def literal(value: float, dtype) -> str:
    """An exact C expression of type T for the constant ``value`` rounded to ``dtype``."""
    name = _dtype_name(dtype)
    with np.errstate(all="ignore"):  # 1e300 in float32 is inf, as numpy rounds it too
        v = float(np.asarray(value, dtype=name))
    if math.isnan(v):
        fn, bits = _SPECIAL[name]
        return f"{fn}({bits['nan']})"
    if math.isinf(v):
        fn, bits = _SPECIAL[name]
        text = f"{fn}({bits['inf']})"
        return text if v > 0 else f"(-{text})"
    # repr round-trips the double exactly; for float32 that double is the float32 value itself
    return f"T({v!r})"


def used_inputs(program: Program) -> tuple:
    """The input registers the program reads (instructions or outputs), in order: only these travel."""
    n = len(program.variables)
    used = {a for ins in program.instructions for a in ins.args if isinstance(a, int) and a < n}
    used.update(o for o in program.outputs if isinstance(o, int) and o < n)
    return tuple(sorted(used))


def kernel_source(program: Program, dtype=np.float64) -> KernelSource:
    """The fused kernel of ``program`` for ``dtype`` (float32 or float64): parameters, body and name.

    The body is single assignment: ``T r<i> = <template>;`` for instruction i, then ``y<j> = ...;`` for
    output j (a local, an input, or a constant).
    """
    _dtype_name(dtype)
    n = len(program.variables)
    where: dict = {k: f"x{k}" for k in range(n)}  # register -> the name holding its current value

    def arg(a):
        if isinstance(a, int):
            return where[a]
        return literal(a, dtype)

    lines = []
    for i, ins in enumerate(program.instructions):
        template = PRIMITIVES[ins.op].cuda
        if template is None:  # pragma: no cover - a test walks the table
            raise ValueError(f"primitive {ins.op!r} has no CUDA template")
        local = f"r{i}"
        lines.append(f"T {local} = {template.format(*(arg(a) for a in ins.args))};")
        where[ins.out] = local
    for j, o in enumerate(program.outputs):
        lines.append(f"y{j} = {arg(o)};")
    body = "\n".join(lines)
    in_params = ", ".join(f"T x{k}" for k in used_inputs(program))
    out_params = ", ".join(f"T y{j}" for j in range(len(program.outputs)))
    digest = hashlib.sha256(f"{in_params}|{out_params}|{body}".encode()).hexdigest()[:16]
    return KernelSource(in_params, out_params, body, f"gradcli_k{digest}")


# Compiled kernels, found by the program's identity (hashing a long program on every call would cost
# more than launching a small kernel), and shared by equal sources (a program compiled twice).
_BY_PROGRAM: dict = {}  # id(program) -> (weak reference, {dtype: (kernel, used inputs)})
_BY_SOURCE: dict = {}  # (dtype, KernelSource) -> ElementwiseKernel


def _compiled(program: Program, dtype_name: str, make=None):
    """-> (kernel, used inputs), compiled once; ``make(source)`` builds a kernel (default: CuPy's)."""
    key = id(program)
    entry = _BY_PROGRAM.get(key)
    if entry is None or entry[0]() is not program:
        entry = (weakref.ref(program, lambda _, key=key: _BY_PROGRAM.pop(key, None)), {})
        _BY_PROGRAM[key] = entry
    found = entry[1].get(dtype_name)
    if found is None:
        if make is None:
            import cupy

            make = _elementwise_kernel(cupy)
        source = kernel_source(program, dtype_name)
        kernel = _BY_SOURCE.get((dtype_name, source))
        if kernel is None:
            if len(_BY_SOURCE) >= 256:  # bounded: a long-lived process may compile many programs
                _BY_SOURCE.clear()
            kernel = _BY_SOURCE[dtype_name, source] = make(source)
        found = entry[1][dtype_name] = (kernel, used_inputs(program))
    return found


def _elementwise_kernel(cupy):
    return lambda source: cupy.ElementwiseKernel(*source)


def execute(program: Program, inputs: dict, dtype=np.float64):
    """All outputs of ``program`` at the points ``inputs`` (name -> array, numpy or CuPy), computed on
    the current CUDA device by one kernel launch -> ``cupy.ndarray`` of shape ``(n_outputs, N)``.

    The result stays on the device: the caller copies it back (``.get()``) when and if it needs to.
    The kernel is compiled once per program and dtype (CuPy also caches the binary on disk).
    """
    import cupy

    name = _dtype_name(dtype)
    kernel, used = _compiled(program, name)
    return launch(program, inputs, name, cupy, kernel, used)


def launch(program: Program, inputs: dict, dtype, xp, kernel, used: tuple | None = None):
    """Transfer what the program reads, allocate the outputs, call ``kernel(*inputs, *outputs)`` once.

    ``xp`` is the array namespace (CuPy; numpy in the CPU tests, with an interpreter of the generated
    source standing in for the compiled kernel), ``kernel`` an ElementwiseKernel of ``kernel_source``,
    ``used`` the program's ``used_inputs`` (computed when not given).
    """
    dtype = np.dtype(_dtype_name(dtype))
    if used is None:
        used = used_inputs(program)
    # the shape comes from every input's metadata; only the inputs that are read are copied
    shape = tuple(np.broadcast_shapes(*(np.shape(inputs[v]) for v in program.variables)))
    args = [_to_device(xp, inputs[program.variables[k]], dtype) for k in used]
    out = xp.empty((len(program.outputs),) + shape, dtype=dtype)
    kernel(*args, *(out[j, ...] for j in range(len(program.outputs))))  # row views, also for 0-d
    return out


def _to_device(xp, value, dtype):
    # A float array travels as it is and is cast on the device: numpy's cast on the host is
    # single-threaded and slower than the extra bytes over the bus. Anything else that is not on the
    # device yet (lists, integer arrays) is converted on the host.
    if not hasattr(value, "dtype") or (isinstance(value, np.ndarray) and value.dtype.kind != "f"):
        value = np.asarray(value, dtype=dtype)
    return xp.asarray(value).astype(dtype, copy=False)
