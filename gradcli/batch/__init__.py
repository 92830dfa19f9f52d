"""Batch mode: value and gradient over many points at once, compiled, on CPU threads or the GPU."""
