"""Choosing the device: cpu, cuda or auto. (Placeholder until the CuPy backend lands.)"""
from __future__ import annotations

from ..errors import BadInput


def resolve_device(name: str) -> tuple[str, str]:
    """-> (device actually used, a note for stderr or ""). ``cuda`` without CUDA is BadInput."""
    if name == "cpu":
        return "cpu", ""
    if name == "cuda":
        raise BadInput("--device cuda: CuPy with a CUDA device is not available (pip install 'gradcli[gpu]')")
    if name == "auto":
        return "cpu", "no CUDA device: running on the CPU"
    raise BadInput(f"unknown device {name!r}; choose cpu, cuda or auto")
