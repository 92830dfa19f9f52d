"""The batch engines: a graph's value and gradient compiled once into a straight-line program, run on
numpy in cache-sized chunks, by a numba kernel, or as one fused CUDA kernel."""
