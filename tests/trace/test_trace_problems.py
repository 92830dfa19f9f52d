"""What tracing cannot see is named, with the user's file:line; everything else keeps running."""
from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import line_of

from gradcli.trace import Traced, trace

X = np.random.default_rng(0).normal(size=(3, 4))


def uses_asarray(x):
    y = np.asarray(x)  # <- here
    return np.sum(np.tanh(x) * y)


def uses_float(x):
    s = float(x.sum())  # <- here
    return np.sum(x * s)


def uses_nanquantile(x):
    w = np.nanquantile(x[0, :3], 0.3)  # <- here
    return np.sum(w * x[0, :2])


def uses_nanmedian(x):
    return np.sum(np.nanmedian(x, axis=0))  # <- here


def uses_item(x):
    return x.sum() * x.max().item()  # <- here


def uses_unrouted_method(x):
    return np.sum(x.compress([True, False, True], axis=0)) + x.sum()  # <- here


@pytest.mark.parametrize("fn, call", [
    (uses_asarray, "np.asarray cut the trace"), (uses_float, "float() cut the trace"),
    (uses_nanquantile, "np.nanquantile is not traceable"), (uses_nanmedian, "np.nanmedian is not traceable"),
    (uses_item, "x.item() cut the trace"), (uses_unrouted_method, "ndarray.compress is not traceable"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_problems_are_named_with_the_users_line(fn, call):
    t = trace(fn, {"x": X}, ["x"])
    assert not t.ok
    assert f"{call} ({line_of(fn)})" in t.problems, t.problems
    assert np.allclose(t.value, fn(X))  # the user's code kept running on plain values


def test_everything_cut_says_so():
    t = trace(lambda x: np.sum(np.asarray(x) ** 2), {"x": X}, ["x"])
    assert not t.ok
    assert any("np.asarray cut the trace" in p for p in t.problems)
    assert "the output is a plain array: the trace was cut on the way to it" in t.problems
    assert np.all(t.gradient()["x"] == 0)


def test_output_independent_of_every_input():
    t = trace(lambda x: np.ones(3), {"x": X}, ["x"])
    assert not t.ok
    assert t.problems == ["the output does not depend on any differentiated input (x): it is a plain array"]


def test_output_independent_of_some_inputs_is_fine():
    t = trace(lambda x, w: np.sum(x ** 2), {"x": X, "w": np.ones(2)}, ["x", "w"])
    assert t.ok and t.problems == []
    assert any("does not depend on w" in n for n in t.notes)
    g = t.gradient()
    np.testing.assert_allclose(g["x"], 2 * X)
    assert np.all(g["w"] == 0) and g["w"].shape == (2,)


def test_problem_after_the_output_does_not_matter():
    def f(x):
        loss = np.sum(x ** 2)
        print(f"loss {float(loss):.3f} {loss:.2f}")  # logging only
        return loss

    t = trace(f, {"x": X}, ["x"])
    assert t.ok, t.problems
    assert any("float() cut the trace" in n for n in t.notes)


def test_plain_use_of_a_scattered_buffer_is_a_cut():
    def f(x):
        buf = np.zeros((5, 4))
        np.add.at(buf, [0, 4, 0], x)  # <- here
        return np.sum(np.tanh(buf * 2))  # a plain numpy call on buf: invisible to tracing

    t = trace(f, {"x": X}, ["x"])
    assert not t.ok
    assert f"np.add.at into a plain ndarray cut the trace ({line_of(f)})" in t.problems


def test_in_place_add_into_a_plain_buffer_rebinds_the_name():
    def f(x):
        h = np.zeros((3, 4))
        h += x * 2
        h *= x
        return h.sum()

    t = trace(f, {"x": X}, ["x"])
    assert t.ok, t.problems
    np.testing.assert_allclose(t.gradient()["x"], 4 * X)


def test_int_inputs_not_in_wrt_pass_through():
    seen = {}

    def f(x, labels, scale):
        seen["labels"], seen["scale"], seen["x"] = labels, scale, x
        return np.sum(x[np.arange(3), labels]) * scale

    labels = np.array([0, 3, 1])
    t = trace(f, {"x": X, "labels": labels, "scale": 2}, ["x"])
    assert seen["labels"] is labels and seen["scale"] == 2 and isinstance(seen["x"], Traced)
    expected = np.zeros_like(X)
    expected[np.arange(3), labels] = 2
    np.testing.assert_allclose(t.gradient()["x"], expected)


def test_tuple_outputs_select_with_output():
    def f(x):
        return np.sum(x), x * 3, "aux"

    assert trace(f, {"x": X}, ["x"]).value == np.sum(X)  # default: the first element
    t = trace(f, {"x": X}, ["x"], output=1)
    assert t.value.shape == (3, 4)
    np.testing.assert_allclose(t.vjp(np.ones((3, 4)))["x"], 3 * np.ones((3, 4)))
    np.testing.assert_allclose(t.jvp({"x": np.ones((3, 4))}), 3 * np.ones((3, 4)))


def test_gradient_for_every_size_one_shape():
    for shape in [(), (1,), (1, 1)]:
        t = trace(lambda x: np.reshape(np.sum(x * x), shape), {"x": X}, ["x"])
        assert t.value.shape == shape
        np.testing.assert_allclose(t.gradient()["x"], 2 * X)
    with pytest.raises(ValueError, match="size 1"):
        trace(lambda x: x * 2, {"x": X}, ["x"]).gradient()


def test_user_exceptions_propagate_unchanged():
    class Boom(Exception):
        pass

    def f(x):
        raise Boom("mine")

    with pytest.raises(Boom, match="mine"):
        trace(f, {"x": X}, ["x"])


def test_wrt_must_name_inputs():
    with pytest.raises(ValueError, match="not given"):
        trace(lambda x: x, {"x": X}, ["y"])


def uses_np_array(x):
    return np.sum(np.array([x[0, 0], x[1, 1]])) + x.sum()  # <- here


def sorts_in_place(x):
    y = x * 1.0
    y.sort(axis=1)  # <- here
    return y.sum()


def test_np_array_of_traced_scalars_is_traced_not_cut():
    # np.array of a list of traced values is a gather of them while a trace runs
    t = trace(uses_np_array, {"x": X}, ["x"])
    assert t.ok and t.problems == []
    np.testing.assert_allclose(t.value, uses_np_array(X))
    h, g = 1e-6, np.zeros_like(X)
    for k in range(X.size):
        d = np.zeros_like(X)
        d.flat[k] = h
        g.flat[k] = (np.sum(uses_np_array(X + d)) - np.sum(uses_np_array(X - d))) / (2 * h)
    np.testing.assert_allclose(t.vjp(np.ones(t.value.shape))["x"], g, atol=1e-8)


def test_in_place_methods_work_on_a_copy_and_are_named():
    t = trace(sorts_in_place, {"x": X}, ["x"])
    assert t.problems == [f"ndarray.sort is not traceable ({line_of(sorts_in_place)})"]
    np.testing.assert_allclose(t.value, X.sum())


def test_a_library_converting_the_array_is_reported_at_the_users_line():
    ndimage = pytest.importorskip("scipy.ndimage")

    def f(x):
        return np.sum(ndimage.gaussian_filter1d(x, 1.0))  # <- here

    t = trace(f, {"x": X}, ["x"])
    assert not t.ok
    assert any(line_of(f) in p for p in t.problems), t.problems


def stores_into_plain(x):
    hs = np.zeros((3, 4))
    for t in range(3):
        hs[t] = np.tanh(x[t])  # <- here
    return hs.sum() + x.sum()


def unsupported_options(x):
    a = np.mean(x, where=x > 0)  # <- here
    b = np.sum(x, out=np.empty(()))  # <- here too
    return x.sum() + a + b


def test_assignment_into_a_plain_array_is_a_named_cut():
    t = trace(stores_into_plain, {"x": X}, ["x"])
    assert t.problems == [f"assignment into a plain ndarray cut the trace ({line_of(stores_into_plain)})"]


def test_unsupported_options_name_the_option():
    t = trace(unsupported_options, {"x": X}, ["x"])
    assert t.problems == [f"np.mean (where=) is not traceable ({line_of(unsupported_options)})",
                          f"np.sum (out=) is not traceable ({line_of(unsupported_options, '# <- here too')})"]
