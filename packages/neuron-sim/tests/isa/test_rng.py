"""Random numbers: a seed gives one stream on every run; uniform [0, 1) fills; dropout's rate;
counter-based words (RandomWords: Philox4x32-10 of a state tile, the generator's rate)."""

import numpy as np
import pytest
from helpers import TRN2, execute, sb
from neuron_sim import ValidationError
from neuron_sim.isa import Dropout, RandomFill, RandomWords, SetRngSeed, TensorCopy, philox
from neuron_sim.timing.costs import compute_cost


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


@pytest.mark.parametrize("seed", [float("nan"), float("inf"), float("-inf")])
def test_a_seed_tile_holding_no_integer_is_refused(seed):
    seed_tile, dst = sb("float32", 1, 1), sb("float32", 4, 16, offset=64)
    with pytest.raises(ValidationError, match=r"rng\.seed.* is an integer, got (nan|inf|-inf)"):
        execute([SetRngSeed(seed=seed_tile), RandomFill(dst=dst)], preload=[(seed_tile, np.array([[seed]], np.float32))],
                fetch=[dst])


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


# Philox4x32-10 known-answer vectors (Random123's kat_vectors): counter, key -> output.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, expected", KAT)
def test_philox_known_answers(counter, key, expected):
    out = philox.blocks(*(np.array([c], np.uint32) for c in counter), *key)
    assert tuple(int(w[0]) for w in out) == expected


def _state(seed, offset):
    return np.array([seed, seed >> 32, offset, offset >> 32], dtype=np.uint64).astype(np.uint32)


def _words(state, count, partitions, free, *, offset=0, channel_multiplier=None, pattern=None, dtype="int32"):
    key, dst = sb("uint32", 1, 4), sb(dtype, partitions, free, offset=64)
    free = (free,) if isinstance(free, int) else tuple(free)
    if pattern is None:  # row-major: partition p holds words [p * size, (p + 1) * size)
        strides = [int(np.prod(free[k + 1:])) for k in range(len(free))]
        pattern = tuple(zip(strides, free))
    cm = int(np.prod(free)) if channel_multiplier is None else channel_multiplier
    inst = RandomWords(dst=dst, key=key, count=count, pattern=pattern, offset=offset, channel_multiplier=cm)
    return execute([inst], preload=[(key, state.reshape(1, 4))], fetch=[dst])[0]


@pytest.mark.parametrize("partitions, free, count", [(1, 1, 1), (1, 3, 3), (3, 1, 3), (5, 7, 35), (128, 3, 384),
                                                     (3, (2, 5), 30), (7, (3, 2, 5), 517)])
def test_random_words_are_the_draws_philox_words(partitions, free, count):
    state = _state(0x0123456789ABCDEF, 2**40 + 3)
    n = partitions * int(np.prod(free))
    got = _words(state, count, partitions, free, offset=count - n)  # the draw's last n words
    expected = philox.words(state, np.arange(count - n, count), count)
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint32), expected)


def test_random_words_follow_the_counter_layout():
    # word i of a 10-word draw (3 blocks) is lane i // 3 of block i % 3, counters (offset lo, hi, block, 0)
    state = _state(99, 7)
    got = _words(state, 10, 1, 10, dtype="uint32").reshape(-1)
    lanes = philox.blocks(np.full(3, 7, np.uint32), np.zeros(3, np.uint32), np.arange(3, dtype=np.uint32),
                          np.zeros(3, np.uint32), 99, 0)
    np.testing.assert_array_equal(got, np.concatenate(lanes)[:10])


def test_random_words_of_another_state_or_index_differ_and_any_tiling_gives_the_same_bits():
    a = _words(_state(1, 0), 512, 4, 128).reshape(-1)
    assert not np.array_equal(a, _words(_state(2, 0), 512, 4, 128).reshape(-1))
    assert not np.array_equal(a, _words(_state(1, 1), 512, 4, 128).reshape(-1))
    # the same 512 words as 128 partitions of 4, column-major (word 128 * f + p): a transposed tiling
    t = _words(_state(1, 0), 512, 128, 4, channel_multiplier=1, pattern=((128, 4),))
    np.testing.assert_array_equal(t.T.reshape(-1), a)
    assert len(np.unique(a)) == 512  # no repeated words


def test_random_words_are_uniform_bits():
    w = _words(_state(5, 11), 128 * 512, 128, 512, dtype="uint32").reshape(-1).astype(np.float64)
    assert abs(w.mean() / 2**32 - 0.5) < 0.005
    bits = (w.astype(np.uint64)[:, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)
    assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 0.01)  # every bit position is a fair coin


def test_random_words_run_at_the_generators_rate():
    # 4 words per lane per cycle: a fill of 2048 words per partition takes a quarter of a copy's time
    key, dst, src = sb("int32", 1, 4), sb("int32", 128, 2048, offset=64), sb("int32", 128, 2048, offset=16384)
    words = compute_cost(RandomWords(dst=dst, key=key, count=128 * 2048, pattern=((1, 2048),), channel_multiplier=2048), TRN2)
    copy = compute_cost(TensorCopy(dst=dst, src=src), TRN2)
    assert words.issue_ns == pytest.approx(copy.issue_ns / 4)


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
        (RandomWords(dst=sb("float32", 2, 4), key=sb("int32", 1, 4, offset=64), count=8, pattern=((1, 4),),
                     channel_multiplier=4), "rng.words_dtype"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("float32", 1, 4, offset=64), count=8, pattern=((1, 4),),
                     channel_multiplier=4), "rng.words_dtype"),  # a float state (NaN, 1.5) is refused
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 2, 4, offset=64), count=8, pattern=((1, 4),),
                     channel_multiplier=4), "rng.key"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 1, 3, offset=64), count=8, pattern=((1, 4),),
                     channel_multiplier=4), "rng.key"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 1, 4, offset=64), count=0, pattern=((1, 4),)), "rng.count"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 1, 4, offset=64), count=8.0, pattern=((1, 4),)), "rng.count"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 1, 4, offset=64), count=7, pattern=((1, 4),),
                     channel_multiplier=4), "rng.index"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 1, 4, offset=64), count=8, pattern=((-1, 4),),
                     offset=2), "rng.index"),
        (RandomWords(dst=sb("int32", 2, 4), key=sb("int32", 1, 4, offset=64), count=8, pattern=((1, 3),)),
         "random_words.pattern"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_rng_rules(inst, rule):
    with pytest.raises(ValidationError) as info:
        inst.validate(TRN2)
    assert info.value.rule == rule
