"""Model behaviours that once passed what was not checked: a gradient with an imaginary part, an empty
input, a negative "shape"."""
import numpy as np
import pytest

from gradcli.checks.registry import build_spec
from gradcli.checks.runner import run_check
from gradcli.core.errors import BadInput


def square_sum(x):
    return np.sum(x ** 2)


def test_a_gradient_with_an_imaginary_part_fails():
    r = run_check(build_spec(square_sum, grad=lambda x: 2 * x + 1j, x=(3,)), {})
    assert r.status == "fail" and "imaginary part" in r.message


def test_a_complex_dtype_with_zero_imaginary_part_is_a_real_gradient():
    r = run_check(build_spec(square_sum, grad=lambda x: (2 * x).astype(complex), x=(3,)), {})
    assert r.status == "pass", r.message


def test_an_empty_input_is_skipped_not_passed():
    r = run_check(build_spec(square_sum, grad=lambda x: 3 * x + 7, x=(0,)), {})
    assert r.status == "skipped" and "empty" in r.message


def test_a_tuple_with_a_negative_size_is_refused():
    with pytest.raises(BadInput, match=r"shape has no negative sizes.*x=\[-1\.0, 4\.0\]"):
        from gradcli.checks.registry import materialize
        materialize({"x": (-1, 4)})
    r = run_check(build_spec(square_sum, grad=lambda x: 2 * x, x=(-1, 4)), {})
    assert r.status == "error" and "negative sizes" in r.message


Z = np.array([1 + 2j, -0.5 + 0.3j, 2 - 1j])


def _pytorch_gradient(f, z, h=1e-6):
    """dL/dRe + i dL/dIm by central differences along each element's real and imaginary parts."""
    g = np.zeros(z.shape, complex)
    for k in range(z.size):
        for unit in (1, 1j):
            d = np.zeros(z.shape, complex)
            d.flat[k] = h * unit
            g.flat[k] += unit * (f(z + d) - f(z - d)) / (2 * h)
    return g


@pytest.mark.parametrize("f", [lambda z: np.sum(np.abs(z) ** 2), lambda z: np.sum(np.real(np.exp(z))),
                               lambda z: np.sum(np.real(z * z) * np.imag(z))])
def test_complex_inputs_follow_pytorchs_convention(f):
    # the gradient of a real loss in a complex z is dL/dRe + i dL/dIm: the right one passes, its
    # conjugate (the other convention) fails, and with no hand-written gradient traced AD is checked
    right = _pytorch_gradient(f, Z)
    assert run_check(build_spec(f, grad=lambda z: right, z=Z), {}).status == "pass"
    r = run_check(build_spec(f, grad=lambda z: np.conj(right), z=Z), {})
    assert r.status == "fail" and "z[" in r.message, r.message
    r = run_check(build_spec(f, z=Z), {})
    assert r.status == "pass" and any("PyTorch's convention" in n for n in r.notes), (r.status, r.message)


def test_a_complex_input_beside_a_real_one_and_a_vjp():
    f = lambda z, w: np.abs(z * w)  # noqa: E731
    w = np.array([0.5, -1.5, 2.0])
    vjp = lambda g, z, w: (g * w * (z * w) / np.abs(z * w), g * np.real(np.conj(z * w) * z) / np.abs(z * w))  # noqa: E731
    r = run_check(build_spec(f, vjp=vjp, z=Z, w=w), {})
    assert r.status == "pass", r.message
    bad = lambda g, z, w: (g * w * np.conj(z * w) / np.abs(z * w), vjp(g, z, w)[1])  # noqa: E731
    assert run_check(build_spec(f, vjp=bad, z=Z, w=w), {}).status == "fail"


def test_order_2_of_a_complex_input_is_skipped_with_the_reason():
    r = run_check(build_spec(lambda z: np.sum(np.abs(z) ** 2), z=Z, order=2), {})
    assert r.status == "skipped" and "complex" in r.message


def test_a_junit_file_that_cannot_be_written_still_shows_the_report(tmp_path, monkeypatch):
    import errno
    import json
    import os

    from click.testing import CliRunner

    from gradcli.cli import check as cli_check
    from gradcli.cli import main

    def full_disk(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(cli_check, "write_atomic", full_disk)
    model = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "mlp.py")
    junit = str(tmp_path / "report.xml")
    table = CliRunner().invoke(main, ["check", model, "--junit", junit])
    assert table.exit_code == 2 and "mlp_loss" in table.stdout and "1 passed" in table.stdout
    assert "error: --junit" in table.stderr and "No space left on device" in table.stderr
    as_json = CliRunner().invoke(main, ["check", model, "--junit", junit, "--json"])
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["checks"][0]["status"] == "pass"  # one document: the report
    assert not os.path.exists(junit)


def test_an_input_too_large_for_memory_is_an_error_saying_so():
    from gradcli.checks import session

    spec = build_spec(square_sum, grad=lambda x: 2 * x, x=(100000, 100000))  # 75 GiB of float64
    r = session.run_one(spec, {})
    assert r.status == "error" and r.message.startswith("out of memory") and "internal error" not in r.message


def test_a_complex_output_is_checked_as_its_real_and_imaginary_parts():
    # <g, exp(ix)> as a real loss: a vjp given g = g_re + i g_im must return Re(conj(g) * i exp(ix))
    x = np.array([0.3, -1.2, 2.0])
    right = lambda g, x: np.real(np.conj(g) * 1j * np.exp(1j * x))  # noqa: E731
    assert run_check(build_spec(lambda x: np.exp(1j * x), vjp=right, x=x), {}).status == "pass"
    wrong = lambda g, x: np.real(g * 1j * np.exp(1j * x))  # noqa: E731 - the cotangent unconjugated
    assert run_check(build_spec(lambda x: np.exp(1j * x), vjp=wrong, x=x), {}).status == "fail"
    r = run_check(build_spec(lambda x: np.fft.rfft(x), x=(6,)), {})  # traced AD of a complex output
    assert r.status == "pass", r.message


def test_a_ufunc_target_takes_its_inputs_in_the_order_given():
    # np.tanh and np.arctan2 take no keywords: the check calls them positionally
    assert run_check(build_spec(np.tanh, x=(3,)), {}).status == "pass"
    r = run_check(build_spec(np.arctan2, x1=np.array([1.0, -2.0]), x2=np.array([0.5, 3.0])), {})
    assert r.status == "pass", r.message


@pytest.mark.parametrize("ragged", [[[1.0, 2.0], [3.0]], [1.0, [2.0, 3.0]]])
def test_a_ragged_gradient_fails_as_not_numeric_not_as_an_internal_error(ragged):
    from gradcli.checks.session import run_one
    r = run_one(build_spec(square_sum, grad=lambda x: ragged, x=(3,)), {})
    assert r.status == "fail" and "not a numeric array" in r.message, r.message


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("__str__ is broken too")


def _raise_unprintable(*args, **kwargs):
    raise _Unprintable()


@pytest.mark.parametrize("where, status", [("function", "error"), ("grad", "fail"), ("vjp", "fail")])
def test_an_exception_whose_str_raises_is_the_checks_status_with_its_name(where, status):
    from gradcli.checks.session import run_one
    f = _raise_unprintable if where == "function" else square_sum
    hooks = {"grad": _raise_unprintable} if where == "grad" else {"vjp": _raise_unprintable} if where == "vjp" else \
        {"grad": lambda x: 2 * x}
    r = run_one(build_spec(f, x=(3,), **hooks), {})
    assert r.status == status and "raised _Unprintable" in r.message, r.message
    assert "internal error" not in r.message


def test_a_project_wrt_naming_no_input_is_a_bad_check_naming_tool_gradcli():
    from gradcli.checks.session import run_one
    r = run_one(build_spec(square_sum, grad=lambda x: 2 * x, x=(3,)), {"wrt": ["nope"]})
    assert r.status == "error" and r.message.startswith("bad check: [tool.gradcli] wrt names 'nope'"), r.message
    assert "internal error" not in r.message
    # one the check has is used as before, and the check's own wrt= wins over the project's
    assert run_one(build_spec(square_sum, grad=lambda x: 2 * x, x=(3,)), {"wrt": "x"}).status == "pass"
    assert run_one(build_spec(square_sum, grad=lambda x: 2 * x, x=(3,), wrt="x"), {"wrt": ["nope"]}).status == "pass"


def test_a_lazy_module_is_an_error_saying_to_initialize_it_and_passes_once_initialized():
    torch = pytest.importorskip("torch")
    from gradcli.checks.session import run_one
    torch.manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64)
    lazy = torch.nn.LazyLinear(2).double()
    r = run_one(build_spec(lazy, x=x), {})
    assert r.status == "error" and "not initialized yet (weight, bias" in r.message, r.message
    assert torch.nn.parameter.is_lazy(lazy.weight)  # the check did not change the module
    lazy(x)
    assert torch.autograd.gradcheck(lambda t: lazy(t), (x.clone().requires_grad_(),))
    assert run_one(build_spec(lazy, x=x), {}).status == "pass"


_SURROGATE_MODEL = '''
import numpy as np
import gradcli

@gradcli.check(x=(3,))
def raises(x):
    raise ValueError("bad \\ud800 text")

def square_sum(x):
    return np.sum(x ** 2)

gradcli.check(square_sum, x=(3,), grad=lambda x: 2 * x)
'''


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_a_lone_surrogate_in_a_message_is_escaped_not_the_end_of_the_report(tmp_path, encoding):
    import os
    import subprocess
    import sys
    (tmp_path / "m.py").write_text(_SURROGATE_MODEL)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": encoding}
    r = subprocess.run([sys.executable, "-m", "gradcli", "check", "m.py"], cwd=tmp_path, capture_output=True,
                       timeout=120, env=env)
    out = r.stdout.decode(encoding)
    assert r.returncode == 1 and b"Traceback (most recent call last):\n  File \"/" not in r.stderr, r.stderr
    assert "ValueError: bad \\ud800 text" in out and "1 passed, 1 error" in out, out


def test_a_model_in_a_folder_whose_name_is_not_utf8_is_checked(tmp_path):
    import os
    import subprocess
    import sys
    folder = os.path.join(os.fsencode(tmp_path), b"bad\xff dir")
    try:
        os.mkdir(folder)
    except (OSError, UnicodeError):
        pytest.skip("this file system takes only UTF-8 names")
    with open(os.path.join(folder, b"m.py"), "w") as fh:
        fh.write("import numpy as np\nimport gradcli\n\ndef square_sum(x):\n    return np.sum(x ** 2)\n\n"
                 "gradcli.check(square_sum, x=(3,), grad=lambda x: 2 * x)\n")
    env = {**os.environ, "NO_COLOR": "1"}
    for cwd, target in ((folder, "m.py"), (os.fsencode(tmp_path), os.fsdecode(b"bad\xff dir"))):
        r = subprocess.run([sys.executable, "-m", "gradcli", "check", target, "--json"], cwd=cwd,
                           capture_output=True, timeout=120, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        import json
        doc = json.loads(r.stdout)
        assert [c["status"] for c in doc["checks"]] == ["pass"] and not doc.get("errors"), doc


def test_tracing_that_raises_an_unprintable_exception_falls_back_to_differences_naming_it():
    from gradcli.checks.session import run_one

    def plain_arrays_only(x):
        if type(x) is not np.ndarray:  # gradcli's traced arrays are not
            raise _Unprintable()
        return np.sum(x ** 2)

    r = run_one(build_spec(plain_arrays_only, grad=lambda x: 2 * x, x=(3,)), {})
    assert r.status == "pass" and "tracing failed (_Unprintable)" in " ".join(r.notes), (r.message, r.notes)
