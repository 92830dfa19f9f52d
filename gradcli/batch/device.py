"""Choosing the device: cpu, cuda or auto.

``cuda`` needs CuPy (the ``gpu`` extra), a CUDA driver with at least one device, and NVRTC (CuPy compiles
the fused kernel at run time). Anything short of that is reported with its reason: an error for
``--device cuda``, a note on stderr for ``--device auto``, which then runs on the CPU.
"""
from __future__ import annotations

from ..errors import BadInput

DEVICES = ("cpu", "cuda", "auto")
INSTALL_HINT = "pip install 'gradcli[gpu]' (CuPy for CUDA 12)"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def cuda_status() -> tuple[bool, str]:
    """-> (usable, why not). Never raises: a missing library, driver or device is an answer."""
    try:
        import cupy
    except ModuleNotFoundError:
        return False, "CuPy is not installed"
    except Exception as exc:  # a CuPy built for another CUDA, a missing shared library...
        return False, f"CuPy failed to load ({_one_line(exc)})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, driver too old, no permission...
        return False, f"no usable CUDA driver ({_one_line(exc)})"
    if count <= 0:
        return False, "no CUDA device"
    nvrtc = getattr(cupy.cuda, "nvrtc", None)  # the kernel is compiled at run time: NVRTC must load
    if nvrtc is not None:
        try:
            nvrtc.getVersion()
        except Exception as exc:
            return False, f"NVRTC, the CUDA run-time compiler, is not available ({_one_line(exc)})"
    return True, ""


def resolve_device(name: str) -> tuple[str, str]:
    """-> (device actually used, a note for stderr or ""). ``cuda`` without CUDA is BadInput."""
    if name == "cpu":
        return "cpu", ""
    if name not in DEVICES:
        raise BadInput(f"unknown device {name!r}; choose cpu, cuda or auto")
    ok, why = cuda_status()
    if ok:
        return "cuda", ""
    if name == "cuda":
        raise BadInput(f"--device cuda: CUDA is not available ({why}); to use a GPU: {INSTALL_HINT}")
    return "cpu", f"CUDA not available ({why}); running on the CPU"
