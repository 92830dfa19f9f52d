"""Decisions of ``gradcli check`` on exact zeros, piecewise-linear second orders, fast-mode counts, reports,
list outputs and the summary counts, each against a reference computed here (closed forms, finite
differences written in this file)."""
from __future__ import annotations

import inspect
import textwrap
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import numpy as np
import pytest

from cli_helpers import check, model, strict_json
from gradcli.checks.comparisons import taylor
from gradcli.checks.comparisons.findings import float64_hint

HEADER = "import numpy as np\nimport gradcli\n"
SEEDS = range(6)


def run(tmp_path, source: str, *args, name="model.py") -> dict:
    """``gradcli check --json`` on one model file -> {check name: its JSON document}."""
    f = model(tmp_path / name, HEADER, source)
    r = check(f, "--json", *args)
    doc = strict_json(r.stdout)
    return {c["name"]: c for c in doc["checks"]}


def statuses(checks: dict) -> dict:
    return {k: c["status"] for k, c in checks.items()}


def central(fn, x, h=1e-6):
    """Central differences of a scalar fn at x, element by element."""
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (fn(x + e) - fn(x - e)) / (2 * h)
    return g


# --- outputs piecewise constant in the inputs: the derivative is 0 -------------------------------------

X5 = "np.array([0.3, -1.7, 2.4, -0.2, 1.1])"  # no element on a jump of floor, sign or x > 0

CONSTANT = f'''
@gradcli.check(x={X5})
def floor_ad(x):
    return np.sum(np.floor(x))

@gradcli.check(x={X5})
def floor_zero(x):
    return np.sum(np.floor(x))

@floor_zero.grad
def floor_zero_grad(x):
    return np.zeros_like(x)

@gradcli.check(x={X5})
def floor_wrong(x):
    return np.sum(np.floor(x))

@floor_wrong.grad
def floor_wrong_grad(x):
    return 0.5 * x

@gradcli.check(x={X5})
def positive_ad(x):
    return (x > 0).astype(float)

@gradcli.check(x={X5})
def positive_zero(x):
    return (x > 0).astype(float)

@positive_zero.vjp
def positive_zero_vjp(g, x):
    return np.zeros_like(g)

@gradcli.check(x={X5})
def sign_ad(x):
    return np.sign(x) * 2.0

@gradcli.check(x={X5})
def sign_wrong(x):
    return np.sign(x)

@sign_wrong.vjp
def sign_wrong_vjp(g, x):
    return g

@gradcli.check(x={X5}, mode="fast")
def floor_fast_wrong(x):
    return np.floor(x)

@floor_fast_wrong.vjp
def floor_fast_wrong_vjp(g, x):
    return np.where(np.arange(5) == 3, g, 0.0)
'''


def test_an_output_constant_in_the_inputs_is_checked_against_zero(tmp_path):
    checks = run(tmp_path, CONSTANT)
    assert statuses(checks) == {"floor_ad": "pass", "floor_zero": "pass", "floor_wrong": "fail", "positive_ad": "pass",
                                "positive_zero": "pass", "sign_ad": "pass", "sign_wrong": "fail",
                                "floor_fast_wrong": "fail"}
    for name in ("floor_ad", "positive_ad", "sign_ad"):
        assert any("piecewise constant in the inputs" in n for n in checks[name].get("notes", [])), checks[name]
    x = np.array([0.3, -1.7, 2.4, -0.2, 1.1])
    wrong = checks["floor_wrong"]
    assert "5 of 5 entries wrong" in wrong["message"]
    for m in wrong["mismatches"]:  # d/dx floor(x) = 0 away from the integers
        assert m["expected"] == 0 and m["got"] == pytest.approx(0.5 * x[m["index"][0]])
    # vjp(e_j) of sign is 0; the wrong vjp returns e_j: one wrong entry per output, on the diagonal
    sw = checks["sign_wrong"]
    assert "5 of 25 entries wrong" in sw["message"]
    assert all(m["expected"] == 0 and m["got"] == 1 for m in sw["mismatches"])
    fw = checks["floor_fast_wrong"]
    assert "1 of 5 entries wrong" in fw["message"] and [m["index"] for m in fw["mismatches"]] == [[3]]


CUT = f'''
@gradcli.check(x={X5})
def cut_ad(x):
    return np.sum(np.asarray(x) ** 2)

@gradcli.check(x={X5})
def cut_grad(x):
    return np.sum(np.asarray(x) ** 2)

@cut_grad.grad
def cut_grad_grad(x):
    return 2 * x

@gradcli.check(x={X5})
def unseen_right(x):
    return np.sum(np.array([v ** 2 for v in x.flat]))

@unseen_right.grad
def unseen_right_grad(x):
    return 2 * x

@gradcli.check(x={X5})
def unseen_zero(x):
    return np.sum(np.array([v ** 2 for v in x.flat]))

@unseen_zero.grad
def unseen_zero_grad(x):
    return np.zeros_like(x)
'''


def test_a_cut_trace_is_not_taken_for_a_constant_output(tmp_path):
    checks = run(tmp_path, CUT)
    # a cut is what it was: no AD (skipped without a gradient under test), finite differences with one
    assert checks["cut_ad"]["status"] == "skipped" and "cut the trace" in checks["cut_ad"]["message"]
    assert checks["cut_grad"]["status"] == "pass" and checks["cut_grad"]["reference"] == "richardson"
    # whatever the tracer makes of x.flat, the derivative 2x is right and 0 is wrong
    assert checks["unseen_right"]["status"] == "pass", checks["unseen_right"]["message"]
    assert checks["unseen_zero"]["status"] == "fail"
    x = np.array([0.3, -1.7, 2.4, -0.2, 1.1])
    for m in checks["unseen_zero"]["mismatches"]:
        assert m["expected"] == pytest.approx(2 * x[m["index"][0]], rel=1e-8) and m["got"] == 0


# --- exact zeros decide at every seed (numpy-ml's ReLU and HardSigmoid) ---------------------------------

ACTIVATIONS = '''
class ReLU:
    def fn(self, z):
        return np.clip(z, 0, np.inf)

    def grad(self, x, **kwargs):
        return (x > 0).astype(int)

    def grad2(self, x, **kwargs):
        return np.zeros_like(x)


class HardSigmoid:
    def fn(self, z):
        return np.clip((0.2 * z) + 0.5, 0.0, 1.0)

    def grad(self, x, **kwargs):
        return ((x > -2.5) & (x < 2.5)).astype(int) * 0.2

    def grad2(self, x, **kwargs):
        return np.zeros_like(x)


class WrongReLU(ReLU):
    def grad2(self, x, **kwargs):
        return (x > 0) * 1.0


relu, hard, wrong = ReLU(), HardSigmoid(), WrongReLU()
'''

GRAD2 = '''
@gradcli.check(x=(3, 4))
def {name}_grad(x):                        # the derivative of grad is grad2
    return {obj}.grad(x)

@{name}_grad.vjp
def {name}_grad_vjp(g, x):
    return g * {obj}.grad2(x)

@gradcli.check(x=(3, 4), order=2)
def {name}_fn(x):                          # grad2 as the Hessian-vector product of sum(fn)
    return np.sum({obj}.fn(x))

@{name}_fn.grad
def {name}_fn_grad(x):
    return {obj}.grad(x).astype(float)

@{name}_fn.hvp
def {name}_fn_hvp(v, x):
    return {obj}.grad2(x) * v
'''

STEP = '''
@gradcli.check(x=(6,))
def step(x):
    return np.heaviside(x, 0.5)

@step.vjp
def step_vjp(g, x):
    return np.zeros_like(g)
'''


def test_zero_second_derivatives_pass_at_every_seed_and_a_wrong_one_fails(tmp_path):
    source = ACTIVATIONS + GRAD2.format(name="relu", obj="relu") + GRAD2.format(name="hard", obj="hard") + STEP
    source += GRAD2.format(name="wrong", obj="wrong")
    f = model(tmp_path / "activations.py", HEADER, source)
    for seed in SEEDS:
        checks = {c["name"]: c for c in strict_json(check(f, "--json", "--seed", seed).stdout)["checks"]}
        x = np.random.default_rng(seed).standard_normal((3, 4))  # the inputs x=(3, 4) at this seed
        for name in ("relu_grad", "relu_fn", "hard_grad", "hard_fn", "step"):
            assert checks[name]["status"] == "pass", (seed, name, checks[name]["message"])
        # the true second derivative of relu is 0 off the kink; the wrong grad2 says 1 where x > 0
        wg = checks["wrong_grad"]
        assert wg["status"] == "fail", (seed, wg["message"])
        assert f"{int((x > 0).sum())} of 144 entries wrong" in wg["message"]
        for m in wg["mismatches"]:
            assert m["expected"] == 0 and m["got"] == 1 and x[tuple(m["index"])] > 0
        wf = checks["wrong_fn"]
        assert wf["status"] == "fail" and "the hand-written hvp disagrees" in wf["message"], (seed, wf["message"])
        assert all(abs(m["expected"]) < 1e-9 and m["got"] != 0 for m in wf["mismatches"])


# --- order 2 of piecewise-linear functions ------------------------------------------------------------

AWAY = [0.35, -0.6, 1.45, -1.7, 2.3]  # 0.3 or more from every kink and jump of the functions below


def f_abs(x):
    return np.sum(3 * np.abs(x))


def f_max(x):
    return np.max(x)


def f_clip(x):
    return np.sum(np.clip(x, -1.0, 1.0) * np.arange(1.0, 6.0))


def f_minmax(x):
    return np.sum(np.minimum(x, 0.9) + 2 * np.maximum(x, -1.2))


def f_mod(x):
    return np.sum(np.mod(x, 1.0) * np.arange(1.0, 6.0))


# their gradients in closed form, off the kinks
def g_abs(x):
    return 3 * np.sign(x)


def g_max(x):
    return (x == np.max(x)).astype(float)


def g_clip(x):
    return ((x > -1) & (x < 1)) * np.arange(1.0, 6.0)


def g_minmax(x):
    return (x < 0.9) + 2.0 * (x > -1.2)


def g_mod(x):
    return np.arange(1.0, 6.0)


NAMES = ("abs", "max", "clip", "minmax", "mod")


def piecewise_linear_source() -> str:
    parts = []
    for name in NAMES:
        parts += [inspect.getsource(globals()[f"f_{name}"]), inspect.getsource(globals()[f"g_{name}"])]
        for tag, inputs in (("away", f"np.array({AWAY})"), ("normal", "(5,)")):
            parts.append(f"@gradcli.check(x={inputs}, order=2)\ndef {name}_{tag}_ad(x):\n    return f_{name}(x)\n")
            parts.append(f"@gradcli.check(x={inputs}, order=2)\ndef {name}_{tag}(x):\n    return f_{name}(x)\n\n"
                         f"{name}_{tag}.grad(g_{name})\n")
    return "\n".join(parts)


def test_the_closed_form_gradients_are_right():
    x = np.array(AWAY)
    for name in NAMES:
        np.testing.assert_allclose(globals()[f"g_{name}"](x), central(globals()[f"f_{name}"], x), atol=1e-6)


def test_order_2_of_piecewise_linear_functions_passes_at_several_seeds(tmp_path):
    f = model(tmp_path / "pl.py", HEADER, piecewise_linear_source())
    for seed in range(4):
        checks = {c["name"]: c for c in strict_json(check(f, "--json", "--seed", seed).stdout)["checks"]}
        assert len(checks) == 20
        for name, c in checks.items():
            assert c["status"] == "pass" and c["order"] == 2, (seed, name, c["message"])


WRONG_ORDER_2 = f'''
A = np.array({AWAY})

@gradcli.check(x=A, order=2)
def abs_frozen(x):
    return np.sum(3 * np.abs(x))

@abs_frozen.grad
def abs_frozen_grad(x):                    # right at A, but its derivative is 0.5, not 0
    return 3 * np.sign(x) + 0.5 * (x - A)

@gradcli.check(x=(5,), order=2)
def clip_hvp(x):
    return np.sum(np.clip(x, -1.0, 1.0))

@clip_hvp.grad
def clip_hvp_grad(x):
    return ((x > -1) & (x < 1)).astype(float)

@clip_hvp.hvp
def clip_hvp_hvp(v, x):                    # the Hessian of a clip is 0, not 0.01
    return 0.01 * v

@gradcli.check(x=A, order=2)
def minmax_frozen(x):
    return np.sum(np.minimum(x, 0.9) + 2 * np.maximum(x, -1.2))

@minmax_frozen.grad
def minmax_frozen_grad(x):
    return (x < 0.9) + 2.0 * (x > -1.2) + 1e-3 * np.sin(x - A)   # its derivative is 1e-3, not 0
'''


def test_a_wrong_second_order_of_a_piecewise_linear_function_fails(tmp_path):
    f = model(tmp_path / "wrong.py", HEADER, WRONG_ORDER_2)
    for seed in range(4):
        checks = {c["name"]: c for c in strict_json(check(f, "--json", "--seed", seed).stdout)["checks"]}
        for name in ("abs_frozen", "minmax_frozen"):
            c = checks[name]
            assert c["status"] == "fail" and "not as a function of them" in c["message"], (seed, name, c["message"])
            assert all(abs(m["expected"]) < 1e-9 and abs(m["got"]) > 1e-6 for m in c["mismatches"])
        c = checks["clip_hvp"]
        assert c["status"] == "fail" and "the hand-written hvp disagrees" in c["message"], (seed, c["message"])


STEPS = 2.0 ** -np.arange(1, taylor.STEPS + 1)


@pytest.mark.parametrize("order", [1, 2])
def test_taylor_reads_a_remainder_that_vanishes_below_a_kink_as_exact(order):
    # piecewise linear along v with a kink at h = 0.01: the remainder is |slope jump| (h - 0.01) above it
    # and rounding below it
    r = np.where(STEPS > 0.01, 0.3 * (STEPS - 0.01), 1e-17)
    slope, cls, a, b, usable = taylor.fit(STEPS, r, np.full(taylor.STEPS, 1e-15), order)
    assert cls == 0 and STEPS[a] < 0.01 <= STEPS[a - 1]


def test_taylor_does_not_take_a_fading_error_term_for_a_kink():
    # an error 1e-6 in <g, v>: the remainder h * 1e-6 falls into the floor 1e-12 gradually (slope 1)
    r = 1e-6 * STEPS + STEPS ** 2 * 1e-9
    slope, cls, a, b, usable = taylor.fit(STEPS, r, np.full(taylor.STEPS, 1e-12), 1)
    assert cls == 1 and slope == pytest.approx(1.0, abs=0.1)


# --- fast mode: one wrong element is one wrong entry ----------------------------------------------------

FAST = '''
X107 = np.linspace(-2.0, 2.0, 107)

@gradcli.check(x=X107, mode="fast")
def wide(x):
    return np.sum(np.sin(x))

@wide.grad
def wide_grad(x):
    g = np.cos(x)
    g[[5, 80]] += 1.0
    return g

@gradcli.check(x=np.linspace(-1.0, 1.0, 5), mode="fast")
def narrow(x):
    return np.sum(np.sin(x))

@narrow.grad
def narrow_grad(x):
    g = np.cos(x)
    g[2] *= 2
    return g

@gradcli.check(x=np.linspace(-1.0, 1.0, 6), mode="fast")
def layer(x):
    return np.tanh(x)

@layer.vjp
def layer_vjp(g, x):
    out = g * (1 - np.tanh(x) ** 2)
    out[4] *= 3
    return out
'''


def test_fast_mode_counts_and_lists_each_wrong_entry_once(tmp_path):
    checks = run(tmp_path, FAST)
    x = np.linspace(-2.0, 2.0, 107)
    wide = checks["wide"]
    assert wide["status"] == "fail" and "2 of 107 entries wrong" in wide["message"], wide["message"]
    assert sorted(m["index"][0] for m in wide["mismatches"]) == [5, 80]
    for m in wide["mismatches"]:
        assert m["expected"] == pytest.approx(np.cos(x[m["index"][0]]), rel=1e-9)
        assert m["got"] == pytest.approx(np.cos(x[m["index"][0]]) + 1, rel=1e-9)
    narrow = checks["narrow"]
    assert "1 of 5 entries wrong" in narrow["message"] and [m["index"] for m in narrow["mismatches"]] == [[2]]
    assert narrow["mismatches"][0]["expected"] == pytest.approx(np.cos(0.0), rel=1e-9)
    layer = checks["layer"]
    assert "1 of 6 entries wrong" in layer["message"] and [m["index"] for m in layer["mismatches"]] == [[4]]


# --- reports ------------------------------------------------------------------------------------------

def rnn(X, U, W):
    h = np.zeros(4)
    total = 0.0
    for t in range(8):
        h = np.tanh(X[t] @ U + h @ W)
        total = total + np.sum(h)
    return total


def rnn_grad(X, U, W):  # backprop through time, with dX wrong at steps 1..7 and dU, dW scaled
    hs = [np.zeros(4)]
    for t in range(8):
        hs.append(np.tanh(X[t] @ U + hs[-1] @ W))
    dX, dU, dW = np.zeros_like(X), np.zeros_like(U), np.zeros_like(W)
    dh = np.zeros(4)
    for t in reversed(range(8)):
        da = (dh + 1.0) * (1 - hs[t + 1] ** 2)
        dX[t] = U @ da
        dU += np.outer(X[t], da)
        dW += np.outer(hs[t], da)
        dh = W @ da
    dX[1:] += 0.05
    return dX, 3 * dU, 3 * dW


RNN_INPUTS = {"X": (8, 3), "U": (3, 4), "W": (4, 4)}


def rnn_inputs():
    rng = np.random.default_rng(5)
    return {k: 0.5 * rng.standard_normal(shape) for k, shape in RNN_INPUTS.items()}


def test_the_wrong_count_of_every_input_is_reported(tmp_path):
    source = (inspect.getsource(rnn) + "\n" + inspect.getsource(rnn_grad) + textwrap.dedent('''
        rng = np.random.default_rng(5)
        inputs = {k: 0.5 * rng.standard_normal(s) for k, s in {"X": (8, 3), "U": (3, 4), "W": (4, 4)}.items()}
        gradcli.check(inputs=inputs)(rnn).grad(rnn_grad)
        '''))
    c = run(tmp_path, source)["rnn"]
    inputs = rnn_inputs()
    got = dict(zip(RNN_INPUTS, rnn_grad(**inputs)))
    counts = {}
    for k in RNN_INPUTS:
        true = central(lambda a: rnn(**{**inputs, k: a}), inputs[k])
        counts[k] = int((np.abs(got[k] - true) > 1e-4).sum())
    assert counts["X"] == 21  # seven time steps of three
    assert c["status"] == "fail"
    for k, n in counts.items():
        assert f"{k}: {n} of {inputs[k].size}" in c["message"], c["message"]
    assert f"{sum(counts.values())} of 52 entries wrong" in c["message"]
    # U and W are wrong by far more, but the worst ten still show dX
    assert {m["input"] for m in c["mismatches"]} == {"X", "U", "W"} and len(c["mismatches"]) == 10


SHAPES = '''
@gradcli.check(x=(3,), w=(2, 2), b=(2,))
def shapes(x, w, b):
    return np.sum(x) + np.sum(w) + np.sum(b)

@shapes.grad
def shapes_grad(x, w, b):
    return np.ones(4), np.ones(4), np.ones(2)
'''


def test_every_gradient_of_the_wrong_shape_is_named(tmp_path):
    c = run(tmp_path, SHAPES)["shapes"]
    assert c["status"] == "fail"
    assert "'x' has shape (4,), but x has shape (3,)" in c["message"]
    assert "'w' has shape (4,), but w has shape (2, 2)" in c["message"]
    assert "'b'" not in c["message"]


PROBE = '''
@gradcli.check(x=np.linspace(-1.0, 1.0, 3), w=np.linspace(0.5, 2.0, 4), mode="fast")
def probed(x, w):
    return np.sum(np.sin(np.asarray(x))) + np.sum(np.asarray(w) ** 2)

@probed.grad
def probed_grad(x, w):
    return np.cos(x), 3 * w               # d/dw sum(w^2) = 2w
'''


def test_fast_mode_with_differences_only_names_the_input_that_is_off(tmp_path):
    c = run(tmp_path, PROBE)["probed"]
    assert c["status"] == "fail" and c["reference"] == "richardson"
    assert "<u, J^T v> = <J u, v>" in c["message"]
    assert "the gradient of w (" in c["message"] and "the gradient of x" not in c["message"], c["message"]
    assert [m["input"] for m in c["mismatches"][1:]] == ["<u_w, J^T v>"]


NOISY = '''
@gradcli.check(x=(5,))
def noisy(x):                               # float32 inside: the differences have about four digits
    return np.sum(np.sin(np.asarray(x).astype(np.float32)).astype(np.float64))

@noisy.grad
def noisy_grad(x):
    return np.cos(x)
'''


def test_no_float64_hint_for_float64_inputs(tmp_path):
    c = run(tmp_path, NOISY)["noisy"]
    assert c["status"] == "inconclusive"
    assert "float64 inputs" not in c["message"] and "evaluating the function in float64" in c["message"]
    f0 = np.zeros(1)
    assert float64_hint(SimpleNamespace(dtype="float32", f0=f0)) == "float64 inputs, "
    assert float64_hint(SimpleNamespace(dtype="float64", f0=f0 + 1.0), 1e-17) == ""


LAYERS = '''
@gradcli.check(x=np.array([0.5, -1.0]))
def cut(x):
    return np.sum(np.asarray(x) ** 2)

@cut.grad
def cut_grad(x):
    return 2 * x
'''


def test_notes_name_files_by_their_path(tmp_path):
    for d in ("a", "b", "c"):
        (tmp_path / d).mkdir()
        model(tmp_path / d / "layers.py", HEADER, LAYERS)
    doc = strict_json(check("a", "b", "c", "--json", cwd=tmp_path).stdout)
    notes = [n for c in doc["checks"] for n in c.get("notes", []) if "cut the trace" in n]
    assert notes == [f"np.asarray cut the trace ({d}/layers.py:7)" for d in ("a", "b", "c")]


NAN = '''
@gradcli.check(x=np.linspace(-1.0, 1.0, 6))
def nan_grad(x):
    return np.sum(x ** 3)

@nan_grad.grad
def nan_grad_grad(x):
    g = 3 * x ** 2
    g[[1, 4]] = np.nan
    g[0] += 1.0
    return g
'''


def test_nan_entries_are_the_worst(tmp_path):
    c = run(tmp_path, NAN)["nan_grad"]
    x = np.linspace(-1.0, 1.0, 6)
    assert c["status"] == "fail" and "3 of 6 entries wrong" in c["message"]
    assert [m["index"][0] for m in c["mismatches"]] in ([1, 4, 0], [4, 1, 0])
    for m in c["mismatches"]:
        assert m["expected"] == pytest.approx(3 * x[m["index"][0]] ** 2, rel=1e-9)
    assert [m["got"] for m in c["mismatches"][:2]] == [None, None]  # NaN is null in the JSON
    table = check(tmp_path / "model.py").stdout.split("entries wrong")[1]
    assert table.index("nan") < table.index("1.0e+00")  # the table lists them first too


# --- outputs: tuples and lists of arrays of any shapes ------------------------------------------------

OUTPUTS = '''
def pieces(x):
    return [np.sum(x ** 2), 3 * x[2:]]

@gradcli.check(x=np.linspace(-1.0, 1.0, 5))
def as_tuple(x):
    return tuple(pieces(x))

@gradcli.check(x=np.linspace(-1.0, 1.0, 5))
def as_list(x):
    return pieces(x)

@gradcli.check(x=np.linspace(-1.0, 1.0, 5), output=1)
def list_second(x):
    return pieces(x)

@gradcli.check(x=np.linspace(-1.0, 1.0, 5), output=1)
def list_second_vjp(x):
    return pieces(x)

@list_second_vjp.vjp
def list_second_vjp_vjp(g, x):
    out = np.zeros_like(x)
    out[2:] = 3 * g
    return out

@gradcli.check(x=np.linspace(-1.0, 1.0, 5), output=1)
def split(x):
    return np.split(x ** 2, [2])

@split.vjp
def split_vjp(g, x):
    out = np.zeros_like(x)
    out[2:] = 2 * x[2:] * g
    return out

@gradcli.check(x=np.linspace(-1.0, 1.0, 5))
def list_wrong(x):
    return pieces(x)

@list_wrong.grad
def list_wrong_grad(x):
    return 3 * x
'''


def test_lists_of_arrays_are_outputs_like_tuples(tmp_path):
    checks = run(tmp_path, OUTPUTS)
    assert statuses(checks) == {"as_tuple": "pass", "as_list": "pass", "list_second": "pass",
                                "list_second_vjp": "pass", "split": "pass", "list_wrong": "fail"}
    x = np.linspace(-1.0, 1.0, 5)
    for m in checks["list_wrong"]["mismatches"]:  # the gradient of output 0, sum(x^2), is 2x
        assert m["expected"] == pytest.approx(2 * x[m["index"][0]], rel=1e-8)


# --- the summary counts -------------------------------------------------------------------------------

MIXED = '''
@gradcli.check(x=(3,))
def good(x):
    return np.sum(x ** 2)

@good.grad
def good_grad(x):
    return 2 * x

@gradcli.check(x=(3,))
def bad(x):
    return np.sum(x ** 2)

@bad.grad
def bad_grad(x):
    return 3 * x

@gradcli.check(x=(3,))
def unseeded(x):                            # different values at every call: inconclusive
    return np.sum(x ** 2) + np.random.default_rng().standard_normal()

@gradcli.check(x=(3,))
def raises(x):
    raise ValueError("boom")
'''


def test_json_summary_matches_the_summary_line_and_junit(tmp_path):
    model(tmp_path / "mixed.py", HEADER, MIXED)
    (tmp_path / "broken.py").write_text("import gradcli\ndef (:\n")
    doc = strict_json(check(tmp_path / "mixed.py", tmp_path / "broken.py", "--json").stdout)
    assert {c["name"]: c["status"] for c in doc["checks"]} == {"good": "pass", "bad": "fail",
                                                                "unseeded": "inconclusive", "raises": "error"}
    s = doc["summary"]
    assert (s["passed"], s["failed"], s["inconclusive"], s["errors"], s["skipped"], s["total"]) == (1, 1, 1, 2, 0, 4)
    junit = tmp_path / "report.xml"
    text = check(tmp_path / "mixed.py", tmp_path / "broken.py", "--junit", junit).stdout
    assert "1 passed, 1 failed, 1 inconclusive, 1 error, 1 file error" in text
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("5", "2", "2")
    assert int(suite.get("failures")) == s["failed"] + s["inconclusive"]
    assert int(suite.get("errors")) == s["errors"]
