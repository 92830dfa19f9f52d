"""``Traced``: an ndarray value plus a node on a tape, and the dispatch of every numpy call on it.

numpy hands every ufunc call to ``__array_ufunc__`` and every other public function to
``__array_function__``; operators, indexing and array methods are forwarded to the same numpy calls,
so all of them meet the one routing table (:mod:`gradcli.trace.routing`). What the table does not know
is *not traceable*: it is computed on plain values, returned untraced and recorded as a problem, so
the user's code keeps running and the check can fall back to numerics. Conversions that leave the
trace silently (``np.asarray``, ``float()``, ``.item()``) return plain values and are recorded as cuts;
conversions to an integer dtype (``int()``, ``np.int64(x)``) carry no derivative and cut nothing.
"""
from __future__ import annotations


import numpy as np

from gradcli.trace.tape import Tape, cut_name, user_frame


#: numpy callable -> Route (see gradcli.trace.routing, which fills it: the rules it holds are built on
#: this module, so the table is handed down rather than imported up)
ROUTES: dict = {}

_IN_PLACE = {"fill", "sort", "partition", "put", "resize", "setfield", "itemset", "byteswap"}


class NotTraceable(Exception):
    """Raised by a rule for a call it cannot differentiate (an option, an argument kind)."""


class Traced:
    """A numpy value recorded on a tape. Use it as an ndarray; gradcli reads the tape afterwards."""

    __slots__ = ("_value", "_node", "_tape")

    def __init__(self, value, node: int, tape: Tape):
        self._value = value
        self._node = node
        self._tape = tape

    # --- numpy protocols ------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        key = ufunc if method == "__call__" else (ufunc, method)
        out = kwargs.pop("out", None)
        if out is None or method != "__call__":
            if out is not None:
                kwargs["out"] = out
            return dispatch(key, getattr(ufunc, method), inputs, kwargs, name)
        out = out if isinstance(out, tuple) else (out,)
        if len(out) != 1 or out[0] is None:
            return dispatch(None, ufunc, inputs, dict(kwargs, out=out), name)
        res = dispatch(key, ufunc, inputs, kwargs, name)
        return write_into(out[0], res, in_place=out[0] is inputs[0])

    def __array_function__(self, func, types, args, kwargs):
        mod = func.__module__ or "numpy"
        mod = "np" + mod[len("numpy"):] if mod.startswith("numpy") else mod
        mod = mod.replace("._core", "").replace(".core", "").replace("._linalg", ".linalg")
        return dispatch(func, func, args, kwargs, f"{mod}.{func.__name__}")

    def __array__(self, dtype=None, copy=None):
        if dtype is None or np.dtype(dtype).kind not in "biu":  # integers: piecewise constant, no cut
            file, line = user_frame()
            self._tape.problem("cut", cut_name(file, line))
        v = self._value if dtype is None else self._value.astype(dtype)
        return v.copy() if copy else v

    def _cut(self, call, convert):
        self._tape.problem("cut", call)
        return convert(self._value)

    def __float__(self): return self._cut("float()", float)
    def __int__(self): return int(self._value)  # as astype(int): piecewise constant, zero derivative
    def __complex__(self): return self._cut("complex()", complex)
    def item(self, *args): return self._cut("x.item()", lambda v: v.item(*args))
    def tolist(self): return self._cut("x.tolist()", lambda v: v.tolist())

    # control flow and printing read the value without cutting anything: the result is not a number
    def __bool__(self): return bool(self._value)
    def __len__(self): return len(self._value)
    def __iter__(self): return (self[i] for i in range(len(self._value)))
    def __repr__(self): return f"Traced({self._value!r})"
    def __format__(self, spec): return format(self._value, spec)

    # --- attributes -------------------------------------------------------------------------------------
    shape = property(lambda self: self._value.shape)
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    T = property(lambda self: np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))
    real = property(lambda self: np.real(self))
    imag = property(lambda self: np.imag(self))

    def __getattr__(self, name):
        # ndarray attributes the class does not route: data attributes pass through, methods are
        # computed on the plain value and recorded as not traceable
        if name.startswith("_") or not hasattr(np.ndarray, name):
            raise AttributeError(name)
        attr = getattr(self._value, name)
        if not callable(attr):
            return attr

        def method(*args, **kwargs):
            self._tape.problem("untraceable", f"ndarray.{name}")
            if name in _IN_PLACE:  # on a copy: the tape's saved values must not change under it
                value = self._value.copy()
                out = getattr(value, name)(*unwrap(args), **unwrap(kwargs))
                self._rebind(value)
                return out
            return attr(*unwrap(args), **unwrap(kwargs))

        return method

    # --- operators: the numpy calls behind them, so the routing table sees everything -------------------
    def __add__(self, o): return np.add(self, o)
    def __radd__(self, o): return np.add(o, self)
    def __sub__(self, o): return np.subtract(self, o)
    def __rsub__(self, o): return np.subtract(o, self)
    def __mul__(self, o): return np.multiply(self, o)
    def __rmul__(self, o): return np.multiply(o, self)
    def __truediv__(self, o): return np.true_divide(self, o)
    def __rtruediv__(self, o): return np.true_divide(o, self)
    def __floordiv__(self, o): return np.floor_divide(self, o)
    def __rfloordiv__(self, o): return np.floor_divide(o, self)
    def __mod__(self, o): return np.remainder(self, o)
    def __rmod__(self, o): return np.remainder(o, self)
    def __rpow__(self, o): return np.power(o, self)
    def __matmul__(self, o): return np.matmul(self, o)
    def __rmatmul__(self, o): return np.matmul(o, self)
    def __neg__(self): return np.negative(self)
    def __pos__(self): return np.positive(self)
    def __abs__(self): return np.absolute(self)
    def __lt__(self, o): return np.less(self, o)
    def __le__(self, o): return np.less_equal(self, o)
    def __gt__(self, o): return np.greater(self, o)
    def __ge__(self, o): return np.greater_equal(self, o)
    def __eq__(self, o): return np.equal(self, o)
    def __ne__(self, o): return np.not_equal(self, o)
    __hash__ = None

    def __pow__(self, o):
        # ndarray ** scalar takes these shortcuts; taking them too keeps the traced value bit-identical
        if np.isscalar(o) and self._value.dtype.kind in "fc":
            fast = {2: np.square, 0.5: np.sqrt, 1: np.positive, -1: np.reciprocal}.get(o)
            if fast is not None:
                return fast(self)
        return np.power(self, o)

    def __getitem__(self, key):
        return getitem(self, key)

    def __setitem__(self, key, v):
        # functional update: the array object is rebound to a new node, earlier uses keep the old one
        self._rebind(setitem(self, key, v))

    def _rebind(self, res):
        if not isinstance(res, Traced):
            value = np.asarray(res)
            res = Traced(value, self._tape.add((), None, None, value.shape, value.dtype), self._tape)
        self._value, self._node = res._value, res._node

    # --- methods: numpy functions with the array first ---------------------------------------------------
    def reshape(self, *shape, order="C"):
        return np.reshape(self, shape[0] if len(shape) == 1 else shape, order=order)

    def transpose(self, *axes):
        return np.transpose(self, (axes[0] if len(axes) == 1 else axes) or None)

    def flatten(self, order="C"): return np.reshape(self, -1, order=order)
    def copy(self, order="C"): return np.copy(self)
    def conj(self): return np.conjugate(self)
    conjugate = conj

    def astype(self, dtype, copy=True, **kwargs):
        return astype(self, np.dtype(dtype))


def _method(func):
    def method(self, *args, **kwargs):
        return func(self, *args, **kwargs)

    method.__name__ = func.__name__
    return method


for _name, _func in {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min, "var": np.var,
    "std": np.std, "argmax": np.argmax, "argmin": np.argmin, "argsort": np.argsort, "ravel": np.ravel,
    "squeeze": np.squeeze, "swapaxes": np.swapaxes, "dot": np.dot, "clip": np.clip, "repeat": np.repeat,
    "cumsum": np.cumsum, "all": np.all, "any": np.any, "round": np.round, "nonzero": np.nonzero,
    "diagonal": np.diagonal, "take": np.take, "trace": np.trace, "cumprod": np.cumprod,
}.items():
    setattr(Traced, _name, _method(_func))


# --- helpers shared by the rules ----------------------------------------------------------------------
def value_of(x):
    return x._value if isinstance(x, Traced) else x


def rebuild(seq, items):
    """A list or tuple of the same type as ``seq`` holding ``items``: numpy's named tuples
    (``SlogdetResult``, ``EighResult``, ``SVDResult``...) take their fields as arguments, not an iterable."""
    items = list(items)
    return type(seq)(*items) if hasattr(seq, "_fields") else type(seq)(items)


def unwrap(obj):
    """The same structure with every Traced replaced by its plain value (lists, tuples, dicts)."""
    if isinstance(obj, Traced):
        return obj._value
    if isinstance(obj, (list, tuple)):
        return rebuild(obj, (unwrap(o) for o in obj))
    if isinstance(obj, dict):
        return {k: unwrap(v) for k, v in obj.items()}
    return obj


def find_tape(obj):
    if isinstance(obj, Traced):
        return obj._tape
    if isinstance(obj, (list, tuple)):
        for o in obj:
            t = find_tape(o)
            if t is not None:
                return t
    if isinstance(obj, dict):
        return find_tape(list(obj.values()))
    return None


def record(value, parents, jvp, vjp):
    """Append a node for ``value`` computed from the Traced ``parents``; return it traced."""
    tape = parents[0]._tape
    value = np.asarray(value)
    return Traced(value, tape.add([p._node for p in parents], jvp, vjp, value.shape, value.dtype), tape)


def lift(tape, obj):
    """Swap plain arrays that hold traced values (written by np.add.at or out=) for those values."""
    if isinstance(obj, np.ndarray):
        entry = tape.shadows.get(id(obj))
        if entry is None or entry[0] is not obj:
            return obj
        _, traced, pending = entry
        if not np.array_equal(obj, traced._value, equal_nan=True):
            del tape.shadows[id(obj)]  # written since: the plain contents are what the user means
            if pending is None:
                tape.problem("cut", "a plain array written after an in-place traced update")
            return obj
        if pending is not None and pending in tape.problems:
            tape.problems.remove(pending)  # the traced value is used after all
            tape.shadows[id(obj)] = (obj, traced, None)
        return traced
    if isinstance(obj, (list, tuple)):
        return rebuild(obj, (lift(tape, o) for o in obj))
    if isinstance(obj, dict):
        return {k: lift(tape, v) for k, v in obj.items()}
    return obj


def write_into(target, res, in_place=False, call="out="):
    """Store ``res`` in ``target`` (a ufunc ``out=`` or an np.add.at array) and return what to use."""
    if isinstance(target, Traced):
        target._rebind(res)
        return target
    target[...] = value_of(res)
    if isinstance(res, Traced):
        tape = res._tape
        # ``buf += x`` rebinds the name to the result, so only a separate buffer can lose the trace
        pending = None if in_place else tape.problem("cut", f"{call} into a plain ndarray")
        tape.shadows[id(target)] = (target, res, pending)
    return res


def dispatch(key, func, args, kwargs, name):
    tape = find_tape((args, kwargs))
    if tape is None:  # only an out= buffer was traced: a constant result
        return func(*args, **kwargs)
    if tape.shadows:
        args, kwargs = lift(tape, args), lift(tape, kwargs)
    route = ROUTES.get(key) if key is not None else None
    if route is not None and route.impl is not None:  # differentiable, or a constant with conditions
        try:
            return route.impl(*args, **kwargs)
        except NotTraceable as e:
            name = f"{name} ({e})"
    elif route is not None and route.kind in ("passthrough", "constant"):
        return func(*unwrap(args), **unwrap(kwargs))
    tape.problem("untraceable", name)
    return func(*unwrap(args), **unwrap(kwargs))


# --- indexing and casts: gathers, which any Traced needs -------------------------------------------
def gather(value, operands, index):
    """A node whose elements are copies of operands' elements or constants.

    ``operands``: the Traced operands; ``index``: flat element numbers into their concatenation, -1 for
    a constant. The jvp reads tangents there, the vjp sums adjoints back with bincount."""
    sizes = [o.size for o in operands]
    shapes = [o.shape for o in operands]
    total = sum(sizes)
    flat = np.where(index < 0, total, index).ravel()  # element `total` is the constant 0

    def jvp(ts):
        parts = [np.ravel(t) if t is not None else np.zeros(n, value.dtype) for t, n in zip(ts, sizes)]
        vec = np.concatenate(parts + [np.zeros(1, parts[0].dtype)])
        return vec[flat].reshape(index.shape)

    def vjp(g):
        g = np.ravel(g)
        if np.iscomplexobj(g):
            acc = (np.bincount(flat, g.real, total + 1) + 1j * np.bincount(flat, g.imag, total + 1))
        else:
            acc = np.bincount(flat, g, total + 1)
        acc = acc[:total].astype(g.dtype, copy=False)
        bounds = np.cumsum([0] + sizes)
        return [acc[bounds[k]: bounds[k + 1]].reshape(shapes[k]) for k in range(len(operands))]

    return record(value, operands, jvp, vjp)


def plain_key(key):
    if isinstance(key, Traced):
        return key._value
    if isinstance(key, tuple):
        return tuple(plain_key(k) for k in key)
    return key


def getitem(x, key):
    key = plain_key(key)
    value = x._value[key]
    index = np.arange(x.size).reshape(x.shape)[key]
    return gather(np.asarray(value), [x], np.asarray(index))


def setitem(x, key, v):
    key = plain_key(key)
    value = x._value.copy()
    value[key] = value_of(v)
    operands = [x] + ([v] if isinstance(v, Traced) and v is not x else [])
    index = np.arange(1, x.size + 1).reshape(x.shape)
    index[key] = np.arange(x.size + 1, x.size + 1 + v.size).reshape(v.shape) if len(operands) > 1 else 0
    return gather(value, operands, index - 1)


def astype(a, dtype):
    if dtype.kind in "biu":  # int, bool: a constant (floor-like), derivative zero almost everywhere
        return a._value.astype(dtype)
    if dtype.kind not in "fc":  # object, strings, dates: numbers leave the trace
        return a._cut(f"x.astype({dtype})", lambda v: v.astype(dtype))
    src = a.dtype
    return record(a._value.astype(dtype), [a], lambda ts: ts[0].astype(dtype), lambda g: [g.astype(src)])
