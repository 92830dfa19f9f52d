"""The chunk size without --chunk: 65536 on the CPU; on a GPU a rule of its free memory and of the bytes a
point of the batch takes (docs/batch.md#the-chunk-size)."""
from __future__ import annotations

import numpy as np
import pytest

import gradcli
from gradcli.batch import arrays
from gradcli.batch import chunk as bk
from gradcli.batch.options import BatchOptions
from gradcli.core.parser import parse_expression

GiB = 1 << 30


@pytest.mark.parametrize("free,point,expected", [
    (80 * GiB, 1000, 1 << 24),           # an H200's memory: the largest chunk
    (8 * GiB, 1000, 1 << 21),            # 2 GiB for the chunk: 2.1e6 points, down to a power of two
    (8 * GiB, 4000, 1 << 19),
    (GiB, 100_000, arrays.MIN_DEVICE_CHUNK),  # a large program on a small card: never below the CPU's chunk
    (0, 1, arrays.MIN_DEVICE_CHUNK),
])
def test_the_rule_is_a_power_of_two_that_fits_a_quarter_of_free_memory(free, point, expected):
    assert arrays.chunk_points(free, point) == expected


def test_the_rule_follows_memory_and_program_size():
    sizes = [arrays.chunk_points(free, 2000) for free in (GiB, 4 * GiB, 16 * GiB, 64 * GiB)]
    assert sizes == sorted(sizes) and len(set(sizes)) > 1
    sizes = [arrays.chunk_points(16 * GiB, point) for point in (200, 2000, 20_000, 200_000)]
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) > 1
    for free in (3 * GiB, 5 * GiB, 7 * GiB):
        for point in (300, 3000, 30_000):
            n = arrays.chunk_points(free, point)
            assert n & (n - 1) == 0 and arrays.MIN_DEVICE_CHUNK <= n <= arrays.MAX_DEVICE_CHUNK
            assert n == arrays.MIN_DEVICE_CHUNK or n * point <= arrays.DEVICE_MEMORY_SHARE * free < 2 * n * point


def _plan(expr, methods=None, dtype=np.float64, sym=True):
    graph = parse_expression(expr)
    sym_graph = graph if sym else None  # its size is what counts here
    options = BatchOptions(methods=tuple(methods or BatchOptions().methods), dtype=dtype)
    return bk.Plan(graph, sym_graph, options, tuple(m for m in options.methods if m != "symbolic"), True)


def test_a_point_takes_more_for_larger_programs_wider_stencils_and_wider_floats():
    small, large = _plan("x*y"), _plan("exp(-(x**2 + y**2)/2) * cos(3*x*y) + tanh(x - y)**2")
    assert arrays.point_bytes(large) > arrays.point_bytes(small)
    ad = _plan("x*y", methods=["forward", "reverse"])
    assert arrays.point_bytes(ad) < arrays.point_bytes(small)  # no stencil of differences held
    assert arrays.point_bytes(_plan("x*y", methods=["forward", "reverse"], sym=False)) > arrays.point_bytes(ad)  # consensus
    assert arrays.point_bytes(_plan("x*y", dtype=np.float32)) < arrays.point_bytes(small)


def test_without_chunk_the_cpu_takes_65536_and_a_gpu_its_rule(monkeypatch):
    r = gradcli.grad_batch("x*y", n=100, domain="x=0:1, y=0:1", methods="forward,reverse")
    assert r.chunk == arrays.DEFAULT_CHUNK == 65536
    # the device's free memory (as CuPy reports it on a GPU) and the plan's point size decide
    asked = []
    monkeypatch.setattr(arrays, "free_bytes", lambda device: 6 * GiB)
    monkeypatch.setattr(arrays, "chunk_points", lambda free, point: asked.append((free, point)) or 4096)
    r = gradcli.grad_batch("exp(x)*y", n=10_000, domain="x=0:1, y=0:1", methods="forward,reverse")
    assert r.chunk == 4096 and asked[0][0] == 6 * GiB and asked[0][1] > 8 * len(parse_expression("exp(x)*y").nodes)
    assert gradcli.grad_batch("x*y", n=100, domain="x=0:1, y=0:1", chunk=10).chunk == 10  # --chunk decides
