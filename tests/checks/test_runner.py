"""run_check: correct gradients pass, deliberately broken ones fail, with the report naming the element."""
import numpy as np
import pytest

import gradcli.trace
from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check


def run(fn, defaults=None, **kw):
    return run_check(build_spec(fn, **kw), defaults or {})


@pytest.fixture(params=["traced", "numerics"])
def reference(request, monkeypatch):
    """Every bug must be caught with traced AD as the reference and with finite differences alone."""
    if request.param == "numerics":
        def no_trace(*a, **k):
            raise RuntimeError("tracing switched off for this test")
        monkeypatch.setattr(gradcli.trace, "trace", no_trace)
    return request.param


# --- models ------------------------------------------------------------------------------------------

def affine(X, W, b, C):
    return np.sum((X @ W + b) * C)


def affine_grad(X, W, b, C):
    return C @ W.T, X.T @ C, C.sum(axis=0)


def softmax_ce(W, X, y):
    s = X @ W
    s = s - s.max(axis=1, keepdims=True)
    p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    return -np.mean(np.log(p[np.arange(len(y)), y]))


def _probs(W, X, y):
    s = X @ W
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return p


def softmax_ce_grad(W, X, y):
    return {"W": X.T @ _probs(W, X, y) / len(y)}


def xsinx(x):
    return np.sum(x * np.sin(x))


AFFINE = dict(X=(5, 4), W=(4, 4), b=(4,), C=(5, 4), wrt=["X", "W", "b"])
SOFTMAX = dict(W=(6, 6), X=(8, 6), y=np.array([0, 1, 2, 3, 4, 5, 0, 1]), wrt=["W"])


def test_correct_gradients_pass(reference):
    r = run(affine, grad=affine_grad, **AFFINE)
    assert r.status == "pass", r.message
    r = run(softmax_ce, grad=softmax_ce_grad, **SOFTMAX)  # y is an int input: a constant
    assert r.status == "pass", r.message
    assert r.kind == "grad" and r.mode == "full" and "hand_written" in r.methods
    r = run(xsinx, grad=lambda x: np.sin(x) + x * np.cos(x), x=(3, 5))
    assert r.status == "pass", r.message
    if reference == "traced":
        assert r.reference == "traced_reverse"
    else:
        assert r.reference == "richardson" and any("tracing failed" in n for n in r.notes)


BUGS = {
    "missing transpose": (softmax_ce, lambda W, X, y: (X.T @ _probs(W, X, y) / len(y)).T, SOFTMAX),
    "forgotten 1/N": (softmax_ce, lambda W, X, y: X.T @ _probs(W, X, y), SOFTMAX),
    "wrong axis": (affine, lambda X, W, b, C: (C @ W.T, X.T @ C, C.sum(axis=1)[:4]), AFFINE),
    "dropped product-rule term": (xsinx, lambda x: np.sin(x), dict(x=(3, 5))),
    "1e-3 relative scale": (xsinx, lambda x: (np.sin(x) + x * np.cos(x)) * (1 + 1e-3), dict(x=(3, 5))),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_deliberate_bugs_fail(bug, reference):
    fn, grad, inputs = BUGS[bug]
    r = run(fn, grad=grad, **inputs)
    assert r.status == "fail", (bug, r.status, r.message)
    m = r.mismatches[0]
    assert m.input in inputs["wrt"] if "wrt" in inputs else m.input in inputs
    assert m.abs_error > 0 and m.expected != m.got
    assert "disagrees with" in r.message and m.input in r.message


def test_single_wrong_element_by_1e_3(reference):
    def grad(w):
        g = np.sin(w) + w * np.cos(w)
        g[2, 3] *= 1 + 1e-3
        return g
    r = run(lambda w: np.sum(w * np.sin(w)), grad=grad, w=(10, 10))
    assert r.status == "fail", r.message
    assert len(r.mismatches) == 1
    m = r.mismatches[0]
    assert (m.input, m.index) == ("w", (2, 3)) and m.rel_error == pytest.approx(1e-3, rel=1e-3)
    assert "w[2, 3]" in r.message and "1 of 100" in r.message


def test_single_wrong_element_in_10_000(reference):
    # 10^4 elements with traced AD; finite differences alone cost ~7 calls per element, so 900 there
    n = 100 if reference == "traced" else 30
    c = np.random.default_rng(5).standard_normal((n, n))

    def loss(w):
        return np.sum(np.tanh(w) * c)

    def grad(w):
        g = (1 - np.tanh(w) ** 2) * c
        g[17, 22] *= 1 + 1e-3
        return g
    r = run(loss, grad=grad, w=(n, n))
    assert r.status == "fail", r.message
    assert [(m.input, m.index) for m in r.mismatches] == [("w", (17, 22))]
    assert r.mode == "full"
    ok = run(loss, grad=lambda w: (1 - np.tanh(w) ** 2) * c, w=(n, n))
    assert ok.status == "pass", ok.message


def test_tanh_layer_vjp(reference):
    def layer(x):
        return np.tanh(x)
    r = run(layer, vjp=lambda g, x: g * (1 - np.tanh(x) ** 2), x=(4, 3))
    assert r.status == "pass" and r.kind == "vjp" and r.mode == "full", r.message
    bad = run(layer, vjp=lambda g, x: g * (1 - np.tanh(x) ** 2) * (1 + 1e-3), x=(4, 3))
    assert bad.status == "fail"
    assert bad.mismatches[0].output_index == bad.mismatches[0].index  # the diagonal of the Jacobian


def test_matmul_layer_vjp_full_and_fast(reference):
    W = np.random.default_rng(2).standard_normal((3, 5))

    def layer(x):
        return np.tanh(x @ W)

    def vjp(g, x):
        return (g * (1 - np.tanh(x @ W) ** 2)) @ W.T

    def vjp_no_transpose(g, x):
        return (g * (1 - np.tanh(x @ W) ** 2)) @ W[:, :3]
    for mode in ("full", "fast"):
        assert run(layer, vjp=vjp, x=(4, 3), mode=mode).status == "pass"
        r = run(layer, vjp=vjp_no_transpose, x=(4, 3), mode=mode)
        assert r.status == "fail" and r.mode == mode, r.message


def test_string_expressions(reference):
    assert run("x*sin(y)", grad={"x": "sin(y)", "y": "x*cos(y)"}, x=1.5, y=2.0).status == "pass"
    r = run("x*sin(y)", grad={"x": "sin(y)", "y": "cos(y)"}, x=1.5, y=2.0)
    assert r.status == "fail" and r.mismatches[0].input == "y" and "at y: expected" in r.message
    arrays = run("x**2*exp(y)", grad={"x": "2*x*exp(y)", "y": "x**2*exp(y)"}, x=(5,), y=0.5)
    assert arrays.status == "pass", arrays.message
    assert run("x*sin(y), x+y", x=0.5, y=0.25).status == "pass"  # gradcli's AD of the graph vs numerics


def test_gradient_function_problems_fail_with_clear_messages():
    def f(x, w):
        return np.sum(x * w)
    r = run(f, grad=lambda x, w: w, x=(3,), w=(3,))
    assert r.status == "fail" and "returned a single ndarray for 2 inputs" in r.message
    r = run(f, grad=lambda x, w: (w,), x=(3,), w=(3,))
    assert r.status == "fail" and "returned 1 gradient for 2 inputs (x, w)" in r.message and "wrt=" in r.message
    r = run(f, grad=lambda x, w: (w, x[:2]), x=(3,), w=(3,))
    assert r.status == "fail" and "'w' has shape (2,), but w has shape (3,)" in r.message
    r = run(f, grad=lambda x, w: {"x": w}, x=(3,), w=(3,))
    assert r.status == "fail" and "no gradient for 'w'" in r.message

    def raising_grad(x, w):
        return x / undefined_name  # noqa: F821
    r = run(f, grad=raising_grad, x=(3,), w=(3,))
    assert r.status == "fail" and "NameError" in r.message
    assert "raising_grad" in r.traceback and "gradcli/checks" not in r.traceback
    assert run(f, grad=lambda x, w: {"w": x, "x": w}, x=(3,), w=(3,)).status == "pass"


def test_raising_function_is_an_error_with_the_users_traceback():
    def helper(x):
        raise ValueError("boom in the model")

    def model(x):
        return helper(x) + 1

    r = run(model, grad=lambda x: x, x=(3,))
    assert r.status == "error" and "boom in the model" in r.message
    assert "in model" in r.traceback and "in helper" in r.traceback
    assert "gradcli/checks" not in r.traceback and "gradcli/" not in r.traceback.replace("tests/", "")


def test_with_grad_and_output_index(reference):
    def svm_like(W, X):
        s = X @ W
        return np.sum(s ** 2), {"W": 2 * X.T @ s}
    assert run(svm_like, W=(3, 2), X=(4, 3), wrt=["W"], with_grad=True).status == "pass"

    def svm_wrong(W, X):
        s = X @ W
        return np.sum(s ** 2), {"W": X.T @ s}
    r = run(svm_wrong, W=(3, 2), X=(4, 3), wrt=["W"], with_grad=True)
    assert r.status == "fail" and r.kind == "grad"

    def two_outputs(x):
        return np.sum(x ** 3), np.sum(x)
    assert run(two_outputs, grad=lambda x: 3 * x ** 2, x=(4,)).status == "pass"
    assert run(two_outputs, grad=lambda x: np.ones(4), x=(4,), output=1).status == "pass"
    assert run(two_outputs, grad=lambda x: 3 * x ** 2, x=(4,), output=1).status == "fail"


def test_autodiff_only_and_statuses():
    assert run(lambda x: np.sum(np.tanh(x) * x), x=(3, 3)).status == "pass"
    r = run(lambda x: np.sum(np.abs(x)), x=np.array([1.0, 0.0, -2.0]))
    assert r.status == "nondifferentiable" and "x[1]" in r.message
    r = run(lambda x: np.sum(np.log(x)), x=np.array([1.0, -1.0]))
    assert r.status == "undefined"
    r = run(np.sin, x=np.array([0.3, np.nan, 1.2]))  # traced AD still checked where f is finite
    assert r.status == "undefined" and "x[1]: the input is nan" in r.message and not r.notes, r.notes
    r = run(lambda n: float(np.sum(n)), n=np.array([1, 2]))
    assert r.status == "skipped" and "no floating-point inputs" in r.message


def test_domain_and_dtype(reference):
    def f(x):
        return np.sum(np.log(x) * np.sqrt(x))

    def g(x):
        return np.sqrt(x) * (1 / x + np.log(x) / (2 * x))
    assert run(f, grad=g, x=(20,), domain="positive").status == "pass"
    r32 = run(f, grad=lambda x: g(x).astype(np.float32), x=(20,), domain="positive", dtype="float32")
    assert r32.status == "pass", r32.message
    bad32 = run(f, grad=lambda x: g(x) * np.float32(1.002), x=(20,), domain="positive", dtype="float32")
    assert bad32.status == "fail"


def test_inconclusive_when_numerics_cannot_decide(monkeypatch):
    monkeypatch.setattr(gradcli.trace, "trace", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("off")))

    def noisy(x):  # rounded to float32 inside: finite differences have ~4 digits
        return np.sum(np.sin(x).astype(np.float32).astype(np.float64))
    # the Taylor-remainder test resolves such checks (tests/checks/test_taylor.py); here it cannot decide
    import gradcli.checks.comparisons.taylor as taylor
    r = run(noisy, grad=lambda x: np.cos(x), x=(5,))
    # slope 2, but only to ~1e-2: too coarse to call a float32 function's gradient verified
    assert r.status == "inconclusive" and "the Taylor test agrees but only to" in r.message, r.message
    monkeypatch.setattr(taylor, "taylor_test", lambda *a, **k: taylor.TaylorResult(1, None, "undetermined", "off"))
    r = run(noisy, grad=lambda x: np.cos(x), x=(5,))
    assert r.status == "inconclusive", r.message
    assert "float64" in r.message


def test_fast_mode_million_parameter_loss():
    def loss(w):
        return np.sum(np.tanh(w) ** 2)

    def grad(w):
        t = np.tanh(w)
        return 2 * t * (1 - t ** 2)
    r = run(loss, grad=grad, w=(1000, 1000))
    assert r.mode == "fast" and r.status == "pass", r.message

    def bad(w):
        g = grad(w)
        g[123, 456] = 0.0
        return g
    r = run(loss, grad=bad, w=(1000, 1000), mode="fast")
    assert r.status == "fail" and r.mismatches[0].index == (123, 456)


def test_defaults_and_options():
    def f(x):
        return np.sum(x ** 2)
    wrong = lambda x: 2 * x * (1 + 1e-3)  # noqa: E731
    assert run(f, grad=wrong, x=(4,)).status == "fail"
    assert run(f, {"rtol": 1e-2}, grad=wrong, x=(4,)).status == "pass"
    assert run(f, {"rtol": 1e-2}, grad=wrong, x=(4,), rtol=1e-6).status == "fail"
    assert run(f, {"mode": "fast", "unrelated": 1}, grad=wrong, x=(4,)).mode == "fast"


def test_result_serializes():
    r = run(lambda w: np.sum(w * np.sin(w)), grad=lambda w: np.sin(w), w=(2, 2))
    d = r.to_dict()
    assert d["status"] == "fail" and d["mismatches"][0]["input"] == "w"
    assert set(d["methods"]) >= {"hand_written", "richardson"}


def test_a_function_with_unseeded_randomness_is_inconclusive_not_failed():
    rng = np.random.default_rng()

    def noisy(x):
        return np.sum(x ** 2) * (1 + 1e-6 * rng.random())

    r = run(noisy, grad=lambda x: 2 * x, x=(50,))
    assert r.status == "inconclusive"
    assert "different values for the same inputs" in r.message


def _relu_layer_near_a_kink():
    rng = np.random.default_rng(3)
    X, W, c = rng.standard_normal((8, 5)), rng.standard_normal((5, 6)), rng.standard_normal((8, 6))
    W[0, 2] -= ((X @ W)[1, 2] - 5e-5) / X[1, 0]  # one pre-activation 5e-5 from the ReLU's kink
    assert abs((X @ W)[1, 2] - 5e-5) < 1e-12
    return X, W, c


def test_a_kink_near_the_point_does_not_fail_a_right_gradient():
    # the default steps (~1e-3) reach across the kink and bend the finite differences; the closer look
    # with 4096 times smaller steps agrees with traced AD, so the right gradient passes and a wrong one fails
    X, W, c = _relu_layer_near_a_kink()
    loss = lambda W: np.sum(np.maximum(X @ W, 0) * c)  # noqa: E731
    r = run(loss, grad=lambda W: X.T @ ((X @ W > 0) * c), W=W)
    assert r.status == "pass", r.message
    assert any("reach across a kink" in n for n in r.notes), r.notes

    def wrong(W):
        g = X.T @ ((X @ W > 0) * c)
        g[0, 2] *= 1.01  # the element whose steps cross the kink
        return g
    bad = run(loss, grad=wrong, W=W)
    assert bad.status == "fail" and [(m.input, m.index) for m in bad.mismatches] == [("W", (0, 2))], bad.message


def test_a_kink_near_the_point_in_fast_mode():
    X, W, c = _relu_layer_near_a_kink()
    loss = lambda W: np.sum(np.maximum(X @ W, 0) * c)  # noqa: E731
    r = run(loss, grad=lambda W: X.T @ ((X @ W > 0) * c), W=W, mode="fast")
    assert r.status == "pass", r.message


def test_min_and_max_of_equal_arguments_split_the_derivative():
    # np.minimum(x, x) is x: traced AD must give 1, not the 0 of a one-sided rule at the tie
    r = run(lambda x: np.sum(np.minimum(x, x) + np.maximum(2 * x, x + x)), x=(4,))
    assert r.status == "pass", r.message


def test_a_wrong_value_where_zero_is_expected_shows_an_infinite_relative_error():
    # the ReLU gradient is exactly 0 for the negative inputs; a gradient that passes 1 there is wrong
    # by an infinite relative error, which the summary must not hide behind the other entries' 0
    x = np.array([-1.0, -2.0, 0.5, 1.5])
    r = run(lambda x: np.sum(np.maximum(x, 0)), grad=lambda x: np.ones_like(x), x=x)
    assert r.status == "fail" and r.max_rel_error == np.inf, (r.status, r.max_rel_error)


def test_a_nan_in_a_given_input_leaves_the_finite_elements_judged(reference):
    # sin's derivative is cos (closed form) at every finite element; the nan one has none
    x = np.array([0.3, np.nan, 1.2, -0.7])
    wrong = run(np.sin, vjp=lambda g, x: {"x": g * np.cos(x) * 1.001}, x=x)
    assert wrong.status == "fail" and "x[0]" in wrong.message
    assert any("x[1]: the input is nan" in n for n in wrong.notes)
    right = run(np.sin, vjp=lambda g, x: {"x": g * np.cos(x)}, x=x)
    assert right.status == "undefined" and "x[1]: the input is nan" in right.message
    assert "the other entries agree" in right.message
    assert run(lambda x: np.sum(np.sin(x)), x=x).status == "undefined"  # no finite output: nothing to judge
    # fast mode's random directions and cotangents leave the nan out: the rest is judged there too
    fast = run(np.sin, vjp=lambda g, x: {"x": g * np.cos(x) * 1.01}, x=x, mode="fast")
    assert fast.status == "fail" and any("x[1]: the input is nan" in n for n in fast.notes)
