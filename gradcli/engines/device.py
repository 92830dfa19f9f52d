"""Choosing the device (cpu, cuda or auto) and checking the engine asked for against it.

``cuda`` needs CuPy (the ``gpu`` extra), a CUDA driver with at least one device, and NVRTC (CuPy compiles
the fused kernel at run time). Anything short of that is reported with its reason: an error for
``--device cuda``, a note on stderr for ``--device auto``, which then runs on the CPU.
"""
from __future__ import annotations

from gradcli.core.errors import BadInput
from gradcli.engines.backend import ENGINES, numba_installed

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


def resolve_device(name: str, option: str = "--device cuda") -> tuple[str, str]:
    """-> (device actually used, a note for stderr or ""). ``cuda`` without CUDA is BadInput."""
    if name == "cpu":
        return "cpu", ""
    if name not in DEVICES:
        raise BadInput(f"unknown device {name!r}; choose cpu, cuda or auto")
    ok, why = cuda_status()
    if ok:
        return "cuda", ""
    if name == "cuda":
        raise BadInput(f"{option}: CUDA is not available ({why}); to use a GPU: {INSTALL_HINT}")
    return "cpu", f"CUDA not available ({why}); running on the CPU"


def resolve_target(device: str | None, engine: str | None) -> tuple[str, str, str]:
    """``--device`` and ``--engine`` -> (device, engine, a note for stderr or ""). Without an engine
    the device decides and the engine is ``auto`` (the rule of :func:`gradcli.engines.backend.choose_engine`);
    an engine implies its device: ``cuda`` the GPU, ``numpy`` and ``numba`` the CPU."""
    if engine is None or engine == "auto":
        dev, note = resolve_device(device or "cpu")
        return dev, "auto", note
    if engine not in ENGINES:
        raise BadInput(f"unknown engine {engine!r}; choose {', '.join(ENGINES)}")
    if device is not None and device not in DEVICES:
        raise BadInput(f"unknown device {device!r}; choose cpu, cuda or auto")
    if engine == "cuda":
        if device == "cpu":
            raise BadInput("--engine cuda runs on the GPU, not with --device cpu")
        dev, note = resolve_device("cuda", option="--engine cuda")
        return dev, "cuda", note
    if device == "cuda":
        raise BadInput(f"--engine {engine} runs on the CPU, not with --device cuda")
    if engine == "numba" and not numba_installed():
        raise BadInput("--engine numba needs numba: pip install 'gradcli[fast]'")
    return "cpu", engine, ""


def free_bytes(device: str) -> int | None:
    """The memory free for a batch's arrays on ``device`` now: on ``cuda`` what the GPU has free plus what
    CuPy's pool holds unused (it is ours to reuse); None on the CPU, where the chunk does not follow it."""
    if device != "cuda":
        return None
    import cupy

    free, _ = cupy.cuda.runtime.memGetInfo()
    return int(free) + int(cupy.get_default_memory_pool().free_bytes())
