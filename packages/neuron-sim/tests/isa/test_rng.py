"""Random numbers: a seed gives one stream on every run; uniform [0, 1) fills; dropout's rate."""

import numpy as np
import pytest
from helpers import TRN2, execute, sb
from neuron_sim import ValidationError
from neuron_sim.isa import Dropout, RandomFill, SetRngSeed


def _fill(seed, dtype="float32", shape=(32, 256)):
    dst = sb(dtype, *shape)
    program = ([SetRngSeed(seed=seed)] if seed is not None else []) + [RandomFill(dst=dst)]
    return execute(program, fetch=[dst])[0]


def test_a_seed_gives_the_same_values_and_another_seed_others():
    a, b, c = _fill(7), _fill(7), _fill(8)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(_fill(None), _fill(0))  # each launch starts from seed 0


def test_random_fill_is_uniform_in_zero_one():
    x = _fill(3)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(float(x.mean()) - 0.5) < 0.02 and abs(float(x.var()) - 1 / 12) < 0.01


def test_a_seed_read_from_a_tile_at_run_time():
    seed_tile, dst = sb("int32", 1, 1), sb("float32", 4, 16, offset=64)
    run = execute([SetRngSeed(seed=seed_tile), RandomFill(dst=dst)], preload=[(seed_tile, np.array([[7]], np.int32))],
                  fetch=[dst])
    np.testing.assert_array_equal(run[0], _fill(7, shape=(4, 16)))


@pytest.mark.parametrize("prob", [0.0, 0.3, 1.0])
def test_dropout_zeroes_at_its_rate_and_keeps_the_rest(prob):
    x = np.random.default_rng(1).uniform(1, 2, (64, 256)).astype(np.float32)
    src, dst = sb("float32", 64, 256), sb("float32", 64, 256, offset=1024)
    out = execute([Dropout(dst=dst, src=src, prob=prob)], preload=[(src, x)], fetch=[dst])[0]
    dropped = out == 0
    assert abs(float(dropped.mean()) - prob) < 0.02
    np.testing.assert_array_equal(out[~dropped], x[~dropped])  # kept values are not scaled


def test_dropout_with_a_probability_per_partition():
    x = np.ones((2, 4096), np.float32)
    src, p, dst = sb("float32", 2, 4096), sb("float32", 2, 1, offset=16384), sb("float32", 2, 4096, offset=20000)
    out = execute([Dropout(dst=dst, src=src, prob=p)], preload=[(src, x), (p, np.array([[0.1], [0.9]], np.float32))],
                  fetch=[dst])[0]
    rates = (out == 0).mean(axis=1)
    assert abs(rates[0] - 0.1) < 0.03 and abs(rates[1] - 0.9) < 0.03


@pytest.mark.parametrize(
    "inst, rule",
    [
        (SetRngSeed(seed=1.5), "rng.seed"),
        (SetRngSeed(seed=sb("int32", 2, 1)), "rng.seed"),
        (RandomFill(dst=sb("int32", 8, 8)), "rng.dtype"),
        (Dropout(dst=sb("float32", 8, 8), src=sb("float32", 8, 8, offset=64), prob=1.5), "dropout.prob"),
        (Dropout(dst=sb("bfloat16", 8, 8), src=sb("float32", 8, 8, offset=64), prob=0.5), "dropout.dtype"),
        (Dropout(dst=sb("int32", 8, 8), src=sb("int32", 8, 8, offset=64), prob=sb("bfloat16", 8, 1, offset=128)),
         "dropout.prob_dtype"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_rng_rules(inst, rule):
    with pytest.raises(ValidationError) as info:
        inst.validate(TRN2)
    assert info.value.rule == rule
