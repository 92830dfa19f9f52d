"""The batch pipeline on a namespace that behaves as CuPy's does (tests/batch/strict_xp.py): no implicit copy
of a device array to the host anywhere, one explicit copy per chunk (its statistics), no wait for the
device to learn a result's size; and the same report as numpy's, figure for figure.

What a GPU run meets first is caught here without a GPU: ``np.asarray`` of a CuPy array, ``bool()`` of
one in an ``if``, a host array mixed into device arithmetic."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import gradcli
from gradcli.batch import arrays
from gradcli.batch import chunk as bk
from gradcli.batch import compare as bc
from gradcli.batch.api import prepare_batch, run_prepared
from gradcli.batch.options import BatchOptions
from gradcli.engines.backend import execute

from strict_xp import HostConversion, Namespace

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


#: The step selection's files: their waits for the device are recorded in ``tolerated`` rather than
#: raised, and test_the_step_selection_waits_only_to_gather checks them against the deliberate ones.
STEP_SELECTION = ("gradcli/methods/differences.py", "gradcli/methods/tableau.py", "gradcli/methods/numeric.py",
                  "gradcli/batch/methods.py")


@pytest.fixture
def strict(monkeypatch):
    """Chunks on the strict namespace. The compiled program stands for the fused CUDA kernel: it reads the
    device arrays and writes device arrays, so its copies are not the pipeline's and are not counted."""
    xp = Namespace(tolerate=STEP_SELECTION)

    def run(program, inputs, dtype, engine):
        host = {k: xp.unwrap(v) if isinstance(v, xp.ndarray) else v for k, v in inputs.items()}
        return xp.wrap(execute(program, host, device="cpu", dtype=dtype, engine="numpy"))

    monkeypatch.setattr(arrays, "on_device", lambda name: arrays.Device(xp, run))
    # erf and erfc come from cupyx.scipy.special on a GPU: scipy's, over device arrays
    from scipy import special

    fake = types.ModuleType("cupyx.scipy.special")
    fake.erf = lambda x: xp.wrap(special.erf(xp.unwrap(x)))
    fake.erfc = lambda x: xp.wrap(special.erfc(xp.unwrap(x)))
    package, sub = types.ModuleType("cupyx"), types.ModuleType("cupyx.scipy")
    package.scipy, sub.special = sub, fake
    for name, module in (("cupyx", package), ("cupyx.scipy", sub), ("cupyx.scipy.special", fake)):
        monkeypatch.setitem(sys.modules, name, module)
    return xp


def _stats(doc):
    """The document without timings."""
    doc = {k: v for k, v in doc.items() if k not in ("seconds", "points_per_second")}
    doc["methods"] = {k: {kk: vv for kk, vv in m.items() if kk not in ("seconds", "points_per_second")}
                      for k, m in doc["methods"].items()}
    return doc


CASES = {
    # the default methods: every method, sympy's reference, chunks merged
    "smooth": ("exp(-(x**2 + y**2)/2) * cos(3*x*y)", dict(n=1500, domain="x=-1:1, y=-1:1", chunk=600)),
    # undefined points, a kink, diagnostics with examples, a 2-output Jacobian
    "undefined and kinks": ("sqrt(x) + log(y) * x + abs(x - y), x*y",
                            dict(n=1500, domain="x=-1:1, y=-1:2", seed=7, chunk=700)),
    # poles and branch cuts: infinite partials, stencils across a pole
    "poles": ("tan(3*x) + 1/(x - y) + atan2(y, x) + acos(y/3)", dict(n=1000, domain="x=-3:3, y=-3:3")),
    # erf through cupyx, float32 tolerances
    "float32": ("tanh(x) + sigmoid(y) + softplus(x - y) + erf(x)",
                dict(n=1000, domain="x=-3:3, y=-3:3", dtype="float32")),
    "constant outputs": ("3 + 0*x, 2, x", dict(n=300, domain="x=0:1")),
    "no variables": ("2*3", dict(n=50)),
    "methods and tolerance": ("x**y + acos(y)", dict(n=1000, domain="x=0:2, y=-1.5:1.5", rtol=1e-9, atol=1e-12,
                                                    methods="forward,central,complex_step")),
    # 0**0, x*acos(-1): the partials' own special cases
    "special points": ("x**y + x*acos(z)", dict(points={"x": np.array([0.0, 0.0, 2.0, -1.0, 0.5, 1.0]),
                                                        "y": np.array([0.0, 1.0, 0.0, 2.0, 3.0, 0.5]),
                                                        "z": np.array([-1.0, 0.5, 1.0, 0.0, -1.0, 1.0])})),
}


def _on_numpy(mp):
    mp.setattr(arrays, "on_device", lambda name: arrays.Device(np, lambda p, i, d, e: execute(p, i, dtype=d, engine="numpy")))


def _strict_and_numpy(strict, expr, run=gradcli.grad_batch, **kw):
    """The report on the strict namespace and on numpy, after checking the strict run's copies: one to
    the host per chunk (its statistics), and nothing whose size only the device knows."""
    strict.reset()
    strict_doc = run(expr, **kw).to_dict()
    chunks = -(-strict_doc["points"] // strict_doc["chunk"])
    assert len(strict.transfers) == chunks and not strict.waits, (strict.transfers, strict.waits)
    with pytest.MonkeyPatch.context() as mp:
        _on_numpy(mp)
        numpy_doc = run(expr, **kw).to_dict()
    return _stats(strict_doc), _stats(numpy_doc)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_option_runs_on_the_strict_namespace_as_on_numpy(case, strict):
    expr, kw = CASES[case]
    on_strict, on_numpy = _strict_and_numpy(strict, expr, **kw)
    assert on_strict == on_numpy


def test_consensus_reference_and_histogram_medians(strict, monkeypatch):
    monkeypatch.setattr(bc, "EXACT_MEDIAN_LIMIT", 10)
    monkeypatch.setattr(bc.symbolic, "derivatives",
                        lambda graph, timeout=None: bc.symbolic.SymbolicResult("unavailable", "timed out"))
    on_strict, on_numpy = _strict_and_numpy(strict, "sqrt(x) * y + abs(y) + 1/x", n=800,
                                            domain="x=-0.5:2, y=-1:1", chunk=300)
    assert on_strict == on_numpy
    assert on_strict["median"] == "histogram" and on_strict["reference"] == "consensus"
    assert on_strict["methods"]["forward"]["agreed"] > 0


@pytest.mark.parametrize("ext", ["npz", "csv"])
def test_out_files_and_points_files(strict, tmp_path, ext):
    expr, kw = "sqrt(x) + log(y) * x, x*y", dict(n=900, domain="x=-1:1, y=-1:2", chunk=400)
    out, ref = tmp_path / f"o.{ext}", tmp_path / f"ref.{ext}"
    gradcli.grad_batch(expr, out=str(out), **kw)
    assert len(strict.transfers) == 3  # the values and gradients travel with the statistics
    with pytest.MonkeyPatch.context() as mp:
        _on_numpy(mp)
        gradcli.grad_batch(expr, out=str(ref), **kw)
    assert out.read_bytes() == ref.read_bytes()
    # the file's points, read back in chunks, with the options built as the command line builds them
    def from_file(expr, **kw):
        options, _ = BatchOptions.validate(methods=("forward,reverse", "richardson"), dtype="float32", chunk=500)
        return run_prepared(prepare_batch(expr, points_file=str(ref)), options)
    on_strict, on_numpy = _strict_and_numpy(strict, "sqrt(x) + log(y) * x", run=from_file)
    assert on_strict == on_numpy and on_strict["points"] == 900 and on_strict["dtype"] == "float32"


def test_the_namespace_refuses_what_cupy_refuses_and_what_waits_for_the_device(strict):
    a = strict.asarray(np.arange(4.0))
    for convert in (lambda: np.asarray(a), lambda: bool(a.any()), lambda: float(a.max()), lambda: int(a.argmax()),
                    lambda: a.tolist(), lambda: a.item(), lambda: range(a.argmax()), lambda: np.ones(4)[a > 1]):
        with pytest.raises(HostConversion):
            convert()
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones(4)  # a host array in device arithmetic
    with pytest.raises(AttributeError, match="CuPy has no"):
        strict.errstate
    assert isinstance(np.where(a > 1, a, 0.0), strict.ndarray) and not isinstance(a, np.ndarray)
    assert a.get().tolist() == [0.0, 1.0, 2.0, 3.0] and strict.transfers == [32] and not strict.tolerated
    a[a > 2]
    assert len(strict.waits) == 1 and strict.waits[0].endswith("boolean mask index")


#: Where the step selection waits for the device, on purpose: to size the points it gathers (those the
#: first pass of central differences leaves unsure, those Ridders' tableau has not settled), once per
#: variable and block, and once per tableau row. Each costs a wait; gathering saves the other points'
#: evaluations (12 of 13 candidate scales, the rows past convergence), far more than the waits.
GATHERS = {"select_central: nonzero", "_still_unsure: nonzero"}


def test_the_step_selection_waits_only_to_gather(strict):
    strict.reset()
    for expr, kw in CASES.values():
        gradcli.grad_batch(expr, **kw)
    seen = {entry.split(" ", 1)[1] for entry in strict.tolerated}
    assert seen <= GATHERS, sorted(seen - GATHERS)
    assert seen, "the cases exercise the gathering"
