"""The CPU executors against compile.run and forward mode; gradcli.compile's API."""
import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import gradcli
from gradcli.engines import backend, cpu
from gradcli.engines.program import Instruction, Program, compile_graph, run
from gradcli.methods.forward import jacobian
from gradcli.core.parser import parse

E4 = " + ".join(f"sin({k}*x + y)*exp(-{k}*z)" for k in range(1, 11))
EXPRESSIONS = [
    "x*y + sin(x)",
    "exp(-(x**2 + y**2)/2) * cos(3*x*y)",
    "log(1 + exp(x*y)) / sqrt(1 + x**2 + y**2) + tanh(x - y)**2",
    E4,
    "x*y, x + y, 3",  # vector-valued, with a constant row
    "sigmoid(x) + softplus(y) + erf(x*y) + erfc(y) + relu(x) + max(x, y, 0.5) + abs(y) + atan2(y, x)",
    "hypot(x, y) + cbrt(x) + sign(y)*x + x**3 + 2**x + min(x, y)",
]


def points(variables, n, seed=0):
    rng = np.random.default_rng(seed)
    return {v: rng.uniform(-1, 1, n) for v in variables}


def reference(program, pts):
    return np.stack(run(program, pts)).astype(np.float64)


def close(got, ref, rtol):
    scale = np.maximum(np.max(np.abs(ref), axis=-1, keepdims=True), 1e-300)
    np.testing.assert_array_less(np.abs(got - ref) / scale, rtol)


@pytest.mark.parametrize("expr", EXPRESSIONS)
@pytest.mark.parametrize("n", [0, 1, 5, 1000, 4097])
def test_numpy_engine_matches_reference(expr, n):
    program = compile_graph(parse(expr))
    pts = points(program.variables, n)
    ref = reference(program, pts)
    got = cpu.execute(program, pts, chunk=256)
    assert got.shape == (len(program.outputs), n) and got.dtype == np.float64
    np.testing.assert_array_equal(got, ref)  # the same ufuncs in the same order: bit for bit


@pytest.mark.parametrize("expr", EXPRESSIONS[:4])
def test_matches_forward_mode(expr):
    graph = parse(expr)
    program = compile_graph(graph)
    pts = points(program.variables, 7, seed=3)
    got = backend.execute(program, pts)
    for i in range(7):
        values, J = jacobian(graph, {v: pts[v][i] for v in program.variables})
        want = np.concatenate([np.ravel(values), np.ravel(J)])
        np.testing.assert_allclose(got[:, i], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("chunk,threads", [(1, 1), (3, 2), (64, 2), (1000, 4), (10**6, 2), (None, None)])
def test_chunks_and_threads(chunk, threads):
    program = compile_graph(parse(EXPRESSIONS[2]))
    pts = points(program.variables, 3001)
    got = cpu.execute(program, pts, chunk=chunk, threads=threads)
    np.testing.assert_array_equal(got, reference(program, pts))


def test_float32_is_kept_and_close():
    program = compile_graph(parse(EXPRESSIONS[1]))
    pts = points(program.variables, 2000)
    got = backend.execute(program, {k: v.astype(np.float32) for k, v in pts.items()}, dtype=np.float32)
    assert got.dtype == np.float32
    close(got, reference(program, pts), 1e-5)
    # float64 inputs cast chunk by chunk
    got = cpu.execute(program, pts, dtype=np.float32, chunk=300)
    assert got.dtype == np.float32
    close(got, reference(program, pts), 1e-5)


def test_outputs_constant_input_and_repeated_registers():
    # outputs: a register twice, an input register, a constant; inputs: an int array and a scalar
    program = Program(("x", "y"), 1, (Instruction("mul", 2, (0, 1)), Instruction("add", 2, (2, 0.5))),
                      (2, 2, 0, 1, 7.0), 3, None)
    x = np.arange(10)
    got = cpu.execute(program, {"x": x, "y": 2.0}, chunk=4)
    want = np.stack([2 * x + 0.5, 2 * x + 0.5, x, np.full(10, 2.0), np.full(10, 7.0)])
    np.testing.assert_array_equal(got, want)


def test_strided_and_broadcast_inputs():
    program = compile_graph(parse("x*y + sin(x)"))
    x = np.linspace(-1, 1, 40)[::2]
    got = cpu.execute(program, {"x": x, "y": np.array([3.0])}, chunk=7)
    np.testing.assert_array_equal(got, reference(program, {"x": x, "y": 3.0}))


def test_no_variables():
    program = compile_graph(parse("2*pi"))
    got = backend.execute(program, {})
    np.testing.assert_allclose(got, [[2 * np.pi]])


def test_lengths_that_do_not_broadcast():
    program = compile_graph(parse("x*y"))
    with pytest.raises(ValueError):
        cpu.execute(program, {"x": np.ones(3), "y": np.ones(4)})


def test_unknown_engine_and_device():
    program = compile_graph(parse("x"))
    with pytest.raises(ValueError):
        backend.execute(program, {"x": np.ones(3)}, engine="fortran")
    with pytest.raises(ValueError):
        backend.execute(program, {"x": np.ones(3)}, device="tpu")


try:
    from gradcli.engines import numba_engine as numba_backend
    HAVE_NUMBA = numba_backend.available()
except Exception:  # pragma: no cover - depends on the environment
    HAVE_NUMBA = False


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("expr", EXPRESSIONS)
@pytest.mark.parametrize("n", [0, 1, 513, 2000])
def test_numba_engine(expr, n):
    program = compile_graph(parse(expr))
    pts = points(program.variables, n)
    got = backend.execute(program, pts, engine="numba")
    assert got.shape == (len(program.outputs), n)
    # libm, not numpy's loops: equal up to the last bits
    ref = reference(program, pts)
    if n:
        close(got, ref, 1e-13)
    got32 = backend.execute(program, pts, engine="numba", dtype=np.float32)
    assert got32.dtype == np.float32
    if n:
        close(got32, ref, 2e-5)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
@pytest.mark.parametrize("expr", ["1/x + log(x) + sqrt(x) + x**y", "exp(x)*sin(y) + tanh(x)/cosh(y) + sigmoid(x*y)",
                                  "log(x)/sin(y) + cos(x)**-1"])
def test_numba_engine_special_points_as_numpy(expr):
    # division by zero, poles, overflow, NaN and inf: numpy's values, never an exception
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-310, 710.0, -746.0, 1e6, np.pi])
    x, y = np.meshgrid(special, special)
    program = compile_graph(parse(expr))
    pts = {"x": x.ravel(), "y": y.ravel()}
    with np.errstate(all="ignore"):
        want = backend.execute(program, pts, engine="numpy")
    got = backend.execute(program, pts, engine="numba")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-13, atol=0)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
def test_auto_follows_the_rule_and_is_correct(monkeypatch):
    # the rule with a lower threshold, so that a small batch takes the numba path
    monkeypatch.setattr(backend, "NUMBA_WORK", 1000)
    program = compile_graph(parse(EXPRESSIONS[0]))
    pts = points(program.variables, 5000)
    got = backend.execute(program, pts)
    assert backend.chosen_engine(program, n_points=5000) == "numba"
    np.testing.assert_array_equal(got, backend.execute(program, pts, engine="numba"))
    close(got, reference(program, pts), 1e-13)
    close(backend.execute(program, pts), reference(program, pts), 1e-13)


def test_the_engine_rule_depends_on_the_input_alone(monkeypatch):
    big = backend.NUMBA_WORK
    assert backend.choose_engine(10, 10) == "numpy"
    assert backend.choose_engine(big // 8, 8, engine="numpy") == "numpy"
    assert backend.choose_engine(1, 1, "cuda") == "cuda"
    assert backend.choose_engine(big // 8, 8) == ("numba" if HAVE_NUMBA else "numpy")
    assert backend.choose_engine(big // 8 - 1, 8) == "numpy"  # just under the threshold
    monkeypatch.setattr(backend, "_numba", lambda: None)  # numba not installed
    assert backend.choose_engine(big, 10) == "numpy"
    for engine, device in (("cuda", "cpu"), ("numpy", "cuda"), ("numba", "cuda"), ("fortran", "cpu")):
        with pytest.raises(ValueError):
            backend.choose_engine(10, 10, device, engine)


def _engine_bytes(n: int) -> bytes:
    f = gradcli.compile("exp(-(x**2 + y**2)/2) * cos(3*x*y) + tanh(x)/cosh(y)")
    rng = np.random.default_rng(7)
    value, grad = f.value_and_grad(x=rng.uniform(-2, 2, n), y=rng.uniform(-2, 2, n))
    return value.tobytes() + grad["x"].tobytes() + grad["y"].tobytes()


def test_the_same_input_gives_the_same_bits_in_this_process_and_the_next():
    n = 800_000  # enough that the engine once switched to numba after a second of numpy in a process
    first = _engine_bytes(n)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.5:  # a process's history (seconds spent in numpy) must not matter
        assert _engine_bytes(n) == first
    code = ("import hashlib, sys; sys.path.insert(0, sys.argv[1]); from test_cpu import _engine_bytes; "
            f"print(hashlib.sha256(_engine_bytes({n})).hexdigest())")
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", code, here], capture_output=True, text=True, check=True,
                         timeout=300, cwd=here).stdout.strip()
    assert out == hashlib.sha256(first).hexdigest()


def test_compile_takes_an_engine():
    f = gradcli.compile("x*sin(y)")
    x, y = np.linspace(-1, 1, 7), np.linspace(0, 2, 7)
    value, grad = f.value_and_grad(x=x, y=y, engine="numpy")
    np.testing.assert_allclose(grad["x"], np.sin(y), rtol=1e-15)
    with pytest.raises(gradcli.BadInput, match="engine"):
        f.value_and_grad(x=x, y=y, engine="fortran")
    with pytest.raises(gradcli.BadInput, match="CPU"):
        f.value_and_grad(x=x, y=y, device="cuda", engine="numpy")


# ---- gradcli.compile -------------------------------------------------------------------------------

def test_compile_value_and_grad_scalar():
    f = gradcli.compile("x*y + sin(x)")
    assert f.variables == ("x", "y")
    x = np.linspace(-1, 1, 11)
    value, grad = f.value_and_grad(x=x, y=2.0)
    assert value.shape == (11,) and set(grad) == {"x", "y"}
    np.testing.assert_allclose(value, 2 * x + np.sin(x))
    np.testing.assert_allclose(grad["x"], 2 + np.cos(x))
    np.testing.assert_allclose(grad["y"], x)


def test_compile_vector_valued_and_broadcast():
    f = gradcli.compile("x*y, x + y")
    value, grad = f.value_and_grad(x=np.arange(3.0), y=np.ones((2, 1)))
    assert value.shape == (2, 2, 3)  # (m,) + the broadcast shape
    assert grad["x"].shape == (2, 2, 3)
    np.testing.assert_allclose(grad["x"][0], np.ones((2, 3)))
    np.testing.assert_allclose(grad["y"][0], np.broadcast_to(np.arange(3.0), (2, 3)))
    np.testing.assert_allclose(grad["y"][1], 1.0)


def test_compile_dtype():
    f = gradcli.compile("exp(x)")
    value, grad = f.value_and_grad(x=np.zeros(4, dtype=np.float32))
    assert value.dtype == np.float32 and grad["x"].dtype == np.float32
    value, _ = f.value_and_grad(x=np.zeros(4, dtype=np.float32), dtype="float64")
    assert value.dtype == np.float64


def test_compile_bad_input():
    f = gradcli.compile("x*y")
    with pytest.raises(gradcli.BadInput, match="no values for y"):
        f.value_and_grad(x=1.0)
    with pytest.raises(gradcli.BadInput, match="z is not a variable"):
        f.value_and_grad(x=1.0, y=1.0, z=1.0)
    with pytest.raises(gradcli.BadInput, match="do not broadcast"):
        f.value_and_grad(x=np.ones(3), y=np.ones(4))
    with pytest.raises(gradcli.BadInput, match="dtype"):
        f.value_and_grad(x=1.0, y=1.0, dtype=np.int64)
    with pytest.raises(gradcli.BadInput):
        gradcli.compile("2x")


@pytest.mark.parametrize("kw", [dict(dtype="bogus"), dict(chunk=-5), dict(chunk=0)])
def test_value_and_grad_bad_options_are_bad_input(kw):
    with pytest.raises(gradcli.BadInput):
        gradcli.compile("x**2").value_and_grad(x=np.ones(3), **kw)
