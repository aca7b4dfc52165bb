"""ScalarE activation: dst = func(src * scale + bias), optional free-dim reduction."""

import math

import numpy as np
import pytest
from helpers import TRN2, assert_bits_equal, execute, ps, rounded, sb
from neuron_sim import ValidationError
from neuron_sim.isa import Activation

RNG = np.random.default_rng(3)
P, F = 8, 40


def rule_of(inst, arch=TRN2):
    with pytest.raises(ValidationError) as info:
        inst.validate(arch)
    return info.value


def _erf(v):
    return np.vectorize(math.erf)(v)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


# float64 references written from the math definitions, and the input range each is tested on.
FUNCS = {
    "copy": (lambda v: v, (-5, 5)),
    "identity": (lambda v: v, (-5, 5)),
    "exp": (np.exp, (-10, 10)),
    "log": (np.log, (0.01, 100)),
    "sqrt": (np.sqrt, (0, 100)),
    "rsqrt": (lambda v: 1 / np.sqrt(v), (0.01, 100)),
    "reciprocal": (lambda v: 1 / v, (0.1, 10)),
    "tanh": (np.tanh, (-5, 5)),
    "sigmoid": (_sigmoid, (-10, 10)),
    "relu": (lambda v: np.maximum(v, 0), (-5, 5)),
    "gelu": (lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2))), (-6, 6)),
    "gelu_apprx_tanh": (lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))), (-6, 6)),
    "silu": (lambda v: v * _sigmoid(v), (-10, 10)),
    "softplus": (lambda v: np.log1p(np.exp(v)), (-10, 10)),
    "mish": (lambda v: v * np.tanh(np.log1p(np.exp(v))), (-6, 6)),
    "erf": (_erf, (-4, 4)),
    "sin": (np.sin, (-math.pi, math.pi)),
    "cos": (np.cos, (-math.pi, math.pi)),
    "arctan": (np.arctan, (-math.pi / 2, math.pi / 2)),
    "square": (np.square, (-5, 5)),
    "abs": (np.abs, (-5, 5)),
    "sign": (np.sign, (-5, 5)),
    "negative": (np.negative, (-5, 5)),
}


def uniform(lo, hi, shape=(P, F)):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


@pytest.mark.parametrize("func", sorted(FUNCS))
def test_activation_functions(func):
    ref, (lo, hi) = FUNCS[func]
    x = uniform(lo, hi)
    src, dst = sb("float32", P, F), sb("float32", P, F, offset=1024)
    run = execute([Activation(dst=dst, src=src, func=func)], preload=[(src, x)], fetch=[dst])
    expected = ref(x.astype(np.float64))
    np.testing.assert_allclose(run[0], expected, rtol=2e-6, atol=2e-6)


def test_scale_and_bias_immediates_and_tiles():
    x = uniform(-2, 2)
    scale_col, bias_col = uniform(0.5, 2, (P, 1)), uniform(-1, 1, (P, 1))
    src, dst = sb("float32", P, F), sb("float32", P, F, offset=1024)
    sc, bi = sb("float32", P, 1, offset=2048), sb("float32", P, 1, offset=2052)
    pre = [(src, x), (sc, scale_col), (bi, bias_col)]
    x64 = x.astype(np.float64)
    for scale, bias, s64, b64 in (
        (0.5, 0.25, 0.5, 0.25),
        (sc, bi, scale_col.astype(np.float64), bias_col.astype(np.float64)),
        (sc, -3.0, scale_col.astype(np.float64), -3.0),
        (2.0, None, 2.0, 0.0),
    ):
        run = execute([Activation(dst=dst, src=src, func="exp", scale=scale, bias=bias)], preload=pre, fetch=[dst])
        pre_act = (x64 * s64).astype(np.float32).astype(np.float64) + b64  # fp32 multiply, then add
        np.testing.assert_allclose(run[0], np.exp(pre_act), rtol=3e-6)


@pytest.mark.parametrize("reduce_op, fn", [("add", np.sum), ("maximum", np.max), ("minimum", np.min)])
def test_activation_with_reduction(reduce_op, fn):
    x = uniform(-3, 3)
    src, dst, red = sb("float32", P, F), sb("bfloat16", P, F, offset=1024), sb("float32", P, 1, offset=2048)
    run = execute(
        [Activation(dst=dst, src=src, func="square", reduce_op=reduce_op, reduce_res=red)],
        preload=[(src, x)],
        fetch=[dst, red],
    )
    sq = np.square(x.astype(np.float64)).astype(np.float32)
    assert_bits_equal(run[0], rounded(sq, "bfloat16"))
    # the reduction sees the fp32 results, before dst's rounding
    np.testing.assert_allclose(run[1][:, 0], fn(sq.astype(np.float64), axis=1), rtol=1e-5)


def test_activation_reads_psum_and_rounds_to_narrow_dst():
    x = uniform(-3, 3)
    src, dst = ps("float32", P, F), sb("float8_e4m3", P, F)
    run = execute([Activation(dst=dst, src=src, func="copy", scale=200.0)], preload=[(src, x)], fetch=[dst])
    assert_bits_equal(run[0], rounded(x * np.float32(200.0), "float8_e4m3"))  # saturates at 240


def test_activation_on_multi_dim_patterns():
    x = uniform(-1, 1, (P, 4, 10))
    src, dst = sb("float32", P, (4, 10)), sb("float32", P, 40, offset=1024)
    run = execute([Activation(dst=dst, src=src, func="negative")], preload=[(src, x)], fetch=[dst])
    np.testing.assert_array_equal(run[0], -x.reshape(P, 40))


S = sb("float32", P, F)
D = sb("float32", P, F, offset=1024)
R = sb("float32", P, 1, offset=2048)


@pytest.mark.parametrize(
    "kw, rule, value",
    [
        (dict(func="frobnicate"), "op.unknown", "'frobnicate'"),
        (dict(reduce_op="add"), "activation.reduce", "together"),
        (dict(reduce_res=R), "activation.reduce", "together"),
        (dict(reduce_op="multiply", reduce_res=R), "activation.reduce", "'multiply'"),
        (dict(reduce_op="add", reduce_res=sb("float32", P, 2, offset=2048)), "activation.reduce", "[8, 2]"),
        (dict(reduce_op="add", reduce_res=sb("float32", 4, 1, offset=2048)), "shape.partition_mismatch", "4"),
        (dict(engine="vector"), "engine.unsupported", "vector"),
        (dict(dst=sb("float32", P, F + 1, offset=1024)), "shape.free_mismatch", str(F + 1)),
        (dict(dst=sb("float32", 4, F, offset=1024)), "shape.partition_mismatch", "4"),
        (dict(scale=sb("float32", P, 3, offset=2048)), "operand.shape", "[8, 3]"),
        (dict(bias="zero"), "operand.type", "str"),
        (dict(src=sb("float32", P, F, start=16)), "partition.start", "got 16"),
        (dict(dst=sb("int64", P, F, offset=1024)), "dtype.unsupported_on_chip", "int64"),
    ],
)
def test_activation_rules(kw, rule, value):
    base = dict(dst=D, src=S, func="exp")
    base.update(kw)
    err = rule_of(Activation(**base))
    assert err.rule == rule, err
    assert value in str(err), str(err)
