"""Elementwise functions, reductions and contractions: the gradient tests of HIPS autograd's own suite
(test_systematic, test_scalar_ops, test_numpy, test_complex) as autodiff-only checks. Every case has
no hand-written gradient, so gradcli compares its traced AD of plain numpy code with its numerics;
the values and shapes are this file's own. Inputs stay inside each function's domain, away from the
kinks and jumps where no derivative exists."""
import operator as op

import numpy as np

import gradcli
from suite_helpers import named, parts


def case(name, fn, **spec):
    gradcli.check(**spec)(named(fn, name))


# --- unary ufuncs: a scalar (scaled, as in the scalar-op tests) and a matrix ------------------------
#: name -> (function, domain); None is the whole real line
UNARY = {
    "sin": (np.sin, None), "cos": (np.cos, None), "tan": (np.tan, (-1.1, 1.1)),
    "arcsin": (np.arcsin, "unit"), "arccos": (np.arccos, "unit"), "arctan": (np.arctan, None),
    "sinh": (np.sinh, None), "cosh": (np.cosh, None), "tanh": (np.tanh, None),
    "arcsinh": (np.arcsinh, None), "arccosh": (np.arccosh, (1.1, 4.0)), "arctanh": (np.arctanh, "unit"),
    "exp": (np.exp, None), "exp2": (np.exp2, None), "expm1": (np.expm1, None),
    "log": (np.log, (0.2, 2.0)), "log2": (np.log2, (0.2, 2.0)), "log10": (np.log10, (0.2, 2.0)),
    "log1p": (np.log1p, (0.2, 2.0)), "sqrt": (np.sqrt, (1.0, 3.0)), "cbrt": (np.cbrt, (0.5, 3.0)),
    "square": (np.square, None), "reciprocal": (np.reciprocal, (0.5, 2.0)),
    "negative": (np.negative, None), "positive": (np.positive, None),
    "abs": (np.abs, (0.1, 4.0)), "absolute": (np.absolute, (0.1, 4.0)), "fabs": (np.fabs, (0.1, 4.0)),
    "abs_negative": (np.abs, (-4.0, -0.1)), "fabs_negative": (np.fabs, (-4.0, -0.1)),
    "deg2rad": (np.deg2rad, None), "radians": (np.radians, None),
    "rad2deg": (lambda x: np.rad2deg(x) / 50.0, None), "degrees": (lambda x: np.degrees(x) / 50.0, None),
    "sinc": (np.sinc, (0.2, 3.0)), "sinc_negative": (np.sinc, (-3.0, -0.2)),
    "sign": (np.sign, (0.2, 2.0)), "floor": (np.floor, (0.1, 0.9)), "ceil": (np.ceil, (-0.9, -0.1)),
    "real": (np.real, None), "imag": (np.imag, None), "conj": (np.conj, None),
    "conjugate": (np.conjugate, None), "angle": (np.angle, (0.2, 2.0)),
}


def scaled(f):
    return lambda x: 3.0 * f(x)


def plain(f):
    return lambda x: f(x)


def complex_parts(f):
    return lambda x, y: parts(f(x + 0.1j * y))


def point(domain):
    """A scalar inside ``domain``, off its centre (a 0-d shape with a domain is the known case below)."""
    low, high = {None: (-2.0, 2.0), "unit": (-0.9, 0.9), "positive": (0.1, 4.0)}.get(domain, domain)
    return low + 0.61 * (high - low)


for name, (f, domain) in UNARY.items():
    opts = {} if domain is None else {"domain": domain}
    case(f"{name}_scalar", scaled(f), x=point(domain), order=2)  # the scalar-op tests take d/dx of the gradient
    case(f"{name}_matrix", plain(f), x=(3, 2), **opts)
# a 0-d shape with a domain: drawn as a 0-d array (numpy's ufuncs would hand back a scalar, which the
# finite-difference steps could not move)
case("log_scalar_shape_with_domain", lambda x: 3.0 * np.log(x), x=(), domain=(0.2, 2.0))
case("sin_scalar_shape_with_domain", lambda x: 3.0 * np.sin(x), x=(), domain="unit")
case("real_if_close", lambda x: np.real_if_close(x * (1.0 + 0j)), x=(3, 2))


# --- the same functions of complex intermediates, from real inputs (z = x + 0.1j y) ----------------
#: name -> (function, domain of x); y is standard normal
COMPLEX_UNARY = {
    "sin": (np.sin, None), "cos": (np.cos, None), "tan": (np.tan, (-1.1, 1.1)),
    "sinh": (np.sinh, None), "cosh": (np.cosh, None), "tanh": (np.tanh, None),
    "arcsinh": (np.arcsinh, "unit"), "arccosh": (np.arccosh, (1.1, 4.0)), "arctanh": (np.arctanh, "unit"),
    "exp": (np.exp, None), "exp2": (np.exp2, None), "expm1": (np.expm1, None),
    "log": (np.log, (0.2, 2.0)), "log2": (np.log2, (0.2, 2.0)), "log10": (np.log10, (0.2, 2.0)),
    "log1p": (np.log1p, (0.2, 2.0)), "sqrt": (np.sqrt, (1.0, 3.0)), "square": (np.square, None),
    "reciprocal": (np.reciprocal, (0.5, 2.0)), "negative": (np.negative, None),
    "conj": (np.conj, None), "real": (np.real, None), "imag": (np.imag, None),
    "abs": (np.abs, (0.1, 4.0)), "angle": (np.angle, (0.2, 2.0)),
}


for name, (f, domain) in COMPLEX_UNARY.items():
    opts = {} if domain is None else {"domain": {"x": domain}}
    case(f"complex_{name}", complex_parts(f), x=(3, 2), y=(3, 2), **opts)

case("complex_abs_scalar", lambda a, b: np.abs(a + 1j * b), a=1.1, b=1.2)
case("complex_angle_scalar", lambda a, b: np.angle(a + 1j * b), a=0.4, b=0.7)
case("complex_angle_deg", lambda a, b: np.angle(a + 1j * b, deg=True) / 50.0, a=(3,), b=(3,),
     domain={"a": (0.2, 2.0)})
case("angle_of_real", lambda x: np.angle(x) + x, x=(3,), domain=(0.2, 2.0))
case("complex_abs_squared", lambda a, b: np.abs(a + 1j * b) ** 2, a=(4,), b=(4,))
case("complex_product", lambda a, b: np.real((a + 1j * b) * (b - 2j * a) ** 2), a=(4,), b=(4,))
case("complex_quotient", lambda a, b: np.imag((a + 1j * b) / (2.0 + b + 1j * a)), a=(4,), b=(4,),
     domain=(0.1, 1.0))
case("complex_polar", lambda r, t: np.real(r * np.exp(1j * t)) + np.imag(r * np.exp(1j * t)) ** 2,
     r=(4,), t=(4,), domain={"r": "positive"})
case("complex_conj_product", lambda a, b: np.real((a + 1j * b) * np.conj(a + 1j * b)), a=(4,), b=(4,))
case("complex_sum_mean", lambda a, b: np.abs(np.sum(a + 1j * b, axis=0)) + np.angle(np.mean(a + 1j * b)),
     a=(3, 2), b=(3, 2), domain={"a": (0.2, 2.0)})
case("complex_dot", lambda a, b: np.abs(np.dot(a + 1j * b, b - 1j * a[::-1])), a=(4,), b=(4,))
case("complex_sign", lambda a, b: np.real(np.sign(a + 1j * b)), a=(3,), b=(3,), domain=(0.2, 2.0))


# --- binary ufuncs and operators, with broadcasting -----------------------------------------------
#: name -> (function, domain of the first argument, domain of the second)
BINARY = {
    "add": (np.add, None, None), "subtract": (np.subtract, None, None),
    "multiply": (np.multiply, None, None), "divide": (np.divide, None, (0.3, 2.0)),
    "true_divide": (np.true_divide, None, (0.8, 1.2)), "true_divide_neg": (np.true_divide, None, (-2.0, -0.3)),
    "power": (np.power, (0.7, 2.0), None), "logaddexp": (np.logaddexp, None, None),
    "logaddexp2": (np.logaddexp2, None, None), "maximum": (np.maximum, None, None),
    "minimum": (np.minimum, None, None), "fmax": (np.fmax, None, None), "fmin": (np.fmin, None, None),
    "arctan2": (np.arctan2, None, (0.3, 2.0)), "hypot": (np.hypot, (0.3, 2.0), None),
    # x / y stays strictly between two integers, where mod and remainder are smooth
    "mod": (np.mod, (0.1, 0.6), (0.7, 1.9)), "mod_neg": (np.mod, (0.1, 0.6), (-1.9, -0.7)),
    "remainder": (np.remainder, (-0.6, -0.1), (0.7, 1.9)), "fmod": (np.fmod, (2.2, 2.8), (1.0, 1.05)),
    "op_add": (op.add, None, None), "op_sub": (op.sub, None, None), "op_mul": (op.mul, None, None),
    "op_div": (op.truediv, None, (0.5, 2.0)), "op_pow": (op.pow, (0.7, 2.0), None),
    "op_mod": (op.mod, (2.2, 2.8), (1.0, 1.05)), "op_mod_neg": (op.mod, (0.1, 0.6), (-2.0, -0.7)),
}
#: (suffix, shape of a, shape of b); a () is a scalar value inside a's domain
BROADCASTS = [("same", (3, 2), (3, 2)), ("scalar_left", (), (3, 2)), ("outer", (3, 1), (1, 2))]


def binary(f):
    return lambda a, b: f(a, b)


for name, (f, da, db) in BINARY.items():
    domain = {k: d for k, d in (("a", da), ("b", db)) if d is not None}
    for suffix, sa, sb in BROADCASTS:
        a = point(da) if sa == () else sa
        case(f"{name}_{suffix}", binary(f), a=a, b=sb, **({"domain": domain} if domain else {}))

#: the complex counterparts, each operand built from two real inputs
COMPLEX_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
                  "power": np.power}


def complex_binary(f):
    return lambda a, b, c, d: parts(f(a + 0.1j * b, c + 0.1j * d))


for name, f in COMPLEX_BINARY.items():
    case(f"complex_{name}", complex_binary(f), a=(3, 2), b=(3, 2), c=(1, 2), d=(1, 2),
         domain={"a": (0.7, 2.0), "c": (0.3, 2.0)})

# powers at the edges the scalar-op tests single out: x**0 has derivative 0 even at 0, 0**y has 0 for y > 0
case("power_exponent_zero", lambda x: np.power(x, 0.0) + x, x=[0.0, 1.5, -2.0])
case("power_zero_base", lambda y: np.power(0.0, y) + y, y=(3,), domain=(0.2, 1.0))
case("power_base_constant", lambda y: np.power(1.7, y), y=(3,))
case("power_integer_negative_base", lambda x: x ** 3 - x ** 2, x=[-1.5, -0.3, 0.8])
case("neg_operator", lambda x: 3.0 * -x, x=())
case("python_sum", lambda a, b: sum([a, b]), a=(3, 2), b=(3, 2))

# ties: the maximum of equal arguments is the argument, so each tie shares the derivative
case("max_equal_values", lambda x: np.max(np.array([x, x])), x=1.0)
case("max_equal_values_2d", lambda x: np.max(np.array([[x, x], [x, 0.5]]), axis=1), x=1.0)
case("max_equal_values_2d_below", lambda x: np.max(np.array([[x, x], [x, 0.5]]), axis=1), x=-1.0)
case("min_three_way_equality",
     lambda x: np.min(np.array([[x, x, x], [x, 0.5, 0.5], [0.5, 0.5, 0.5], [x, x, 0.5]]), axis=0), x=1.0)
case("maximum_equal_values", lambda x: np.maximum(x, x), x=1.0)
case("maximum_equal_values_2d",
     lambda x: np.maximum(np.array([x, x, 0.5]), np.array([[x, 0.5, x], [x, x, 0.5]])), x=2.0)


# --- reductions: axis (None, an int, a tuple, a size-1 axis) and keepdims -------------------------
#: name -> (function, domain)
REDUCTIONS = {"sum": (np.sum, None), "mean": (np.mean, None), "prod": (np.prod, (0.3, 1.5)),
              "max": (np.max, None), "min": (np.min, None), "amax": (np.amax, None),
              "amin": (np.amin, None), "var": (np.var, None), "std": (np.std, None)}
#: (suffix, shape, axis, keepdims)
AXES = [("all", (2, 3), None, False), ("axis0_keepdims", (2, 3), 0, True), ("axis1", (2, 3), 1, False),
        ("axis_neg", (2, 3, 2), -1, False), ("axes_tuple_keepdims", (2, 3, 2), (0, 2), True),
        ("vector", (3,), None, False)]


def reduce_with(f, axis, keepdims):
    return lambda x: f(x, axis=axis, keepdims=keepdims)


for name, (f, domain) in REDUCTIONS.items():
    opts = {} if domain is None else {"domain": domain}
    for suffix, shape, axis, keepdims in AXES:
        case(f"{name}_{suffix}", reduce_with(f, axis, keepdims), x=shape, **opts)
    case(f"{name}_of_scalar", lambda x, f=f: f(x) * x, x=3.5)

for name, f in (("var", np.var), ("std", np.std)):
    for ddof in (1, 2):
        case(f"{name}_ddof{ddof}", lambda x, f=f, ddof=ddof: f(x, ddof=ddof), x=(3, 4))
        case(f"{name}_ddof{ddof}_axis1_keepdims", lambda x, f=f, ddof=ddof: f(x, axis=1, ddof=ddof, keepdims=True),
             x=(2, 4))
    # one element per group: identically zero, so its derivative is zero
    case(f"{name}_single_element_groups", lambda x, f=f: f(x, axis=0) + x[0], x=(1, 3))

case("prod_with_a_zero", lambda x: np.prod(x, axis=1), x=[[0.0, 1.5, -2.0], [0.7, 0.0, 0.0]])
case("prod_vector", lambda x: np.prod(x), x=(7,), domain=(0.5, 1.5))
case("add_reduce", lambda x: np.add.reduce(x, axis=1), x=(3, 4))
case("multiply_reduce", lambda x: np.multiply.reduce(x, axis=0), x=(3, 4))
case("maximum_reduce", lambda x: np.maximum.reduce(x, axis=1), x=(3, 4))
case("sum_initial", lambda x: np.sum(x, axis=0, initial=2.0), x=(3, 2))
case("max_initial_below_every_element", lambda x: np.max(x, axis=1, initial=-9.0), x=(3, 2))
# where initial= wins over every element of a group (above them for max, below for min), the result is
# the constant initial and the derivative 0
case("max_initial_above_every_element", lambda x: np.max(x, initial=0.0), x=[-1.0, -2.0, -0.5])
case("min_initial_below_a_row", lambda x: np.min(x, axis=1, initial=0.0), x=[[1.0, 2.0], [-1.0, 3.0]])
case("maximum_reduce_initial_above", lambda x: np.maximum.reduce(x, initial=0.0), x=[-1.0, -2.0])
case("method_sum_mean", lambda x: x.sum(axis=0) * x.mean() + x.max(axis=1).sum() - x.std(), x=(3, 4))


# --- cumulative and differencing ------------------------------------------------------------------
case("cumsum_axis0", lambda x: np.cumsum(x, axis=0), x=(4, 3))
case("cumsum_axis1", lambda x: np.cumsum(x, axis=1), x=(4, 3))
case("cumsum_1d", lambda x: np.cumsum(x), x=(5,))
case("cumsum_no_axis", lambda x: np.cumsum(x), x=(4, 3))
case("cumprod_axis0", lambda x: np.cumprod(x, axis=0), x=(4, 3), domain=(0.5, 1.5))
case("cumprod_no_axis", lambda x: np.cumprod(x), x=(3, 2))
case("add_accumulate", lambda x: np.add.accumulate(x, axis=1), x=(3, 4))
for n in (1, 2):
    for axis in (0, 1):
        case(f"diff_n{n}_axis{axis}", lambda x, n=n, axis=axis: np.diff(x, n=n, axis=axis), x=(4, 5))
    case(f"diff_3d_n{n}", lambda x, n=n: np.diff(x, n=n, axis=1), x=(3, 4, 2))
case("diff_default_axis", lambda x: np.diff(x), x=(3, 4))
case("diff_size1_axis", lambda x: np.diff(x, axis=1) + 0.0, x=(3, 2))
case("gradient_1d", lambda x: np.gradient(x), x=(6,))


# --- contractions: dot, inner, matmul over scalars, vectors, matrices and stacks ------------------
LEFT = {"scalar": 1.5, "vector": (3,), "matrix": (2, 3), "stack": (2, 2, 3)}
RIGHT = {"scalar": 0.3, "vector": (3,), "matrix": (3, 4), "stack": (2, 3, 4)}
for la, sa in LEFT.items():
    for lb, sb in RIGHT.items():
        case(f"dot_{la}_{lb}", lambda a, b: np.dot(a, b), a=sa, b=sb)
        if la != "stack" and lb != "stack":
            ib = (4, 3) if lb == "matrix" else sb
            case(f"inner_{la}_{lb}", lambda a, b: np.inner(a, b), a=sa, b=ib)
        if la != "scalar" and lb != "scalar":
            case(f"matmul_{la}_{lb}", lambda a, b: np.matmul(a, b), a=sa, b=sb)
case("matmul_operator_batched", lambda a, b: a @ b, a=(2, 1, 2, 3), b=(3, 3, 2))
case("dot_method", lambda a, b: a.dot(b), a=(2, 3), b=(3,))
case("outer", lambda a, b: np.outer(a, b), a=(4,), b=(3,))
case("outer_of_matrices", lambda a, b: np.outer(a, b), a=(2, 2), b=(3,))
case("index_dot_slices", lambda x: np.dot(x[:2], x[2:]), x=(4,))

TENSORDOT = [("1", (2, 3, 2), (3, 4, 2), [(1,), (0,)]), ("1_row", (1, 3), (3, 1), [(1,), (0,)]),
             ("2", (3, 4, 2), (2, 3, 2), [(0,), (1,)]), ("3", (2, 3, 4), (2, 2, 3, 4), [(0, 1), (1, 2)]),
             ("3_swapped", (2, 3, 4), (2, 2, 3, 4), [(1, 0), (2, 1)]), ("4_int1", (4, 2, 2), (2, 2, 4), 1),
             ("4_int2", (4, 2, 2), (2, 2, 4), 2), ("5_outer", (4,), (), 0),
             ("6_negative_axis", (2, 6), (6, 3), [[-1], [0]])]
for label, sa, sb, axes in TENSORDOT:
    case(f"tensordot_{label}", lambda a, b, axes=axes: np.tensordot(a, b, axes=axes), a=sa, b=sb)
case("tensordot_axes_by_position", lambda x: np.tensordot(x * np.ones((2, 2)), x * np.ones((2, 2)), 2), x=1.3)

EINSUM = [("transpose", "ij->ji", [(3, 4)]), ("transpose_1x1", "ij->ji", [(1, 1)]),
          ("matmult", "ij,jk->ik", [(2, 3), (3, 4)]),
          ("matmult_broadcast", "...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
          ("covsum", "ijk,lji->lki", [(3, 4, 4), (4, 4, 3)]),
          ("ellipses", "...jk,...lj->...lk", [(3, 4, 4), (4, 4)]),
          ("ellipses_elementwise", "...,...->...", [(3, 4, 4), (4, 4)]),
          ("ellipses_tail", "jk...,lj...->lk...", [(3, 2, 4), (2, 3, 4)]),
          ("ellipses_center", "j...k,lj...->lk...", [(2, 2, 2), (2, 2, 2)]),
          ("three_args", "ijk,lji,lli->lki", [(3, 4, 4), (4, 4, 3), (4, 4, 3)]),
          ("trace", "ii", [(3, 3)]), ("diagonal", "ii->i", [(3, 3)]), ("sum_all", "ij->", [(2, 3)]),
          ("implicit_output", "ij,jk", [(2, 3), (3, 2)])]


def einsum_of(subscripts, count):
    if count == 1:
        return lambda a: np.einsum(subscripts, a)
    if count == 2:
        return lambda a, b: np.einsum(subscripts, a, b)
    return lambda a, b, c: np.einsum(subscripts, a, b, c)


for label, subscripts, shapes in EINSUM:
    case(f"einsum_{label}", einsum_of(subscripts, len(shapes)), **dict(zip("abc", shapes)))

case("einsum2_transpose", lambda a: np.einsum(a, [0, 1], [1, 0]), a=(3, 4))
case("einsum2_matmult", lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), a=(2, 3), b=(3, 4))
case("einsum2_matmult_broadcast", lambda a, b: np.einsum(a, [Ellipsis, 0, 1], b, [Ellipsis, 1, 2], [Ellipsis, 0, 2]),
     a=(2, 2, 3), b=(3, 4))
case("einsum2_covsum", lambda a, b: np.einsum(a, [0, 1, 2], b, [3, 1, 0], [3, 2, 0]), a=(3, 4, 4), b=(4, 4, 3))
case("einsum2_three_args", lambda a, b, c: np.einsum(a, [0, 1, 2], b, [3, 1, 0], c, [3, 3, 0], [3, 2, 0]),
     a=(3, 4, 4), b=(4, 4, 3), c=(4, 4, 3))

for label, sa, sb in (("matrices", (3, 3), (2, 2)), ("vectors", (2,), (3,)), ("matrix_vector", (2, 2), (3,)),
                      ("stack_matrix", (2, 1, 2), (2, 2))):
    case(f"kron_{label}", lambda a, b: np.kron(a, b), a=sa, b=sb)

for shape, offset in (((4, 4), -1), ((4, 4), 0), ((4, 4), 1), ((3, 4), 1), ((4, 3), -1), ((3, 4, 2), 0)):
    label = "x".join(map(str, shape)) + f"_offset{offset}".replace("-", "m")
    case(f"trace_{label}", lambda x, offset=offset: np.trace(x, offset=offset), x=shape)
case("trace_axes", lambda x: np.trace(x, offset=1, axis1=2, axis2=0), x=(3, 2, 4))

CROSS = [("default", {}), ("axisa0", {"axisa": 0}), ("axisb0", {"axisb": 0}), ("axisc0", {"axisc": 0}),
         ("axis0", {"axis": 0}), ("axis1", {"axis": 1})]
for label, kw in CROSS:
    case(f"cross_{label}", lambda a, b, kw=kw: np.cross(a, b, **kw), a=(3, 3), b=(3, 3))
case("cross_broadcast", lambda a, b: np.cross(a, b), a=(4, 3), b=(3,))
