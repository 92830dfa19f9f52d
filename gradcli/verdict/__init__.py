"""The verdict layer: one tolerance, one set of constants, one verdict for grad, hessian and batch."""
