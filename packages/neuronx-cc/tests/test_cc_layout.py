"""The tiling planner: every element is covered exactly once, within hardware limits."""

import math

import numpy as np
import pytest
from neuron_sim import get_architecture
from neuronxcc.compiler.layout import PARTITIONS, Form, free_limit, merge_axes, plan_tiles
from neuronxcc.compiler.views import View, contiguous_strides


def coverage(shape, plan, form=0):
    """How many times each element (by its offset in form ``form``) is visited."""
    counts = np.zeros(math.prod(shape), dtype=np.int64)
    for box in plan.boxes:
        offset, pstride, dims = box.pattern(form)
        index = offset + pstride * np.arange(box.partitions).reshape([-1] + [1] * len(dims))
        for k, (stride, count) in enumerate(dims):
            shape_k = [1] * (len(dims) + 1)
            shape_k[k + 1] = count
            index = index + stride * np.arange(count).reshape(shape_k)
        np.add.at(counts, index.reshape(-1), 1)
    return counts


SHAPES = [(1,), (7,), (129,), (1000,), (21000,), (100003,), (3, 5), (128, 512), (257, 33), (2, 3, 4), (4, 130, 9),
          (2, 3, 5, 7), (1, 1, 300, 2), (64, 1000), (1000, 64), (5, 3, 100000)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("limit", [1, 7, 512, 4096])
def test_every_element_once(shape, limit):
    forms = [Form(contiguous_strides(shape), 0, 4)]
    plan = plan_tiles(shape, forms, limit=limit)
    assert np.all(coverage(shape, plan) == 1)
    for box in plan.boxes:
        assert 1 <= box.partitions <= PARTITIONS
        assert box.free_size <= max(limit, 1) or box.free_size == 1
        assert len(box.free) <= 4


@pytest.mark.parametrize("shape,dims", [((300, 700), (1,)), ((300, 700), (0,)), ((4, 130, 9), (0, 2)), ((40000,), (0,)),
                                        ((6, 50, 7, 9), (1, 3)), ((3, 20000), (1,)), ((3, 3, 7, 200), (2,))], ids=str)
@pytest.mark.parametrize("across", [False, True])
def test_reduction_runs(shape, dims, across):
    """Tiles of one result are consecutive; a run's first/last flags bracket them."""
    out_shape = tuple(1 if d in dims else s for d, s in enumerate(shape))
    out_strides = tuple(0 if d in dims else s for d, s in enumerate(contiguous_strides(out_shape)))
    forms = [Form(contiguous_strides(shape), 0, 4), Form(out_strides, 0, 4)]
    plan = plan_tiles(shape, forms, dims, limit=1024, allow_partition_reduce=across, main_form=1)
    assert np.all(coverage(shape, plan) == 1)
    if plan.part_reduced:  # one accumulator for every kept result: they all sit in each tile's free dims
        kept = math.prod(s for d, s in enumerate(shape) if d not in dims)
        assert all(math.prod(d.count for d in b.free if not d.reduced) == kept for b in plan.boxes)
    seen, open_run = set(), None
    for box in plan.boxes:
        key = (box.offsets[1], box.part_strides[1], tuple((d.strides[1], d.count) for d in box.free if not d.reduced))
        if box.first:
            assert open_run is None and (plan.part_reduced or key not in seen)
            open_run = key
        assert plan.part_reduced or key == open_run
        if box.last:
            seen.add(key)
            open_run = None
    assert open_run is None


def test_contiguous_dims_merge_into_one_axis():
    axes = merge_axes((4, 5, 6), [Form(contiguous_strides((4, 5, 6)))])
    assert [a.size for a in axes] == [120]
    b = View.hbm("b", (6,), "float32").broadcast((4, 5, 6), (2,))
    axes = merge_axes((4, 5, 6), [Form(contiguous_strides((4, 5, 6))), Form(b.strides)])
    assert [a.size for a in axes] == [20, 6]


def test_long_vector_fills_the_partitions():
    plan = plan_tiles((1 << 20,), [Form((1,), 0, 4)], limit=4096)
    assert plan.max_partitions == PARTITIONS
    assert all(b.partitions == PARTITIONS and b.free_size >= 256 for b in plan.boxes)


def test_free_limit_fits_sbuf():
    arch = get_architecture("trn2")
    assert free_limit(arch, 4) == 4096
    assert free_limit(arch, 400) * 400 * 2 <= arch.sbuf_usable_bytes_per_partition
