"""The fused CUDA kernel: its generated source, checked on the CPU; its results, checked on a GPU.

Without a GPU the evidence comes from interpreting the generated CUDA source itself. ``CKernel`` below
parses the kernel body as C (statements, C precedence, literals, casts, calls: a real parser, no
``eval``) and evaluates it with numpy under C's typing rules, given what each CUDA math function means
(``sin`` is numpy's sin...). So:

* every template of the primitive table, on a grid of ordinary and special values (NaN, infinities,
  signed zeros, overflow), gives what the table's numpy ``value`` gives, in float32 and float64;
* whole programs (E1-E4, every primitive's gradient, constant outputs, outputs that are inputs, inf and
  NaN constants) give what the reference executor ``compile.run`` gives, bit for bit;
* a float32 kernel never computes in double: the interpreter types every value as C does and fails on
  any double arithmetic in a float kernel (a literal not cast to T would be caught);
* the source holds only names the program made, whatever the variables are called;
* ``launch``, the host side of ``execute``, runs on numpy with the interpreter as the kernel: what it
  transfers, what it allocates, how it calls the kernel.

The GPU's own arithmetic differs from numpy's in two ways, both within a rounding per operation: NVRTC
fuses a*b + c into one fused multiply-add (its default, -fmad=true), and CUDA's math functions are a few
units in the last place from glibc's. ``GpuArithmetic`` interprets the source that way, and
``assert_within_rounding`` judges a kernel's outputs against exact values (mpmath, 256 bits) within a
budget per operation that CUDA documents, relative to gradcli's first-order rounding bound of each output
(``rounding_scale``), so that cancellation between large terms is allowed the error its terms carry and
no more.

What this cannot show (the ``gpu`` tests at the end do, where CuPy and a device exist): that NVRTC
compiles the source, and that CUDA's math functions are as accurate as the budget assumes.
"""
from __future__ import annotations

import math
import re
import sys
import types
from dataclasses import replace
from fractions import Fraction
from typing import NamedTuple

import mpmath
import numpy as np
import pytest
import sympy

from gradcli.engines import cuda
from gradcli.engines.program import Instruction, Program, compile_graph, run
from gradcli.engines.device import cuda_status, resolve_device
from gradcli.core.errors import BadInput
from gradcli.core.graph import GraphBuilder
from gradcli.core.parser import parse
from gradcli.core.primitives import PRIMITIVES
from gradcli.methods.differences import rounding_scale

NAMES = sorted(PRIMITIVES)
DTYPES = ["float64", "float32"]

E = {
    "E1": "x*y + sin(x)",
    "E2": "exp(-(x**2 + y**2)/2) * cos(3*x*y)",
    "E3": "log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2) + tanh(x - y)**2",
    "E4": " + ".join(f"sin({k}*x + y)*exp(-{k}*z)" for k in range(1, 11)),
}
# every public function of the language, and the programs' corner cases
MORE = [f"{n}(x, y)" if PRIMITIVES[n].arity == 2 else f"{n}(x)" for n in NAMES if PRIMITIVES[n].public]
MORE += ["x*y, x+y, x/y", "x + 2*y", "x*y", "x", "x**2 - y**-2 + x**0.5", "max(x, y, 0.1) - min(x, -y)",
         "relu(x - y) + abs(x*y) + sign(y)", "x*0.1 + y*1e-30 + 1e30", "atan2(y, x) + hypot(x, 1e-300)"]

# --- a C interpreter over numpy ------------------------------------------------------------------
_ERF = np.vectorize(math.erf, otypes=[np.float64])
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
#: What each CUDA math function means (C99 <math.h>, overloaded for float and double in CUDA C++).
C_FUNCTIONS = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "exp": np.exp, "expm1": np.expm1, "log": np.log,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt, "fabs": np.fabs,
    "hypot": np.hypot, "pow": np.power, "erf": _ERF, "erfc": _ERFC, "isnan": np.isnan,
}
INTRINSICS = {"__int_as_float": (np.uint32, np.float32, "float"),
              "__longlong_as_double": (np.uint64, np.float64, "double")}
NP = {"float": np.float32, "double": np.float64}
RANK = {"int": 0, "float": 1, "double": 2}

_TOKEN = re.compile(r"\s*(?:(?P<hex>0[xX][0-9a-fA-F]+(?:LL)?)|(?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)"
                    r"|(?P<id>[A-Za-z_]\w*)|(?P<op>\|\||&&|==|!=|>=|<=|[-+*/()?:<>=,;!]))")
_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, ">": 4, "<=": 4, ">=": 4, "+": 5, "-": 5, "*": 6, "/": 6}


def tokenize(text):
    out, pos, text = [], 0, text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"not C we generate: {text[pos:pos + 30]!r}"
        out.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    return out


class Parser:
    """Recursive descent over C's expression grammar (the subset the templates use)."""

    def __init__(self, text):
        self.toks, self.i = tokenize(text), 0

    def peek(self):
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, want=None):
        kind, tok = self.toks[self.i]
        assert want is None or tok == want, (want, tok, self.i)
        self.i += 1
        return kind, tok

    def statements(self):
        out = []
        while self.peek() is not None:
            declared = self.peek() == "T"
            if declared:
                self.take()
            kind, name = self.take()
            assert kind == "id"
            self.take("=")
            out.append((declared, name, self.expr()))
            self.take(";")
        return out

    def expr(self):
        c = self.binary(1)
        if self.peek() == "?":
            self.take()
            a = self.expr()
            self.take(":")
            return ("cond", c, a, self.expr())
        return c

    def binary(self, least):
        left = self.unary()
        while self.peek() in _PREC and _PREC[self.peek()] >= least:
            op = self.take()[1]
            left = ("bin", op, left, self.binary(_PREC[op] + 1))
        return left

    def unary(self):
        if self.peek() in ("-", "!"):
            return ("un", self.take()[1], self.unary())
        kind, tok = self.take()
        if tok == "(":
            e = self.expr()
            self.take(")")
            return e
        if kind in ("num", "hex"):
            return (kind, tok)
        assert kind == "id", tok
        if self.peek() != "(":
            return ("id", tok)
        self.take("(")
        args = [self.expr()]
        while self.peek() == ",":
            self.take()
            args.append(self.expr())
        self.take(")")
        return ("call", tok, args)


class V(NamedTuple):
    v: object  # numpy value
    t: str  # its C type: bool, int, float, double
    const: bool  # a compile-time constant


class CKernel:
    """The generated kernel, run on numpy: ``kernel(*inputs, *outputs)`` like an ElementwiseKernel."""

    def __init__(self, source: cuda.KernelSource, dtype):
        self.T = cuda.CTYPES[np.dtype(dtype).name]
        self.ins = [self._param(p) for p in source.in_params.split(",") if p.strip()]
        self.outs = [self._param(p) for p in source.out_params.split(",")]
        self.code = Parser(source.body).statements()

    @staticmethod
    def _param(p):
        t, name = p.split()
        assert t == "T", p
        return name

    def __call__(self, *arrays):
        assert len(arrays) == len(self.ins) + len(self.outs)
        # CuPy binds T to one dtype: every argument must have it
        assert {a.dtype for a in arrays} == {np.dtype(NP[self.T])}, [a.dtype for a in arrays]
        env = {n: V(a, self.T, False) for n, a in zip(self.ins, arrays)}
        written = {}
        with np.errstate(all="ignore"):
            for declared, name, e in self.code:
                val = self.ev(e, env)
                assert val.t == self.T, (name, val.t)
                if declared:
                    assert re.fullmatch(r"r\d+", name) and name not in env, name
                    env[name] = V(np.asarray(val.v, NP[self.T]), self.T, False)
                else:
                    assert name in self.outs and name not in written, name
                    written[name] = val.v
        assert set(written) == set(self.outs)
        for name, out in zip(self.outs, arrays[len(self.ins):]):
            out[...] = written[name]

    def typed(self, v, t, const):
        # a float kernel must never compute in double (nor a double kernel in float)
        assert const or t in ("bool", "int", self.T), f"{t} arithmetic in a {self.T} kernel"
        return V(v, t, const)

    def ev(self, e, env):
        kind = e[0]
        if kind == "num":
            double = any(c in e[1] for c in ".eE")
            return V(np.float64(e[1]) if double else np.int64(e[1]), "double" if double else "int", True)
        if kind == "hex":
            return V(int(e[1].rstrip("L"), 16), "int", True)
        if kind == "id":
            assert e[1] in env, f"undefined name {e[1]}"
            return env[e[1]]
        if kind == "un":
            a = self.ev(e[2], env)
            if e[1] == "!":
                assert a.t == "bool"
                return V(np.logical_not(a.v), "bool", a.const)
            assert a.t != "bool"
            return self.typed(np.negative(a.v), a.t, a.const)
        if kind == "bin":
            a, b = self.ev(e[2], env), self.ev(e[3], env)
            const = a.const and b.const
            if e[1] in ("||", "&&"):
                assert a.t == b.t == "bool"
                return V((np.logical_or if e[1] == "||" else np.logical_and)(a.v, b.v), "bool", const)
            t = self.promote(a, b)
            x, y = np.asarray(a.v, NP[t]), np.asarray(b.v, NP[t])
            ops = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "<": np.less,
                   ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal,
                   "!=": np.not_equal}
            return self.typed(ops[e[1]](x, y), "bool" if _PREC[e[1]] <= 4 else t, const)
        if kind == "cond":
            c, a, b = self.ev(e[1], env), self.ev(e[2], env), self.ev(e[3], env)
            assert c.t == "bool"
            t = self.promote(a, b)
            return self.typed(np.where(c.v, np.asarray(a.v, NP[t]), np.asarray(b.v, NP[t])), t,
                              c.const and a.const and b.const)
        name, args = e[1], [self.ev(a, env) for a in e[2]]
        if name == "T":  # a functional cast to the element type
            (a,) = args
            assert a.t in ("int", "float", "double"), a.t
            return self.typed(np.asarray(a.v, NP[self.T]), self.T, a.const)
        if name in INTRINSICS:
            bits, to, t = INTRINSICS[name]
            (a,) = args
            assert a.t == "int" and a.const
            return V(np.asarray(a.v, bits).view(to), t, True)
        assert name in C_FUNCTIONS, f"unknown function {name}"
        # no int or bool arguments: those would pick an unintended overload
        assert all(a.t in ("float", "double") for a in args), (name, [a.t for a in args])
        t = "double" if any(a.t == "double" for a in args) else "float"
        res = C_FUNCTIONS[name](*(np.asarray(a.v, NP[t]) for a in args))
        if name == "isnan":
            return V(res, "bool", all(a.const for a in args))
        return self.typed(np.asarray(res).astype(NP[t]), t, all(a.const for a in args))

    @staticmethod
    def promote(a, b):
        assert a.t != "bool" and b.t != "bool", "arithmetic on a comparison"
        assert not (a.t == b.t == "int"), "integer arithmetic"
        return max(a.t, b.t, key=RANK.get)


def interpret(program, inputs, dtype):
    """The generated kernel, through ``launch`` (the host side of ``execute``), on numpy."""
    return cuda.launch(program, inputs, dtype, np, CKernel(cuda.kernel_source(program, dtype), dtype))


def reference(program, inputs, dtype):
    arrays = {k: np.asarray(v, dtype=dtype) for k, v in inputs.items()}
    return np.stack([np.asarray(r, dtype=dtype) for r in run(program, arrays)])


#: Ops whose reference is not numpy's own ufunc of the same name: libm's erf (the C meaning used here)
#: and scipy's (the table's value) are different implementations, and numpy's logaddexp calls libm's
#: expf/log1pf where np.exp/np.log1p on float32 are numpy's SIMD loops. A few units in the last place.
NOT_BITWISE = {"erf", "erfc", "softplus"}


def assert_same(got, want, program, msg=""):
    """Bit for bit (NaN where NaN), except through NOT_BITWISE, to 16 units in the last place."""
    if any(ins.op in NOT_BITWISE for ins in program.instructions):
        eps = np.finfo(got.dtype).eps
        np.testing.assert_allclose(got, want, rtol=16 * eps, atol=0, equal_nan=True, err_msg=msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


def points(variables, n=400, seed=0, lo=-3.0, hi=3.0):
    rng = np.random.default_rng(seed)
    return {v: rng.uniform(lo, hi, n) for v in variables}


def one_instruction(name):
    arity = PRIMITIVES[name].arity
    return Program(("a", "b")[:arity], 1, (Instruction(name, arity, tuple(range(arity))),), (arity,),
                   arity + 1, None)


SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1e-3, -1e-3,
           0.999, 1.001, -1.001, 10.0, -10.0, 37.0, -37.0, 40.0, -40.0, 89.0, -89.0, 100.0, -100.0, 800.0,
           -800.0, 1e30, -1e30, 1e-30, 1e300, -1e300, 1e-310, 5e-324]


def special_grid(arity, dtype):
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        vals = np.concatenate([SPECIAL, rng.normal(0, 3, 40)]).astype(dtype)
    if arity == 1:
        return [vals]
    a, b = np.meshgrid(vals, vals)
    return [a.ravel(), b.ravel()]


# --- the templates ------------------------------------------------------------------------------------

def test_every_primitive_has_a_cuda_template():
    for name, prim in PRIMITIVES.items():
        assert prim.cuda, name
        used = set(re.findall(r"\{(\d+)\}", prim.cuda))
        assert used == {str(k) for k in range(prim.arity)}, name
        assert prim.cuda.format(*("a0", "a1")[:prim.arity])  # a well-formed format string


def test_templates_use_only_cuda_math_functions_and_T():
    for prim in PRIMITIVES.values():
        names = set(re.findall(r"[A-Za-z_]\w*", prim.cuda))
        assert names <= set(C_FUNCTIONS) | {"T"}, (prim.name, names)
        assert not re.search(r"\d\.|\de", prim.cuda.replace("{0}", "").replace("{1}", "")), \
            f"{prim.name}: a bare floating literal forces double: write T(...)"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_template_means_the_tables_value(name, dtype):
    prim = PRIMITIVES[name]
    args = special_grid(prim.arity, dtype)
    program = one_instruction(name)
    got = interpret(program, dict(zip(program.variables, args)), dtype)[0]
    with np.errstate(all="ignore"):
        want = np.asarray(prim.value(np, *args), dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    assert_same(got, want, program, f"{name} in {dtype}")


# --- whole programs --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("text", list(E.values()) + MORE)
def test_kernel_computes_what_run_computes(text, dtype):
    program = compile_graph(parse(text))
    inputs = points(program.variables)
    got = interpret(program, inputs, dtype)
    want = reference(program, inputs, dtype)
    assert got.shape == (len(program.outputs), 400) and got.dtype == np.dtype(dtype)
    assert_same(got, want, program, text)


def test_special_constants_are_exact():
    inf, nan = math.inf, math.nan
    # built by hand: a program holding inf, -inf, nan, -0.0 and an overflowing constant
    ins = (Instruction("add", 1, (0, inf)), Instruction("mul", 2, (1, -inf)), Instruction("add", 3, (2, nan)),
           Instruction("mul", 4, (0, 1e300)), Instruction("div", 5, (0, -0.0)))
    program = Program(("x",), 1, ins, (3, 4, 5, -inf, nan, 0.1, 1e-300, 0), 6, None)
    x = np.array([1.0, -2.0, 0.0, 3e-300])
    for dtype in DTYPES:
        got = interpret(program, {"x": x}, dtype)
        np.testing.assert_array_equal(got, reference(program, {"x": x}, dtype))
    assert cuda.literal(inf, "float64") == "__longlong_as_double(0x7ff0000000000000LL)"
    assert cuda.literal(-inf, "float32") == "(-__int_as_float(0x7f800000))"
    assert cuda.literal(1e300, "float32") == "__int_as_float(0x7f800000)"  # rounded as numpy rounds it
    assert cuda.literal(0.1, "float64") == "T(0.1)"
    assert cuda.literal(-0.0, "float64") == "T(-0.0)"


def test_literals_round_trip():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(0, 1, 200), 10.0 ** rng.uniform(-300, 300, 200), [5e-324, 1.7e308]])
    for v in values:
        for dtype in DTYPES:
            text = cuda.literal(float(v), dtype)
            with np.errstate(all="ignore"):
                rounded = float(np.asarray(v, dtype))
            if math.isinf(rounded):
                assert text == "__int_as_float(0x7f800000)", (v, text)
                continue
            assert re.fullmatch(r"T\(-?[0-9.e+-]+\)", text), text
            assert float(text[2:-1]) == rounded, (v, dtype, text)


def test_float32_kernels_compute_in_float32(monkeypatch):
    program = compile_graph(parse("(x + 0.000000001) - x"))
    got = interpret(program, {"x": np.array([1.0])}, "float32")
    assert got.dtype == np.float32 and got[0, 0] == 0.0  # 1 + 1e-9 is 1 in float32, not in double
    # the interpreter's type check has teeth: a template with a bare double literal is caught
    monkeypatch.setitem(PRIMITIVES, "mul", replace(PRIMITIVES["mul"], cuda="({0} * 1.0 * {1})"))
    with pytest.raises(AssertionError, match="double arithmetic in a float kernel"):
        interpret(compile_graph(parse("x*y")), points(["x", "y"]), "float32")


def test_interpreter_catches_a_wrong_template(monkeypatch):
    # the whole-program check fails on a template that computes something else (here: fmax, which drops NaN)
    monkeypatch.setitem(PRIMITIVES, "max", replace(PRIMITIVES["max"], cuda="(({0} > {1}) ? {0} : {1})"))
    prim = PRIMITIVES["max"]
    args = special_grid(2, "float64")
    got = interpret(one_instruction("max"), {"a": args[0], "b": args[1]}, "float64")[0]
    assert not np.array_equal(got, prim.value(np, *args), equal_nan=True)


# --- names ----------------------------------------------------------------------------------------------

ALLOWED = set(C_FUNCTIONS) | set(INTRINSICS) | {"T"}


def assert_only_generated_names(source):
    assert re.fullmatch(r"gradcli_k[0-9a-f]{16}", source.name)
    text = " ".join([source.in_params, source.out_params, source.body])
    assert re.fullmatch(r"[\w\s().,;:?<>=!|&*/+-]*", text), "unexpected characters in the source"
    for ident in (tok for kind, tok in tokenize(text.replace("T ", "T, ")) if kind == "id"):
        assert ident in ALLOWED or re.fullmatch(r"[xyr]\d+", ident), ident


@pytest.mark.parametrize("text", list(E.values()) + MORE)
def test_source_holds_only_generated_names(text):
    for dtype in DTYPES:
        assert_only_generated_names(cuda.kernel_source(compile_graph(parse(text)), dtype))


def build(names, text="a*b + exp(c) + sin(a)/b"):
    """The graph of ``text`` over a, b, c, with the variables renamed to ``names``."""
    g = parse(text)
    rename = dict(zip(("a", "b", "c"), names))
    b = GraphBuilder()
    idx = []
    for node in g.nodes:
        if node.op == "var":
            idx.append(b.var(rename[node.attr]))
        elif node.op == "const":
            idx.append(b.const(node.attr.value, node.attr.text))
        else:
            idx.append(b.apply(node.op, *(idx[a] for a in node.args)))
    return b.build([idx[o] for o in g.outputs])


@pytest.mark.parametrize("names", [("__global__", "y0", "exp"), ("x1", "T", "r0"), ("i", "_ind", "gradcli_k0"),
                                   ('a); asm("trap"); //', "*/ #include <x>", "\u00fc\u00e9")])
def test_variable_names_never_reach_the_source(names):
    plain = cuda.kernel_source(compile_graph(build(("a", "b", "c"))), "float64")
    for dtype in DTYPES:
        src = cuda.kernel_source(compile_graph(build(names)), dtype)
        assert_only_generated_names(src)
        if dtype == "float64":
            assert src == plain  # the source is a function of the program's structure alone
        text = "\n".join(src)
        idents = set(re.findall(r"[A-Za-z_]\w*", text))
        for n in names:
            if not re.fullmatch(r"[A-Za-z_]\w*", n):
                assert n not in text
            elif not (re.fullmatch(r"[xyr]\d+", n) or n in ALLOWED):  # y0, T, exp are ours anyway
                assert n not in idents


# --- launch: the host side of execute ------------------------------------------------------------------

class SpyNumpy:
    """numpy, recording what is copied to the "device" and what is allocated there."""

    def __init__(self):
        self.copied, self.allocated = [], []

    def asarray(self, a):
        self.copied.append(a)
        return np.asarray(a)

    def empty(self, shape, dtype):
        self.allocated.append((shape, np.dtype(dtype)))
        return np.full(shape, np.nan, dtype)  # poisoned: every element must be written


def test_launch_transfers_what_is_read_once_and_writes_every_output():
    g = build(("x", "y", "z"), "a*b")  # z is a variable the expression ignores: never transferred
    g = type(g)(g.nodes, g.outputs, ("x", "y", "z"))
    program = compile_graph(g)
    assert cuda.used_inputs(program) == (0, 1)
    inputs = {"x": np.linspace(-1, 1, 7), "y": np.float64(2.0), "z": np.zeros(7)}
    xp = SpyNumpy()
    calls = []
    kernel = CKernel(cuda.kernel_source(program, "float32"), "float32")

    def counting(*args):
        calls.append([a.shape for a in args])
        return kernel(*args)

    out = cuda.launch(program, inputs, "float32", xp, counting)
    assert len(calls) == 1 and len(xp.copied) == 2 and xp.allocated == [((4, 7), np.dtype("float32"))]
    assert [id(a) for a in xp.copied] == [id(inputs["x"]), id(inputs["y"])]
    np.testing.assert_array_equal(out, reference(program, inputs, "float32"))


def test_launch_writes_into_rows_of_one_array():
    program = compile_graph(parse("x*y, x + 2*y"))
    seen = []

    def kernel(*args):
        seen.extend(args[2:])
        for a in args[2:]:
            a[...] = 7.0

    out = cuda.launch(program, points(["x", "y"], 5), "float64", np, kernel)
    assert len(seen) == len(program.outputs) and all(s.base is out or s.base is out.base for s in seen)
    assert (out == 7.0).all()


def test_launch_shapes():
    program = compile_graph(parse("x*y + 1"))
    for shape_x, shape_y in [((), ()), ((5,), ()), ((0,), (0,)), ((3, 1), (1, 4))]:
        inputs = {"x": np.full(shape_x, 0.5), "y": np.full(shape_y, 2.0)}
        out = interpret(program, inputs, "float64")
        assert out.shape == (3,) + np.broadcast_shapes(shape_x, shape_y)
        np.testing.assert_array_equal(out, np.broadcast_to(reference(program, inputs, "float64"), out.shape))


def test_launch_without_variables():
    program = compile_graph(parse("2*pi, 3"))  # constant outputs only: no input, one point
    out = interpret(program, {}, "float32")
    assert out.shape == (2,) and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([2 * math.pi, 3], np.float32))


def test_launch_converts_lists_and_integers():
    program = compile_graph(parse("x*y"))
    out = interpret(program, {"x": [1, 2, 3], "y": np.array([4, 5, 6])}, "float32")
    np.testing.assert_array_equal(out, [[4, 10, 18], [4, 5, 6], [1, 2, 3]])


def test_kernels_are_compiled_once_per_program_and_source():
    made = []

    def make(source):
        made.append(source)
        return CKernel(source, "float64")

    program = compile_graph(parse("x*y + sin(x)"))
    k1, used = cuda._compiled(program, "float64", make)
    assert cuda._compiled(program, "float64", make)[0] is k1 and used == (0, 1) and len(made) == 1
    again = compile_graph(parse("x*y + sin(x)"))  # an equal program: the same source, the same kernel
    assert cuda._compiled(again, "float64", make)[0] is k1 and len(made) == 1
    cuda._compiled(program, "float32", make)
    assert len(made) == 2
    key = id(again)
    del again  # a program that is gone leaves the cache
    assert key not in cuda._BY_PROGRAM


def test_unsupported_dtype():
    with pytest.raises(ValueError, match="float32 or float64"):
        cuda.kernel_source(compile_graph(parse("x")), "float16")


# --- the GPU's arithmetic, judged against exact values -------------------------------------------------

#: How far from the exact value a kernel may be, per rounded operation, in units of eps (the ulp of 1, so
#: at least an ulp of any normal value). The CUDA C++ Programming Guide (appendix "Mathematical
#: Functions", "Standard Functions") bounds each math function's distance from the correctly rounded
#: result; the largest among the functions the templates call are 4 ulp in float (tanf, powf, acoshf,
#: erfcf) and 5 ulp in double (erfc), half an ulp more from the exact value. + - * / and sqrt are
#: correctly rounded (NVRTC's defaults -prec-div=true and -prec-sqrt=true), and a fused multiply-add
#: leaves out a rounding. Of the two templates that chain calls, softplus in float is the furthest:
#: expf's 2.5 ulp through log1p (a factor below 1), log1pf's 1.5 and the add's 0.5, about 4.4 ulp.
#: The budget is the largest of these, rounded up to a whole ulp: the guide's bounds come from extensive
#: but not exhaustive tests.
ULP_BUDGET = {"float32": 5.0, "float64": 6.0}
#: Exact values are mpmath's time: how many points ``assert_within_rounding`` judges by them, where the
#: kernel disagrees most with numpy, and as many again drawn at random.
JUDGED = 256
_MP_VALUE: dict = {}


def mp_value(name):
    """The primitive's value over mpmath numbers: the table's sympy form (sympy's own functions, which
    mpmath evaluates at its working precision), except where that form does not mean the table's value:
    step(0) is 0 (sympy's Heaviside(0) is 1/2), and softplus is gradcli's own sympy function."""
    f = _MP_VALUE.get(name)
    if f is None:
        if name == "step":
            f = lambda a: mpmath.mpf(1 if a > 0 else 0)  # noqa: E731
        elif name == "softplus":
            f = lambda a: mpmath.log1p(mpmath.exp(a))  # noqa: E731
        else:
            prim = PRIMITIVES[name]
            syms = sympy.symbols(f"a0:{prim.arity}", real=True)
            f = sympy.lambdify(syms, prim.sympy(*syms), modules="mpmath")
        _MP_VALUE[name] = f
    return f


def exact_outputs(program, columns, dtype, idx):
    """The outputs of ``program`` at the points ``idx`` of ``columns`` (one flat array per variable, in
    ``dtype``), computed by mpmath at 256 bits from those inputs and from the program's constants rounded
    to ``dtype``, as the kernel holds them: the values the kernel's rounded arithmetic approximates. NaN
    where a value is not real. -> (n_outputs, len(idx)) float64"""
    def constant(c):
        with np.errstate(all="ignore"):
            return mpmath.mpf(float(np.asarray(c, dtype)))

    out = np.empty((len(program.outputs), len(idx)))
    with mpmath.workprec(256):
        for col, i in enumerate(idx):
            regs = {k: mpmath.mpf(float(c[i])) for k, c in enumerate(columns)}
            value = lambda a: regs[a] if isinstance(a, int) else constant(a)  # noqa: E731
            for ins in program.instructions:
                try:
                    r = mp_value(ins.op)(*(value(a) for a in ins.args))
                except (ZeroDivisionError, ValueError):
                    r = mpmath.nan
                if isinstance(r, mpmath.mpc):
                    r = r.real if r.imag == 0 else mpmath.nan
                regs[ins.out] = mpmath.mpf(r)
            for j, o in enumerate(program.outputs):
                out[j, col] = float(value(o))
    return out


def assert_within_rounding(program, inputs, dtype, got, judged=JUDGED):
    """``got``, a kernel's outputs of ``program`` at ``inputs`` (on the host), is what CUDA's arithmetic may
    give: its special values (NaN, infinities) are numpy's, and every finite output is within
    ULP_BUDGET[dtype] x eps x gradcli's first-order rounding bound of the exact value (mpmath). The bound
    is ``rounding_scale``: per output, the sum over the rounded operations of |value| x |d output /
    d operation|, so an output that cancels between large terms (x*y + sin(x) near 0), or that reads an
    ill-conditioned intermediate value (the argument of sin(10*x + y)), is allowed the error its terms
    carry and no more, and an output that no rounding reaches (a constant, an input) must be exact. Four
    smallest normals more for float32's flush to zero (CuPy compiles with -ftz=true).

    The exact values are computed at the ``judged`` points where the kernel disagrees most with numpy
    (relative to the bound) and at as many others drawn at random: a wrong kernel shows first where it
    disagrees most with a right one."""
    dtype = np.dtype(dtype).name
    shape = np.broadcast_shapes(*(np.shape(inputs[v]) for v in program.variables))
    n, m = math.prod(shape), len(program.outputs)
    with np.errstate(all="ignore"):
        columns = [np.broadcast_to(np.asarray(inputs[v], dtype), shape).reshape(n) for v in program.variables]
    got = np.asarray(got).reshape(m, n).astype(np.float64)
    want = reference(program, dict(zip(program.variables, columns)), dtype).reshape(m, n).astype(np.float64)
    special = ~np.isfinite(want)
    wrong = np.where(special, ~((got == want) | (np.isnan(got) & np.isnan(want))), ~np.isfinite(got))
    assert not wrong.any(), ("special values are not numpy's", dtype, np.argwhere(wrong)[:5], got[wrong][:5],
                             want[wrong][:5])
    if n == 0:
        return
    scale = rounding_scale(program.graph, {v: c.astype(np.float64) for v, c in zip(program.variables, columns)},
                           np, n)
    bound = ULP_BUDGET[dtype] * float(np.finfo(dtype).eps) * scale + 4 * float(np.finfo(dtype).tiny)
    with np.errstate(all="ignore"):
        worst = np.where(special, 0.0, np.abs(got - want) / bound).max(axis=0)
    drawn = np.random.default_rng(0).choice(n, min(judged, n), replace=False)
    idx = np.union1d(np.argsort(worst, kind="stable")[-judged:], drawn)
    exact = exact_outputs(program, columns, dtype, idx)
    g, b, w = got[:, idx], bound[:, idx], want[:, idx]
    with np.errstate(invalid="ignore"):
        bad = ~special[:, idx] & ~(np.abs(g - exact) <= b)
    rows, cols = np.nonzero(bad)
    assert not bad.any(), (f"{bad.sum()} of {bad.size} judged outputs outside the rounding bound ({dtype}): "
                           + "; ".join(f"output {r} at {[float(c[idx[k]]) for c in columns]}: kernel {g[r, k]!r}, "
                                       f"exact {exact[r, k]!r}, numpy {w[r, k]!r}, bound {b[r, k]:.3g}"
                                       for r, k in list(zip(rows, cols))[:4]))


def _two_product(a, b):
    # a*b = p + e exactly (Dekker's product, with Veltkamp's split into 26-bit halves)
    p = a * b

    def halves(v):
        t = 134217729.0 * v  # 2**27 + 1
        hi = t - (t - v)
        return hi, v - hi

    (ah, al), (bh, bl) = halves(a), halves(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fused_multiply_add(a, b, c):
    """a*b + c with one rounding (to within a rounding of it, in the rare cases where the last step's
    sum rounds twice), in float32 or float64, as the GPU's FMA computes it."""
    if a.dtype == np.float32:  # a float product is exact in double
        return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    with np.errstate(all="ignore"):  # overflow, inf - inf: where they occur, the plain sum's special value
        p, e = _two_product(a, b)
        s = p + c
        v = s - p
        t = (p - (s - v)) + (c - v)  # p + c = s + t exactly (Knuth's two-sum)
        fused = s + (t + e)
        plain = np.where(np.isinf(c) & np.isfinite(a) & np.isfinite(b), c, a * b + c)  # the exact product is finite
        return np.where(np.isfinite(fused) & np.isfinite(p) & np.isfinite(s), fused, plain)


class GpuArithmetic(CKernel):
    """The generated kernel computed as a GPU computes it: every ``a*b + c`` and ``a*b - c`` (a product in
    the expression, or a local that holds one) fused into one rounding, as NVRTC contracts them by
    default, also across statements; and each math function's result moved by up to ``ulps`` units in
    the last place, at random, as CUDA's functions differ from glibc's and numpy's."""

    #: correctly rounded (or exact) in CUDA as in numpy
    EXACT = {"sqrt", "fabs", "isnan"}

    def __init__(self, source, dtype, ulps=1, seed=0):
        super().__init__(source, dtype)
        self.ulps, self.rng = ulps, np.random.default_rng(seed)
        self.products = {name: e for _, name, e in self.code if e[0] == "bin" and e[1] == "*"}

    def product(self, e):
        if e[0] == "id" and e[1] in self.products:
            e = self.products[e[1]]
        return e if e[0] == "bin" and e[1] == "*" else None

    def ev(self, e, env):
        if e[0] == "bin" and e[1] in "+-":
            for side in (2, 3):
                m = self.product(e[side])
                if m is None:
                    continue
                a, b, c = self.ev(m[2], env), self.ev(m[3], env), self.ev(e[5 - side], env)
                t = max(self.promote(a, b), self.promote(b, c), key=RANK.get)
                A, B, C = (np.asarray(x.v, NP[t]) for x in (a, b, c))
                if e[1] == "-":  # a*b - c, or c - a*b as (-a)*b + c
                    A, C = (A, -C) if side == 2 else (-A, C)
                with np.errstate(all="ignore"):
                    fused = fused_multiply_add(A, B, C)
                return self.typed(np.asarray(fused, NP[t]), t, a.const and b.const and c.const)
        r = super().ev(e, env)
        if e[0] == "call" and e[1] in C_FUNCTIONS and e[1] not in self.EXACT and not r.const and self.ulps:
            v = np.asarray(r.v)
            steps = self.rng.integers(-self.ulps, self.ulps + 1, v.shape)
            with np.errstate(all="ignore"):
                for _ in range(self.ulps):
                    v = np.where(steps > 0, np.nextafter(v, np.asarray(np.inf, v.dtype)),
                                 np.where(steps < 0, np.nextafter(v, np.asarray(-np.inf, v.dtype)), v))
                    steps = steps - np.sign(steps)
            r = V(v, r.t, r.const)
        return r


def on_gpu_arithmetic(program, inputs, dtype, ulps=1):
    """The generated kernel, through ``launch``, computed with the GPU's FMA and a libm ``ulps`` away."""
    return cuda.launch(program, inputs, dtype, np, GpuArithmetic(cuda.kernel_source(program, dtype), dtype, ulps))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("text", list(E.values()) + MORE + ["x*y + 1, 3"])
def test_the_gpus_arithmetic_is_within_the_budget(text, dtype):
    # what a right kernel computes on a GPU passes, cancellation included: these are the programs the
    # GPU tests run, where a tolerance relative to |f| and to the terms' sizes failed E1, E3 (float32),
    # E4, x**2 - y**-2 + x**0.5, atan2(y, x) + hypot(x, 1e-300) (float32) and x*y + 1 on an H200
    program = compile_graph(parse(text))
    inputs = points(program.variables, 3000, seed=5)
    assert_within_rounding(program, inputs, dtype, on_gpu_arithmetic(program, inputs, dtype), judged=96)


def test_fused_multiply_add_is_fused():
    a, b = np.array([1 + 2.0 ** -30, 3.0, 1e308]), np.array([1 - 2.0 ** -30, 1 / 3, 10.0])
    c = np.array([-1.0, -1.0, -np.inf])
    with np.errstate(all="ignore"):
        got, unfused = fused_multiply_add(a, b, c), a * b + c
    assert got[0] == -(2.0 ** -60) and unfused[0] == 0.0  # the product's lost bits survive the sum
    assert got[1] == float(Fraction(3.0) * Fraction(1 / 3) - 1) != unfused[1] and got[2] == -np.inf
    a32, b32, c32 = (x[:2].astype(np.float32) for x in (a, b, c))
    f32 = fused_multiply_add(a32, b32, c32)
    assert f32.dtype == np.float32
    assert f32[1] == np.float32(float(Fraction(float(a32[1])) * Fraction(float(b32[1])) - 1))


def test_cancellation_is_judged_by_its_terms():
    # Two of the GPU's failures, at their points. E1 near its zero (the entry near 1.2e-5): x*y + sin(x)
    # of terms near 0.83 is 1.17e-5, and fusing x*y into the sum moves it by 4.7e-17, 4e-12 of itself,
    # outside the former 1e-12 of |f| + |f|. x*y + 1 near its zero: fused, the value is exact, where
    # numpy's is 1e-16 off, 2.4e-11 of itself: outside the shapes test's former rtol of 1e-15. Both
    # kernels, and numpy, are well within the budget, which is relative to the terms' rounding.
    for text, at in [(E["E1"], (-0.9768804328430503, -0.8483815343419399)),
                     ("x*y + 1, 3", (-0.5044117251695699, 1.98251579350144))]:
        program = compile_graph(parse(text))
        inputs = {"x": np.array([at[0]]), "y": np.array([at[1]])}
        fused, numpy_ = on_gpu_arithmetic(program, inputs, "float64", ulps=0), reference(program, inputs, "float64")
        f = numpy_[0, 0]
        assert abs(fused[0, 0] - f) > 1e-12 * 2 * abs(f)
        exact = exact_outputs(program, [inputs["x"], inputs["y"]], "float64", [0])
        if text == "x*y + 1, 3":
            assert fused[0, 0] == exact[0, 0] != f
        assert_within_rounding(program, inputs, "float64", fused)
        assert_within_rounding(program, inputs, "float64", numpy_)


@pytest.mark.parametrize("dtype, factor", [("float64", "T(1.0000000000001)"), ("float32", "T(1.000004)")])
def test_the_budget_catches_a_template_a_few_dozen_ulp_off(monkeypatch, dtype, factor):
    # sin 450 ulp off in double, 34 in float: a few times the budget, and caught
    monkeypatch.setitem(PRIMITIVES, "sin", replace(PRIMITIVES["sin"], cuda=f"(sin({{0}}) * {factor})"))
    program = compile_graph(parse(E["E1"]))
    inputs = points(program.variables, 2000, seed=5)
    with pytest.raises(AssertionError, match="outside the rounding bound"):
        assert_within_rounding(program, inputs, dtype, interpret(program, inputs, dtype), judged=32)


def test_the_budget_holds_constant_outputs_exact(monkeypatch):
    # a constant output row is judged exactly: written from a float32 rounding of its literal, it fails
    program = compile_graph(parse("x*y + 1, 0.1"))
    inputs = points(program.variables, 500, seed=1)
    assert_within_rounding(program, inputs, "float64", interpret(program, inputs, "float64"))
    literal = cuda.literal
    monkeypatch.setattr(cuda, "literal", lambda v, dtype: literal(v, "float32"))
    got = interpret(program, inputs, "float64")
    assert got[1, 0] == float(np.float32(0.1)) != 0.1
    with pytest.raises(AssertionError, match="outside the rounding bound"):
        assert_within_rounding(program, inputs, "float64", got, judged=8)


# --- device choice ---------------------------------------------------------------------------------------

def test_cpu_and_unknown_devices():
    assert resolve_device("cpu") == ("cpu", "")
    with pytest.raises(BadInput, match="unknown device 'tpu'"):
        resolve_device("tpu")


def test_no_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    ok, why = cuda_status()
    assert not ok and "CuPy is not installed" in why
    with pytest.raises(BadInput) as exc:
        resolve_device("cuda")
    assert "pip install 'gradcli[gpu]'" in exc.value.message and "\n" not in exc.value.message
    device, note = resolve_device("auto")
    assert device == "cpu" and note.startswith("CUDA not available (CuPy is not installed") \
        and note.endswith("running on the CPU")


@pytest.mark.parametrize("count, error, expect", [
    (0, None, "no CUDA device"),
    (None, RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient\nmore"),
     "no usable CUDA driver (RuntimeError: cudaErrorInsufficientDriver"),
])
def test_cupy_without_a_device(monkeypatch, count, error, expect):
    def device_count():
        if error is not None:
            raise error
        return count

    # a stand-in module only for the question "how many devices?": the answers a broken setup gives
    stub = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=device_count)))
    monkeypatch.setitem(sys.modules, "cupy", stub)
    ok, why = cuda_status()
    assert not ok and why.startswith(expect) and "\n" not in why
    with pytest.raises(BadInput, match="CUDA is not available"):
        resolve_device("cuda")
    assert resolve_device("auto")[0] == "cpu"


# --- on a GPU ----------------------------------------------------------------------------------------------

HAVE_CUDA, WHY_NOT = cuda_status()
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason=f"needs CuPy and a CUDA device: {WHY_NOT}")
#: single operations on special values, against numpy: how close a finite value must be (no cancellation
#: is possible in one operation; the whole programs are judged by ``assert_within_rounding``)
RTOL = {"float64": 1e-12, "float32": 1e-5}


def on_gpu(program, inputs, dtype):
    import cupy

    got = cuda.execute(program, inputs, dtype)
    assert isinstance(got, cupy.ndarray) and got.dtype == np.dtype(dtype)
    return got.get()


def assert_close_on_gpu(program, inputs, dtype):
    """The kernel against the numpy executor, relative to the value: NaN where NaN, infinities equal."""
    got = on_gpu(program, inputs, dtype)
    want = reference(program, inputs, dtype).astype(np.float64)
    tiny = np.finfo(dtype).tiny * 4  # CuPy compiles with -ftz=true: float32 subnormals flush to zero
    bad = ~((np.abs(got - want) <= RTOL[dtype] * np.abs(want) + tiny) | (np.isnan(got) & np.isnan(want))
            | (got == want))
    assert not bad.any(), (dtype, np.argwhere(bad)[:5], got[bad][:5], want[bad][:5])


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("text", list(E.values()) + MORE)
def test_gpu_kernel_against_exact_values(text, dtype):
    # judged against mpmath within CUDA's documented budget (ULP_BUDGET): FMA contraction and CUDA's
    # libm move results near a cancellation by more than any tolerance relative to |f| allows
    program = compile_graph(parse(text))
    inputs = points(program.variables, 100_000, seed=5)
    assert_within_rounding(program, inputs, dtype, on_gpu(program, inputs, dtype))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
def test_gpu_templates_on_special_values(name, dtype):
    program = one_instruction(name)
    args = special_grid(PRIMITIVES[name].arity, dtype)
    assert_close_on_gpu(program, dict(zip(program.variables, args)), dtype)


@pytest.mark.gpu
@needs_cuda
def test_gpu_float32_is_float32_and_sources_compile_once():
    import cupy

    program = compile_graph(parse("(x + 0.000000001) - x"))
    x = cupy.asarray(np.array([1.0, 2.0, 4.0]))  # already on the device: not copied again
    out = cuda.execute(program, {"x": x}, "float32")
    assert out.dtype == np.float32 and (out.get()[0] == 0).all()  # double arithmetic would give 1e-9
    out64 = cuda.execute(program, {"x": x}, "float64")
    assert (out64.get()[0] > 0).all()
    kernel, used = cuda._compiled(program, "float32")
    assert cuda._compiled(program, "float32")[0] is kernel and used == (0,)
    assert cuda._compiled(compile_graph(parse("(x + 0.000000001) - x")), "float32")[0] is kernel  # same source
    assert "typedef float T;" in kernel.cached_code


@pytest.mark.gpu
@needs_cuda
def test_gpu_shapes_and_constant_outputs():
    # rows: x*y + 1, the constant 3, then the Jacobian: y, x, 0, 0. The constant and copied rows are exact;
    # x*y + 1 is one fused multiply-add on the GPU, so near x*y = -1 it differs from numpy's two roundings
    # by far more than 1e-15 of itself, and is the more accurate (test_cancellation_is_judged_by_its_terms)
    program = compile_graph(parse("x*y + 1, 3"))
    for n in (0, 1, 1_000_003):
        inputs = points(["x", "y"], n, seed=n)
        out = on_gpu(program, inputs, "float64")
        assert out.shape == (len(program.outputs), n)
        np.testing.assert_array_equal(out[1:], reference(program, inputs, "float64")[1:])
        assert_within_rounding(program, inputs, "float64", out)
    out = cuda.execute(program, {"x": np.float64(2.0), "y": np.arange(3.0)}, "float64").get()
    np.testing.assert_array_equal(out, reference(program, {"x": 2.0, "y": np.arange(3.0)}, "float64"))
    assert resolve_device("cuda") == ("cuda", "") and resolve_device("auto") == ("cuda", "")
