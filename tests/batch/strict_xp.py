"""A numpy namespace whose arrays stay on a pretend device, as CuPy's do, for running the batch pipeline
on the CPU with every implicit copy to the host refused.

CuPy refuses ``numpy.asarray`` of a device array ("Implicit conversion to a NumPy array is not allowed")
and refuses host arrays in its functions ("Unsupported type <class 'numpy.ndarray'>"). It allows
``bool()``, ``float()``, ``int()``, ``.item()`` and ``.tolist()``, but each of those copies a value back
and waits for the device, so here they are refused as well: a batch chunk may take its statistics to the
host only through the explicit ``.get()`` / ``xp.asnumpy``, which are counted (:attr:`Namespace.transfers`).
Operations whose result has a size only the data knows (a boolean mask as an index, ``nonzero``,
``flatnonzero``) also wait for the device in CuPy; they are counted in :attr:`Namespace.waits`.

What CuPy has not, this has not either: ``errstate`` and its relatives (numpy's own ``np.errstate``
still governs the arithmetic underneath, as it is what the pipeline uses). Like CuPy's, these arrays
implement numpy's dispatch protocols, so ``np.where(a, ...)`` and ``np.isfinite(a)`` on one stay on
the device; and they are not ``numpy.ndarray``, so ``isinstance(a, np.ndarray)`` is False, as on a GPU.
"""
from __future__ import annotations

import numbers
import sys
import types

import numpy as np

IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy "
            "array explicitly.")


class HostConversion(TypeError):
    """A device array was converted to a host value without ``.get()``."""


def _waits_for_device(what: str) -> HostConversion:
    return HostConversion(f"{what} of a device array copies it to the host and waits for the device (CuPy "
                          "does it silently); take what the host needs with .get() or xp.asnumpy")


#: Array methods that stay on the device (the rest of numpy's, tolist and item above all, do not exist here).
METHODS = frozenset("""
    all any argmax argmin argpartition argsort astype clip conj conjugate copy cumprod cumsum diagonal dot fill
    flatten max mean min nonzero partition prod ravel repeat reshape round searchsorted sort squeeze std sum
    swapaxes take trace transpose var view
""".split())
#: What CuPy does not have (numpy's error state is the caller's to set, with numpy).
MISSING = frozenset({"errstate", "seterr", "geterr", "seterrcall", "geterrcall", "vectorize", "frompyfunc"})
#: Functions that read host data onto the device.
CONSTRUCTORS = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})
#: Functions whose result's size depends on the data: CuPy waits for the device to learn it.
DATA_SIZED = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract"})
_SCALARS = (numbers.Number, np.generic)


class StrictArray:
    """A device array: numpy underneath, reachable from the host only through :meth:`get`."""

    __slots__ = ("_a", "_ns")
    __hash__ = None

    def __init__(self, a: np.ndarray, ns: "Namespace"):
        self._a, self._ns = a, ns

    # --- what CuPy refuses, or does only by waiting for the device ---------------------------------------
    def __array__(self, dtype=None, copy=None):
        self._ns.refuse(HostConversion(IMPLICIT))
        return self._a if dtype is None else self._a.astype(dtype)

    def __bool__(self):
        self._ns.refuse(_waits_for_device("bool()"))
        return bool(self._a)

    def __float__(self):
        self._ns.refuse(_waits_for_device("float()"))
        return float(self._a)

    def __int__(self):
        self._ns.refuse(_waits_for_device("int()"))
        return int(self._a)

    def __index__(self):
        self._ns.refuse(_waits_for_device("Use as an index (__index__)"))
        return self._a.__index__()

    def __complex__(self):
        self._ns.refuse(_waits_for_device("complex()"))
        return complex(self._a)

    def tolist(self):
        self._ns.refuse(_waits_for_device(".tolist()"))
        return self._a.tolist()

    def item(self, *args):
        self._ns.refuse(_waits_for_device(".item()"))
        return self._a.item(*args)

    def get(self) -> np.ndarray:
        """The explicit copy to the host (CuPy's ``ndarray.get``)."""
        return self._ns.asnumpy(self)

    # --- on the device -----------------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    dtype = property(lambda self: self._a.dtype)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    T = property(lambda self: self._ns.wrap(self._a.T))
    real = property(lambda self: self._ns.wrap(self._a.real))
    imag = property(lambda self: self._ns.wrap(self._a.imag))

    def __len__(self):
        return len(self._a)

    def __iter__(self):  # CuPy yields device views, one per row
        return (self._ns.wrap(row) for row in self._a)

    def __repr__(self):
        return f"StrictArray(shape={self.shape}, dtype={self.dtype})"

    def __getattr__(self, name):
        if name not in METHODS:
            raise AttributeError(f"a device array has no {name!r} here (it would reach the host, or CuPy "
                                 "lacks it)")
        method = getattr(self._a, name)
        ns = self._ns

        def call(*args, **kwargs):
            if name == "nonzero":
                ns.wait(name)
            return ns.wrap(method(*ns.unwrap(args), **ns.unwrap(kwargs)))
        return call

    def __getitem__(self, key):
        key = self._ns.unwrap_index(key)
        return self._ns.wrap(self._a[key])

    def __setitem__(self, key, value):
        self._a[self._ns.unwrap_index(key)] = self._ns.unwrap(value, host_ok=True)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        ns = self._ns
        out = kwargs.get("out")
        raw = getattr(ufunc, method)(*ns.unwrap(inputs), **ns.unwrap(kwargs))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return ns.wrap(raw)

    def __array_function__(self, func, types_, args, kwargs):
        mine = self._ns.function(func.__name__) if getattr(np, func.__name__, None) is func else None
        return NotImplemented if mine is None else mine(*args, **kwargs)


def _operator(ufunc, reflected=False, inplace=False):
    def op(self, other):
        if not isinstance(other, (StrictArray, np.ndarray, *_SCALARS)):
            return NotImplemented
        if inplace:
            return ufunc(self, other, out=(self,))
        return ufunc(other, self) if reflected else ufunc(self, other)
    return op


for _name, _uf in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                   "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
                   "or": np.bitwise_or, "xor": np.bitwise_xor}.items():
    setattr(StrictArray, f"__{_name}__", _operator(_uf))
    setattr(StrictArray, f"__r{_name}__", _operator(_uf, reflected=True))
    setattr(StrictArray, f"__i{_name}__", _operator(_uf, inplace=True))
for _name, _uf in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                   "ge": np.greater_equal}.items():
    setattr(StrictArray, f"__{_name}__", _operator(_uf))
StrictArray.__neg__ = lambda self: np.negative(self)
StrictArray.__pos__ = lambda self: np.positive(self)
StrictArray.__abs__ = lambda self: np.absolute(self)
StrictArray.__invert__ = lambda self: np.invert(self)


class _Ufunc:
    """A numpy ufunc over device arrays, with its methods (reduce, accumulate, outer, at)."""

    def __init__(self, ufunc, ns):
        self._u, self._ns = ufunc, ns
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        out = kwargs.get("out")
        raw = self._u(*self._ns.unwrap(args), **self._ns.unwrap(kwargs))
        return (out[0] if isinstance(out, tuple) and len(out) == 1 else out) if out is not None else self._ns.wrap(raw)

    def __getattr__(self, name):
        attr = getattr(self._u, name)
        if name in ("reduce", "accumulate", "outer", "at", "reduceat"):
            return lambda *a, **k: self._ns.wrap(attr(*self._ns.unwrap(a), **self._ns.unwrap(k)))
        return attr


class Namespace:
    """The module-like namespace: numpy's functions over :class:`StrictArray`, plus CuPy's ``asnumpy``.
    ``transfers`` lists the bytes of every explicit copy to the host; ``waits`` every operation that
    waits for the device to learn a result's size."""

    __name__ = "strict_xp"

    def __init__(self, tolerate=()):
        self.transfers: list = []
        self.waits: list = []
        #: source files whose conversions are recorded in ``tolerated`` ("file:line function: what") and
        #: let through, not raised: code under rework elsewhere, so that the rest can still be checked
        self.tolerate = tuple(tolerate)
        self.tolerated: list = []
        self.ndarray = StrictArray
        self._cache: dict = {}

    def reset(self) -> None:
        self.transfers.clear()
        self.waits.clear()
        self.tolerated.clear()

    def refuse(self, error: HostConversion) -> None:
        """Raise ``error``, unless the conversion happens in a file of :attr:`tolerate`: then record it."""
        where = _caller()
        if not any(where.split(":")[0].endswith(t) for t in self.tolerate):
            raise error
        self.tolerated.append(f"{where}: {str(error).split(' of a')[0]}")

    def wait(self, what: str) -> None:
        """Record an operation that waits for the device (in :attr:`tolerate`'s files: as tolerated)."""
        where = _caller()
        tolerated = any(where.split(":")[0].endswith(t) for t in self.tolerate)
        (self.tolerated if tolerated else self.waits).append(f"{where}: {what}")

    # --- between host and device -------------------------------------------------------------------------
    def asnumpy(self, a) -> np.ndarray:
        if isinstance(a, StrictArray):
            self.transfers.append(a._a.nbytes)
            return a._a.copy()
        return np.asarray(a)

    def wrap(self, x):
        if isinstance(x, np.ndarray):
            return StrictArray(x, self)
        if isinstance(x, np.generic):
            return StrictArray(np.asarray(x), self)
        if isinstance(x, tuple):
            return tuple(self.wrap(v) for v in x)
        if isinstance(x, list):
            return [self.wrap(v) for v in x]
        return x

    def unwrap(self, x, host_ok: bool = False):
        """Device arrays to their numpy arrays; a host array where a device one is expected is refused,
        as CuPy refuses it."""
        if isinstance(x, StrictArray):
            return x._a
        if isinstance(x, np.ndarray):
            # a 0-d array is how numpy hands its own scalars on (np.float64(2) == a): a number, not data
            if not (host_ok or x.ndim == 0):
                self.refuse(HostConversion(f"Unsupported type {type(x)}: a host array among device arrays"))
            return x
        if isinstance(x, (tuple, list)):
            return type(x)(self.unwrap(v, host_ok) for v in x)
        if isinstance(x, dict):
            return {k: self.unwrap(v, host_ok) for k, v in x.items()}
        return x

    def unwrap_index(self, key):
        """An index: device arrays, host arrays (CuPy copies them over), ints, slices. A boolean device
        array gives a result of data-dependent size: CuPy waits for the device to count it."""
        parts = key if isinstance(key, tuple) else (key,)
        for p in parts:
            if isinstance(p, StrictArray) and p.dtype == bool and p.ndim:
                self.wait("boolean mask index")
        raw = tuple(self.unwrap(p, host_ok=True) for p in parts)
        return raw if isinstance(key, tuple) else raw[0]

    # --- numpy's names -------------------------------------------------------------------------------------
    def function(self, name: str):
        """numpy's function ``name`` over device arrays, or None where CuPy has none."""
        if name in MISSING:
            return None
        if name not in self._cache:
            self._cache[name] = self._make(name)
        return self._cache[name]

    def _make(self, name):
        fn = getattr(np, name)
        if isinstance(fn, np.ufunc):
            return _Ufunc(fn, self)

        def call(*args, **kwargs):
            if name in DATA_SIZED or (name == "where" and len(args) == 1):
                self.wait(name)
            return self.wrap(fn(*self.unwrap(args, host_ok=name in CONSTRUCTORS), **self.unwrap(kwargs)))
        call.__name__ = name
        return call

    def __getattr__(self, name):
        if name.startswith("__") or name in MISSING:
            raise AttributeError(f"CuPy has no {name!r}: the batch pipeline must not need it from xp")
        value = getattr(np, name)
        if isinstance(value, (type, types.ModuleType, numbers.Number)) or value is None:
            return value  # dtypes (cupy.float64 is numpy's), finfo, constants (nan, inf, newaxis)
        if name in ("finfo", "iinfo", "dtype", "result_type", "can_cast", "promote_types", "isscalar"):
            return lambda *a, **k: value(*self.unwrap(a, host_ok=True), **k)
        return self.function(name)


def _caller() -> str:
    """``file:line function`` of the code outside this module and numpy that called into it."""
    frame = sys._getframe(1)
    numpy_dir = np.__file__.rsplit("/", 1)[0]
    while frame is not None and (frame.f_code.co_filename == __file__
                                 or frame.f_code.co_filename.startswith(numpy_dir)):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}" if frame is not None else "?"


xp = Namespace()
