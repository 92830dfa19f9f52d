"""The pytest plugin: ``pytest --gradcli model.py`` and ``@pytest.mark.gradcli(...)`` run registered checks."""
from __future__ import annotations

import textwrap
from importlib.metadata import entry_points

import pytest

# pytester runs each inner session in this process and then forgets the modules it imported; numpy's C
# extensions cannot be loaded twice in a process, so what the inner sessions load is loaded here first
import numpy.ma  # noqa: E402,F401
import numpy.random  # noqa: E402,F401
from gradcli.checks.process import isolated  # noqa: E402,F401
from gradcli.checks import session  # noqa: E402,F401

pytest_plugins = ["pytester"]
# the inner runs need neither hypothesis (a second or more to import in a fresh run) nor a cache
QUICK = ("-p", "no:hypothesispytest", "-p", "no:cacheprovider")

MODEL = textwrap.dedent('''
    import numpy as np
    import gradcli


    @gradcli.check(x=(3,))
    def cube(x):
        return np.sum(x ** 3)


    @cube.grad
    def cube_grad(x):
        return 3 * x ** 2


    @gradcli.check(x=(4,))
    def square(x):
        return np.sum(x ** 2)


    @square.grad
    def square_grad(x):
        return x  # should be 2 * x
''')


def test_the_plugin_is_registered_as_an_entry_point():
    eps = entry_points(group="pytest11")
    assert any(ep.name == "gradcli" and ep.value == "gradcli.pytest_plugin" for ep in eps)


def test_gradcli_option_collects_one_test_per_check(pytester):
    pytester.makepyfile(model=MODEL)
    result = pytester.runpytest("--gradcli", "model.py", "-v", *QUICK)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*model.py::cube PASSED*", "*model.py::square FAILED*"])
    result.stdout.fnmatch_lines(["*FAIL square*", "*x[[]*expected*got*"])
    assert "Traceback" not in result.stdout.str()


def test_without_the_option_model_files_are_left_alone(pytester):
    pytester.makepyfile(model=MODEL, test_other="def test_ok():\n    assert True\n")
    result = pytester.runpytest(*QUICK)
    result.assert_outcomes(passed=1)


def test_test_files_are_not_taken_for_models(pytester):
    pytester.makepyfile(test_uses_gradcli="import gradcli\n\ndef test_ok():\n    assert gradcli\n")
    pytester.mkdir("models").joinpath("m.py").write_text(MODEL)
    result = pytester.runpytest("--gradcli", ".", *QUICK)
    result.assert_outcomes(passed=2, failed=1)


def test_a_model_that_cannot_be_imported_is_a_collection_error(pytester):
    pytester.makepyfile(broken="import gradcli\nraise RuntimeError('oops')\n")
    result = pytester.runpytest("--gradcli", "broken.py", *QUICK)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*broken.py*RuntimeError: oops*"])


def test_a_model_needing_a_framework_that_is_not_installed_fails_naming_the_extra_and_others_run(pytester):
    # what `import torch` raises where torch is not installed (torch is installed here)
    pytester.makepyfile(
        needs_torch="import gradcli\nraise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n",
        needs_jax="import gradcli\nraise ModuleNotFoundError(\"No module named 'jax'\", name='jax.numpy')\n")
    pytester.makepyfile(good=MODEL)
    result = pytester.runpytest("--gradcli", ".", *QUICK)
    result.assert_outcomes(passed=1, failed=3)  # cube passes, square fails; no collection error
    result.stdout.fnmatch_lines(["*jax is not installed; this file needs it: pip install 'gradcli[[]jax[]]'*",
                                 "*torch is not installed; this file needs it: pip install 'gradcli[[]torch[]]'*"])
    assert "Interrupted" not in result.stdout.str() and "Traceback" not in result.stdout.str()


def test_a_file_that_only_names_gradcli_is_not_taken_for_a_model(pytester):
    pytester.makepyfile(notes='"""Helpers for the plots of what gradcli check reported."""\nX = 1\n')
    pytester.makepyfile(good=MODEL)
    result = pytester.runpytest("--gradcli", ".", *QUICK)
    result.assert_outcomes(passed=1, failed=1)  # good.py's checks; notes.py is no model file
    assert "registers no checks" not in result.stdout.str()


def test_the_marker_runs_checks_in_a_test(pytester):
    pytester.mkdir("models").joinpath("m.py").write_text(MODEL)
    pytester.makepyfile(test_models='''
        import pytest

        @pytest.mark.gradcli("models/m.py")
        def test_all():
            pass

        @pytest.mark.gradcli("models/", k="cube")
        def test_cube_only():
            pass

        @pytest.mark.gradcli("models/nothing_here.py")
        def test_missing():
            pass
    ''')
    result = pytester.runpytest("-v", *QUICK)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*test_all FAILED*", "*test_cube_only PASSED*", "*test_missing FAILED*"])
    result.stdout.fnmatch_lines(["*FAIL square*"])
    result.stdout.fnmatch_lines(["*nothing_here.py: no such file or directory*"])


@pytest.mark.parametrize("args, says", [
    ("5", "takes model files or folders as str or pathlib paths, got 5 (int)"),
    ("b'models/m.py'", "got b'models/m.py' (bytes)"),
    ("'models/m.py', k=3", "k is a -k expression (str), got 3 (int)"),
    ("'models/m.py', pattern='x'", "unknown keyword 'pattern' (it takes only k)"),
    ("", "needs at least one model file or folder"),
])
def test_a_marker_with_wrong_arguments_fails_its_test_with_one_usage_line(pytester, args, says):
    pytester.mkdir("models").joinpath("m.py").write_text(MODEL)
    pytester.makepyfile(test_models=f"""
        import pytest

        @pytest.mark.gradcli({args})
        def test_it():
            pass
    """)
    result = pytester.runpytest("-v", *QUICK)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*@pytest.mark.gradcli*{says}*"])
    assert "TypeError" not in result.stdout.str() and "Traceback" not in result.stdout.str()


def test_a_check_that_ends_its_process_cannot_end_pytest_with_a_pass(pytester):
    # `gradcli check` exits 1 here (square fails, quits is an error); pytest must not exit 0
    pytester.makepyfile(model=MODEL + textwrap.dedent('''
        import os


        @gradcli.check(x=(2,))
        def quits(x):
            os._exit(0)
    '''))
    result = pytester.runpytest_subprocess("--gradcli", "model.py", "-v", *QUICK)
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*model.py::square FAILED*", "*model.py::quits FAILED*"])
    pytester.makepyfile(test_marked=textwrap.dedent('''
        import pytest


        @pytest.mark.gradcli("model.py")
        def test_models():
            pass


        def test_after():
            pass
    '''))
    result = pytester.runpytest_subprocess("test_marked.py", "-v", *QUICK)
    assert result.ret == 1
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAIL square*", "*ERROR quits*", "*the model process exited with status 0*"])


def test_the_short_summary_says_what_is_wrong(pytester):
    """pytest's short summary shows a failure's first line: the wrong entries and the error, not the
    check's name and place again (square's gradient is x for 2x: every entry half of the truth)."""
    pytester.makepyfile(model=MODEL, test_models='''
        import pytest

        @pytest.mark.gradcli("model.py")
        def test_all():
            pass
    ''')
    result = pytester.runpytest("--gradcli", "model.py", "test_models.py", "-rf", *QUICK)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["FAILED model.py::square - x: 4 of 4 entries wrong, max rel err 5.0e-01",
                                 "FAILED test_models.py::test_all - Failed: x: 4 of 4 entries wrong*"])
