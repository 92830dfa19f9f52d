"""Points files and ``--out`` files that a careless or hostile input must not turn into a crash, a
silent misreading or a leftover: the .npz layout's own keys against variables of the same names, files
that declare more data than they hold, values that are not real numbers, the --out file's mode, and
the temporary files of every path out."""
from __future__ import annotations

import io
import os
import stat
import zipfile

import numpy as np
import pytest

from gradcli.batch.points import OUT_FORMAT_KEY, read_points
from gradcli.cli import main
from gradcli.core import files
from gradcli.core.errors import BadInput
from cli_helpers import PLAIN_ENV, RUNNER, strict_json


pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def grad(*args):
    result = RUNNER.invoke(main, ["grad", *map(str, args)], env=PLAIN_ENV, catch_exceptions=False)
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def one_error_line(r, *words):
    assert r.exit_code == 2, r.stdout + r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# --- the .npz layout: its keys are never read as variables -------------------------------------------

@pytest.mark.parametrize("name", ["value", "variables", "points", "grad_x", "x"])
def test_out_then_points_reads_the_points_whatever_the_variable_is_called(tmp_path, name):
    out = tmp_path / "a.npz"
    r = grad(f"{name}*2 + 1", "--batch", 50, "--domain", f"{name}=1:2", "--out", out, "--json")
    assert r.exit_code == 0, r.stderr
    with np.load(out) as z:
        written = z["points"][:, 0].copy()
        assert int(z[OUT_FORMAT_KEY]) == 2 and list(z["variables"]) == [name]
        np.testing.assert_array_equal(z["value"], written * 2 + 1)
    np.testing.assert_array_equal(read_points(str(out), [name])[name], written)
    back = strict_json(grad(f"{name}*2 + 1", "--points", out, "--json").stdout)
    assert back["points"] == 50
    assert all(1 <= w["point"][name] <= 2 for w in back["worst"])  # points, not values (3..5)


def test_an_out_file_written_before_the_format_key_is_still_read_by_its_layout(tmp_path):
    pts = np.array([[1.0], [1.5], [2.0]])
    old = tmp_path / "old.npz"
    np.savez(old, points=pts, variables=np.array(["value"]), value=pts[:, 0] * 10, grad_value=np.full(3, 10.0))
    np.testing.assert_array_equal(read_points(str(old), ["value"])["value"], pts[:, 0])


def test_a_points_file_keyed_by_variable_names_is_read_by_name(tmp_path):
    p = tmp_path / "mine.npz"
    np.savez(p, value=np.array([1.0, 2.0]), points=np.array([3.0, 4.0]), label=np.array([7, 8]))
    arrays = read_points(str(p), ["value", "points"])
    np.testing.assert_array_equal(arrays["value"], [1.0, 2.0])
    np.testing.assert_array_equal(arrays["points"], [3.0, 4.0])


def test_a_format_from_a_newer_gradcli_is_refused(tmp_path):
    p = tmp_path / "new.npz"
    np.savez(p, **{OUT_FORMAT_KEY: np.array(99), "points": np.zeros((2, 1)), "variables": np.array(["x"])})
    one_error_line(grad("x", "--points", p), "newer gradcli")


@pytest.mark.parametrize("variables", [np.array("x"), np.array([1.0, 2.0]), np.array(["x", "x"])])
def test_malformed_variables_in_an_out_file(tmp_path, variables):
    p = tmp_path / "bad.npz"
    np.savez(p, **{OUT_FORMAT_KEY: np.array(2), "points": np.zeros((3, 2)), "variables": variables})
    one_error_line(grad("x*y", "--points", p), "variables")


def test_zero_d_variables_without_the_format_key_is_one_line(tmp_path):
    p = tmp_path / "bad.npz"
    np.savez(p, points=np.zeros((3, 2)), variables=np.array("x"), value=np.zeros(3))
    one_error_line(grad("x*y", "--points", p), f"--points {p}")


# --- files that declare more than they hold, and values that are not real numbers ----------------------

def npy_header(shape, descr="<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def test_a_small_npy_declaring_a_huge_shape_is_one_line_not_a_memory_error(tmp_path):
    p = tmp_path / "huge.npy"
    p.write_bytes(npy_header((10 ** 11, 2)) + bytes(64))
    assert p.stat().st_size < 300
    one_error_line(grad("x*y", "--points", p), "declares shape (100000000000, 2)")


def test_an_npz_member_declaring_a_huge_shape_is_one_line(tmp_path):
    p = tmp_path / "huge.npz"
    with zipfile.ZipFile(p, "w") as z:
        for name in ("x", "y"):
            z.writestr(f"{name}.npy", npy_header((10 ** 11,)) + bytes(16))
    one_error_line(grad("x*y", "--points", p), "declares shape")


@pytest.mark.parametrize("array", [
    np.array([[1 + 2j, 3], [1, 2]]),
    np.array([["2020-01-01", "2020-01-02"]], dtype="datetime64[D]"),
    np.array([[1, 2]], dtype="timedelta64[s]"),
    np.array([[True, False]]),
    np.array([["1", "2"]]),
    np.array([[1.0, None]], dtype=object),
], ids=["complex", "datetime", "timedelta", "bool", "str", "object"])
def test_points_that_are_not_real_numbers_are_refused(tmp_path, array):
    p = tmp_path / "p.npy"
    np.save(p, array, allow_pickle=True)
    one_error_line(grad("x*y", "--points", p), f"--points {p}")


def test_a_structured_points_file_with_a_complex_field_is_refused(tmp_path):
    p = tmp_path / "s.npy"
    np.save(p, np.array([(1.0, 2j)], dtype=[("x", "f8"), ("y", "c16")]))
    one_error_line(grad("x*y", "--points", p), "complex")


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "uint8"])
def test_integer_and_every_float_points_are_read(tmp_path, dtype):
    p = tmp_path / "p.npy"
    np.save(p, np.array([[1, 2], [3, 4]], dtype=dtype))
    r = grad("x*y", "--points", p, "--json")
    assert r.exit_code == 0 and strict_json(r.stdout)["points"] == 2


def test_the_python_api_refuses_complex_points_too():
    import gradcli

    with pytest.raises(BadInput, match="complex"):
        gradcli.grad_batch("x", points={"x": np.array([1 + 1j])})


# --- options ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["--out", ""], ["--out needs a file name"]),
    (["--batch", "99999999999999999999999999"], ["--batch", "at most"]),
    (["--seed", "-1"], ["--seed"]),
])
def test_bad_batch_options_are_one_line(tmp_path, monkeypatch, args, words):
    monkeypatch.chdir(tmp_path)
    base = {"--batch": "10", "--domain": "x=0:1"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    one_error_line(grad("x**2", *[s for kv in base.items() for s in kv]), *words)
    assert os.listdir(tmp_path) == []


def test_out_to_a_folder_is_refused_before_the_run(tmp_path):
    (tmp_path / "d.npz").mkdir()
    one_error_line(grad("x", "--batch", 10, "--domain", "x=0:1", "--out", tmp_path / "d.npz"), "is a folder")
    assert os.listdir(tmp_path) == ["d.npz"] and os.listdir(tmp_path / "d.npz") == []


@pytest.mark.parametrize("ext", ["csv", "npz"])
def test_out_through_a_symlink_writes_the_target_and_keeps_the_link(tmp_path, ext):
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / f"real.{ext}"
    target.write_text("old")
    link = tmp_path / f"latest.{ext}"
    link.symlink_to(target)
    r = grad("x**2", "--batch", 20, "--domain", "x=0:1", "--out", link, "--json")
    assert r.exit_code == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert strict_json(r.stdout)["out"] == str(link)  # the name the user gave
    if ext == "csv":
        assert target.read_text().splitlines()[0] == "x,f,df/dx" and len(target.read_text().splitlines()) == 21
    else:
        with np.load(target) as z:
            np.testing.assert_array_equal(z["grad_x"], 2 * z["points"][:, 0])
    assert sorted(os.listdir(tmp_path)) == ["latest." + ext, "runs"]
    assert os.listdir(tmp_path / "runs") == [f"real.{ext}"]  # no temporary file left


@pytest.mark.parametrize("ext", ["csv", "npz"])
def test_out_naming_a_fifo_a_device_or_a_link_loop_is_refused_and_left_alone(tmp_path, ext):
    os.mkfifo(tmp_path / f"fifo.{ext}")
    (tmp_path / f"null.{ext}").symlink_to("/dev/null")
    (tmp_path / f"loop.{ext}").symlink_to(tmp_path / f"loop.{ext}")
    for name, words in (("fifo", "not a regular file"), ("null", "not a regular file"), ("loop", "leads nowhere")):
        r = grad("x**2", "--batch", 20, "--domain", "x=0:1", "--out", tmp_path / f"{name}.{ext}")
        one_error_line(r, f"--out {tmp_path / f'{name}.{ext}'}", words)
    assert stat.S_ISFIFO(os.lstat(tmp_path / f"fifo.{ext}").st_mode)
    assert os.readlink(tmp_path / f"null.{ext}") == "/dev/null" and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert os.path.islink(tmp_path / f"loop.{ext}")
    assert sorted(os.listdir(tmp_path)) == [f"fifo.{ext}", f"loop.{ext}", f"null.{ext}"]


def test_out_naming_the_points_file_or_a_link_to_it_is_refused(tmp_path):
    points = tmp_path / "p.csv"
    points.write_text("x\n0.5\n1.5\n")
    (tmp_path / "again.csv").symlink_to(points)
    for out in (points, tmp_path / "again.csv"):
        one_error_line(grad("x**2", "--points", points, "--out", out), "is the points file")
    assert points.read_text() == "x\n0.5\n1.5\n"


def test_an_out_file_too_large_to_make_is_one_line_and_leaves_nothing(tmp_path):
    one_error_line(grad("x", "--batch", 2 ** 53, "--domain", "x=0:1", "--out", tmp_path / "x.npz"), "--out")
    assert os.listdir(tmp_path) == []


# --- the --out file's mode follows the umask -------------------------------------------------------------

@pytest.mark.parametrize("ext", ["csv", "npz"])
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600), (0o000, 0o666)])
def test_out_file_gets_the_users_umask(tmp_path, ext, umask, mode):
    old = os.umask(umask)
    try:
        r = grad("x*y", "--batch", 20, "--domain", "x=0:1, y=0:1", "--out", tmp_path / f"o.{ext}")
    finally:
        os.umask(old)
    assert r.exit_code == 0
    assert stat.S_IMODE(os.stat(tmp_path / f"o.{ext}").st_mode) == mode
    assert os.listdir(tmp_path) == [f"o.{ext}"]


# --- temporary paths are known from before they exist -------------------------------------------------------

def test_discard_pending_removes_what_was_never_published_or_discarded(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old")
    pending = files.PendingFile(str(target))
    pending.file.write("half")
    scratch = files.pending_directory(str(tmp_path / "t.npz"))
    open(os.path.join(scratch, "points.npy"), "wb").close()
    assert len(os.listdir(tmp_path)) == 3
    files.discard_pending()
    assert os.listdir(tmp_path) == ["t.csv"] and target.read_text() == "old"
    pending.discard()  # and the owner's own clean-up afterwards is harmless


def test_published_and_discarded_files_are_forgotten(tmp_path):
    with files.atomic_write(str(tmp_path / "a.txt")) as fh:
        fh.write("new")
    with pytest.raises(RuntimeError):
        with files.atomic_write(str(tmp_path / "b.txt")) as fh:
            raise RuntimeError
    files.discard_pending()
    assert os.listdir(tmp_path) == ["a.txt"] and (tmp_path / "a.txt").read_text() == "new"
