"""What a check calls: PyTorch and JAX targets, string formulas, complex inputs, as numpy-level functions."""
