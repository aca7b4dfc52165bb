"""Op-by-op import of hand-written StableHLO, each checked against numpy with StableHLO's semantics."""

import numpy as np
import pytest

pytest.importorskip("torch_mlir")

from neuronxcc.frontend import UnsupportedOp, import_text, run_graph  # noqa: E402


def run(text, *inputs):
    graph = import_text(text, source="t.mlir")
    return graph, run_graph(graph, *inputs)


def func(sig, body, results):
    return f"func.func @main({sig}) -> ({results}) {{\n{body}\n}}\n"


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32) + 2.0
T34 = "tensor<3x4xf32>"

UNARY = {
    "negate": np.negative, "abs": np.abs, "exponential": np.exp, "exponential_minus_one": np.expm1,
    "log": lambda x: np.log(np.abs(x)), "log_plus_one": lambda x: np.log1p(np.abs(x)), "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x)), "tanh": np.tanh, "logistic": lambda x: 1 / (1 + np.exp(-x)), "sine": np.sin,
    "cosine": np.cos, "tan": np.tan, "floor": np.floor, "ceil": np.ceil, "round_nearest_even": np.rint, "sign": np.sign,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    needs_positive = name in ("log", "log_plus_one", "sqrt", "rsqrt")
    x = np.abs(A) if needs_positive else A * 3
    fn = UNARY[name]
    _, (y,) = run(func(f"%a: {T34}", f"  %0 = stablehlo.{name} %a : {T34}\n  return %0 : {T34}", T34), x)
    np.testing.assert_allclose(y, fn(x), rtol=2e-6, atol=2e-6)


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
          "minimum": np.minimum, "power": lambda a, b: np.power(np.abs(a), b), "remainder": np.fmod, "atan2": np.arctan2}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    a = np.abs(A) if name == "power" else A * 4
    _, (y,) = run(func(f"%a: {T34}, %b: {T34}", f"  %0 = stablehlo.{name} %a, %b : {T34}\n  return %0 : {T34}", T34), a, B)
    np.testing.assert_allclose(y, BINARY[name](a, B), rtol=3e-6, atol=3e-6)


def test_remainder_takes_the_dividends_sign():
    t = "tensor<4xf32>"
    _, (y,) = run(func(f"%a: {t}, %b: {t}", f"  %0 = stablehlo.remainder %a, %b : {t}\n  return %0 : {t}", t),
                  np.array([-7, 7, -7, 7], np.float32), np.array([3, -3, -3, 3], np.float32))
    np.testing.assert_array_equal(y, [-1, 1, -1, 1])


def test_integer_divide_truncates_and_convert_truncates():
    t = "tensor<4xi32>"
    body = (f"  %0 = stablehlo.divide %a, %b : {t}\n"
            f"  %1 = stablehlo.convert %f : (tensor<4xf32>) -> tensor<4xi32>\n"
            f"  return %0, %1 : {t}, {t}")
    _, (q, c) = run(func(f"%a: {t}, %b: {t}, %f: tensor<4xf32>", body, f"{t}, {t}"),
                    np.array([7, -7, 9, -9], np.int32), np.array([2, 2, -4, -4], np.int32),
                    np.array([2.7, -2.7, 0.5, -0.5], np.float32))
    np.testing.assert_array_equal(q, [3, -3, -2, 2])
    np.testing.assert_array_equal(c, [2, -2, 0, 0])


def test_logical_and_bitwise():
    tb, ti = "tensor<4xi1>", "tensor<4xi32>"
    body = (f"  %0 = stablehlo.and %a, %b : {tb}\n  %1 = stablehlo.or %a, %b : {tb}\n  %2 = stablehlo.xor %a, %b : {tb}\n"
            f"  %3 = stablehlo.not %a : {tb}\n  %4 = stablehlo.and %i, %j : {ti}\n  %5 = stablehlo.shift_left %i, %j : {ti}\n"
            f"  %6 = stablehlo.not %i : {ti}\n"
            f"  return %0, %1, %2, %3, %4, %5, %6 : {tb}, {tb}, {tb}, {tb}, {ti}, {ti}, {ti}")
    a, b = np.array([1, 1, 0, 0], bool), np.array([1, 0, 1, 0], bool)
    i, j = np.array([12, 5, 7, 1], np.int32), np.array([1, 2, 3, 0], np.int32)
    _, outs = run(func(f"%a: {tb}, %b: {tb}, %i: {ti}, %j: {ti}", body, ", ".join([tb] * 4 + [ti] * 3)), a, b, i, j)
    for got, want in zip(outs, [a & b, a | b, a ^ b, ~a, i & j, i << j, ~i]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("direction,fn", [("EQ", np.equal), ("NE", np.not_equal), ("LT", np.less), ("LE", np.less_equal),
                                          ("GT", np.greater), ("GE", np.greater_equal)])
def test_compare_select(direction, fn):
    body = (f"  %0 = stablehlo.compare {direction}, %a, %b, FLOAT : ({T34}, {T34}) -> tensor<3x4xi1>\n"
            f"  %1 = stablehlo.select %0, %a, %b : tensor<3x4xi1>, {T34}\n  return %1 : {T34}")
    b = np.where(RNG.random((3, 4)) < 0.3, A, B)
    _, (y,) = run(func(f"%a: {T34}, %b: {T34}", body, T34), A, b)
    np.testing.assert_array_equal(y, np.where(fn(A, b), A, b))


def test_select_with_scalar_predicate_and_clamp_with_scalar_bounds():
    body = ("  %lo = stablehlo.constant dense<-0.5> : tensor<f32>\n  %hi = stablehlo.constant dense<0.5> : tensor<f32>\n"
            f"  %0 = stablehlo.clamp %lo, %a, %hi : (tensor<f32>, {T34}, tensor<f32>) -> {T34}\n"
            f"  %1 = stablehlo.select %p, %0, %a : tensor<i1>, {T34}\n  return %1 : {T34}")
    sig = f"%p: tensor<i1>, %a: {T34}"
    _, (y,) = run(func(sig, body, T34), np.array(True), A)
    np.testing.assert_array_equal(y, np.clip(A, -0.5, 0.5))
    _, (y,) = run(func(sig, body, T34), np.array(False), A)
    np.testing.assert_array_equal(y, A)


def test_is_finite_and_round_away_from_zero():
    t = "tensor<5xf32>"
    body = (f"  %0 = stablehlo.is_finite %a : ({t}) -> tensor<5xi1>\n  %1 = stablehlo.round_nearest_afz %a : {t}\n"
            f"  return %0, %1 : tensor<5xi1>, {t}")
    x = np.array([0.5, -2.5, np.inf, np.nan, 1.4], np.float32)
    _, (finite, rounded) = run(func(f"%a: {t}", body, f"tensor<5xi1>, {t}"), x)
    np.testing.assert_array_equal(finite, np.isfinite(x))
    np.testing.assert_array_equal(rounded[[0, 1, 4]], [1.0, -3.0, 1.0])


def test_shapes_and_data_movement():
    body = ("  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>\n"
            "  %1 = stablehlo.reshape %0 : (tensor<4x3xf32>) -> tensor<2x6xf32>\n"
            "  %2 = stablehlo.slice %1 [0:2, 1:6:2] : (tensor<2x6xf32>) -> tensor<2x3xf32>\n"
            "  %3 = stablehlo.concatenate %2, %2, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>\n"
            "  %4 = stablehlo.broadcast_in_dim %3, dims = [2, 1] : (tensor<4x3xf32>) -> tensor<2x3x4xf32>\n"
            "  %5 = stablehlo.reverse %4, dims = [0, 2] : tensor<2x3x4xf32>\n"
            "  %6 = stablehlo.iota dim = 1 : tensor<2x3xi32>\n"
            "  return %5, %6 : tensor<2x3x4xf32>, tensor<2x3xi32>")
    _, (y, iota) = run(func("%a: tensor<3x4xf32>", body, "tensor<2x3x4xf32>, tensor<2x3xi32>"), A)
    s = A.T.reshape(2, 6)[:, 1:6:2]
    c = np.concatenate([s, s])
    expect = np.broadcast_to(c.T[None], (2, 3, 4))[::-1, :, ::-1]
    np.testing.assert_array_equal(y, expect)
    np.testing.assert_array_equal(iota, np.broadcast_to(np.arange(3), (2, 3)))


def test_pad_edge_negative_and_interior():
    body = ("  %v = stablehlo.constant dense<9.0> : tensor<f32>\n"
            "  %0 = stablehlo.pad %a, %v, low = [1, -1], high = [0, 2], interior = [1, 0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<6x5xf32>\n"
            "  return %0 : tensor<6x5xf32>")
    _, (y,) = run(func("%a: tensor<3x4xf32>", body, "tensor<6x5xf32>"), A)
    expect = np.full((6, 5), 9.0, np.float32)
    expect[1::2, :3] = A[:, 1:]
    np.testing.assert_array_equal(y, expect)


def test_dynamic_slice_and_update_with_constant_starts():
    body = ("  %i = stablehlo.constant dense<1> : tensor<i64>\n  %j = stablehlo.constant dense<3> : tensor<i64>\n"
            "  %0 = stablehlo.dynamic_slice %a, %i, %j, sizes = [2, 2] : (tensor<3x4xf32>, tensor<i64>, tensor<i64>) -> tensor<2x2xf32>\n"
            "  %1 = stablehlo.dynamic_update_slice %a, %u, %i, %i : (tensor<3x4xf32>, tensor<2x2xf32>, tensor<i64>, tensor<i64>) -> tensor<3x4xf32>\n"
            "  return %0, %1 : tensor<2x2xf32>, tensor<3x4xf32>")
    u = np.array([[10, 11], [12, 13]], np.float32)
    _, (s, upd) = run(func("%a: tensor<3x4xf32>, %u: tensor<2x2xf32>", body, "tensor<2x2xf32>, tensor<3x4xf32>"), A, u)
    np.testing.assert_array_equal(s, A[1:3, 2:4])  # start 3 clamps to 2, as StableHLO does
    expect = A.copy()
    expect[1:3, 1:3] = u
    np.testing.assert_array_equal(upd, expect)


def test_constants_of_every_form():
    body = ('  %0 = stablehlo.constant dense<[[1.5, -2.0], [0x7F800000, 0xFF800000]]> : tensor<2x2xf32>\n'
            '  %1 = stablehlo.constant dense<[1.0, 2.5, -3.0]> : tensor<3xbf16>\n'
            '  %2 = stablehlo.constant dense<"0x0100000002000000"> : tensor<2xi32>\n'
            '  %3 = stablehlo.constant dense<[true, false, true]> : tensor<3xi1>\n'
            '  %4 = arith.constant dense<7> : tensor<2xi64>\n'
            '  %5 = stablehlo.constant dense<2.500000e-01> : tensor<2x2xbf16>\n'
            '  %6 = stablehlo.constant dense_resource<blob_a> : tensor<2xf32>\n'
            '  %7 = stablehlo.constant dense_resource<blob_b> : tensor<3xi1>\n'
            '  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2x2xf32>, tensor<3xbf16>, tensor<2xi32>, tensor<3xi1>, '
            'tensor<2xi64>, tensor<2x2xbf16>, tensor<2xf32>, tensor<3xi1>')
    results = ("tensor<2x2xf32>, tensor<3xbf16>, tensor<2xi32>, tensor<3xi1>, tensor<2xi64>, tensor<2x2xbf16>, tensor<2xf32>, "
               "tensor<3xi1>")
    blobs = ('{-#\n  dialect_resources: {\n    builtin: {\n      blob_a: "0x040000000000C03F00000040",\n'
             '      blob_b: "0x01000000010001"\n    }\n  }\n#-}\n')
    _, outs = run("module {\n" + func("", body, results) + "}\n" + blobs)
    np.testing.assert_array_equal(outs[0], [[1.5, -2.0], [np.inf, -np.inf]])
    np.testing.assert_array_equal(outs[1].astype(np.float32), [1.0, 2.5, -3.0])
    np.testing.assert_array_equal(outs[2], [1, 2])
    np.testing.assert_array_equal(outs[3], [True, False, True])
    np.testing.assert_array_equal(outs[4], [7, 7])
    np.testing.assert_array_equal(outs[5].astype(np.float32), np.full((2, 2), 0.25))
    np.testing.assert_array_equal(outs[6], [1.5, 2.0])
    np.testing.assert_array_equal(outs[7], [True, False, True])


@pytest.mark.parametrize("body_op,kind,init,fn", [
    ("add", "sum", "0.0", np.sum), ("maximum", "max", "0xFF800000", np.max), ("minimum", "min", "0x7F800000", np.min),
    ("multiply", "prod", "1.0", np.prod), ("add", "sum", "2.0", lambda x, axis: np.sum(x, axis=axis) + 2.0),
    ("maximum", "max", "0.5", lambda x, axis: np.maximum(np.max(x, axis=axis), 0.5)),
])
def test_reduce(body_op, kind, init, fn):
    body = (f"  %c = stablehlo.constant dense<{init}> : tensor<f32>\n"
            f"  %0 = stablehlo.reduce(%a init: %c) applies stablehlo.{body_op} across dimensions = [1] : "
            f"({T34}, tensor<f32>) -> tensor<3xf32>\n  return %0 : tensor<3xf32>")
    graph, (y,) = run(func(f"%a: {T34}", body, "tensor<3xf32>"), A)
    np.testing.assert_allclose(y, fn(A, axis=1), rtol=1e-6)
    assert any(n.op == "reduce" and n.attrs["kind"] == kind for n in graph.nodes)


def test_reduce_logical_and_two_operand_sum():
    body = ("  %t = stablehlo.constant dense<true> : tensor<i1>\n  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
            "  %0 = stablehlo.reduce(%p init: %t) applies stablehlo.and across dimensions = [0] : (tensor<3x4xi1>, tensor<i1>) -> tensor<4xi1>\n"
            "  %1:2 = stablehlo.reduce(%a init: %z), (%a init: %z) across dimensions = [0] : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)\n"
            "   reducer(%x: tensor<f32>, %y: tensor<f32>) (%u: tensor<f32>, %v: tensor<f32>) {\n"
            "    %s = stablehlo.add %x, %y : tensor<f32>\n    %m = stablehlo.maximum %u, %v : tensor<f32>\n"
            "    stablehlo.return %s, %m : tensor<f32>, tensor<f32>\n  }\n"
            "  return %0, %1#0, %1#1 : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>")
    p = A > -0.5
    _, (all_, s, m) = run(func("%p: tensor<3x4xi1>, %a: tensor<3x4xf32>", body, "tensor<4xi1>, tensor<4xf32>, tensor<4xf32>"), p, A)
    np.testing.assert_array_equal(all_, p.all(0))
    np.testing.assert_allclose(s, A.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(m, np.maximum(A.max(0), 0))


def test_dot_general_batched_and_dot():
    body = ("  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : "
            "(tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>\n"
            "  %1 = stablehlo.dot %c, %d : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3xf32>\n"
            "  return %0, %1 : tensor<2x3x5xf32>, tensor<3xf32>")
    a, b = RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.standard_normal((2, 4, 5)).astype(np.float32)
    d = RNG.standard_normal(4).astype(np.float32)
    _, (y, z) = run(func("%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %c: tensor<3x4xf32>, %d: tensor<4xf32>", body,
                         "tensor<2x3x5xf32>, tensor<3xf32>"), a, b, A, d)
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, A @ d, rtol=1e-5, atol=1e-5)


def test_gather_rows_with_window_layout_change():
    # offset dim first: the result is [4 (window), 2 (batch)] -> a transpose after the gather
    body = ('  %0 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], '
            'collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : '
            '(tensor<3x4xf32>, tensor<2xi64>) -> tensor<4x2xf32>\n  return %0 : tensor<4x2xf32>')
    graph, (y,) = run(func("%a: tensor<3x4xf32>, %i: tensor<2xi64>", body, "tensor<4x2xf32>"), A, np.array([2, 0]))
    np.testing.assert_array_equal(y, A[[2, 0]].T)
    assert [n.op for n in graph.nodes] == ["gather", "transpose"]


def test_gather_of_several_indexed_dims():
    # x[i, j] for a 3-d x: two indexed dims, one whole window dim
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    body = ('  %0 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], '
            'collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, slice_sizes = array<i64: 1, 1, 5>}> : '
            '(tensor<3x4x5xf32>, tensor<6x2xi64>) -> tensor<6x5xf32>\n  return %0 : tensor<6x5xf32>')
    idx = np.stack([RNG.integers(0, 3, 6), RNG.integers(0, 4, 6)], axis=1)
    _, (y,) = run(func("%a: tensor<3x4x5xf32>, %i: tensor<6x2xi64>", body, "tensor<6x5xf32>"), x, idx)
    np.testing.assert_array_equal(y, x[idx[:, 0], idx[:, 1]])


def test_scatter_set_rows_and_multi_dim_add():
    upd_body_set = "  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    stablehlo.return %y : tensor<f32>\n"
    upd_body_add = ("  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    %s = stablehlo.add %x, %y : tensor<f32>\n"
                    "    stablehlo.return %s : tensor<f32>\n")
    body = ('  %0 = "stablehlo.scatter"(%a, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], '
            'inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({\n' + upd_body_set +
            '  }) : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>\n'
            '  %1 = "stablehlo.scatter"(%a, %j, %v) <{scatter_dimension_numbers = #stablehlo.scatter<'
            'inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>}> ({\n' + upd_body_add +
            '  }) : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3xf32>) -> tensor<3x4xf32>\n'
            '  return %0, %1 : tensor<3x4xf32>, tensor<3x4xf32>')
    u = RNG.standard_normal((2, 4)).astype(np.float32)
    j = np.array([[0, 1], [2, 3], [0, 1]])
    v = np.array([1.0, 2.0, 3.0], np.float32)
    graph, (s, t) = run(func("%a: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>, %j: tensor<3x2xi64>, %v: tensor<3xf32>",
                             body, "tensor<3x4xf32>, tensor<3x4xf32>"), A, np.array([[2], [0]]), u, j, v)
    expect = A.copy()
    expect[[2, 0]] = u
    np.testing.assert_array_equal(s, expect)
    expect = A.copy()
    np.add.at(expect, (j[:, 0], j[:, 1]), v)
    np.testing.assert_allclose(t, expect, rtol=1e-6)
    assert {"scatter", "index_add"} <= {n.op for n in graph.nodes}


def test_func_call_is_inlined_and_main_is_chosen():
    text = ("func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  %0 = stablehlo.multiply %x, %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
            "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
            "  %0 = func.call @helper(%a) : (tensor<4xf32>) -> tensor<4xf32>\n"
            "  %1 = func.call @helper(%0) : (tensor<4xf32>) -> tensor<4xf32>\n  return %1 : tensor<4xf32>\n}\n")
    x = np.array([1, 2, 3, 4], np.float32)
    graph, (y,) = run(text, x)
    np.testing.assert_array_equal(y, x ** 4)
    assert graph.name == "main"


def test_input_returned_twice_and_optimization_barrier():
    body = ("  %0 = stablehlo.optimization_barrier %a : tensor<4xf32>\n  return %0, %a : tensor<4xf32>, tensor<4xf32>")
    x = np.arange(4, dtype=np.float32)
    graph, (y, z) = run(func("%a: tensor<4xf32>", body, "tensor<4xf32>, tensor<4xf32>"), x)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, x)
    assert [v.name for v in graph.inputs] == ["input0"] and [v.name for v in graph.outputs] == ["output0", "output1"]


def test_float64_is_computed_in_float32_behind_a_float64_interface():
    text = func("%a: tensor<4xf64>", "  %c = stablehlo.constant dense<0.5> : tensor<4xf64>\n"
                "  %0 = stablehlo.multiply %a, %c : tensor<4xf64>\n  return %0 : tensor<4xf64>", "tensor<4xf64>")
    x = np.array([1, 2, 3, 4], np.float64)
    graph, (y,) = run(text, x)
    assert graph.inputs[0].type.dtype == "float64" and graph.outputs[0].type.dtype == "float64"
    inner = {v.type.dtype for n in graph.nodes if n.op != "convert" for v in n.outputs}
    assert inner == {"float32"}
    np.testing.assert_array_equal(y, x * 0.5)
    kept = import_text(text, narrow_float64=False)
    assert {v.type.dtype for n in kept.nodes for v in n.outputs} == {"float64"}


def test_mlir_bytecode():
    import io

    from neuronxcc.frontend.mlir import parse

    text = func("%a: tensor<4xf32>", "  %0 = stablehlo.sqrt %a : tensor<4xf32>\n  return %0 : tensor<4xf32>", "tensor<4xf32>")
    buffer = io.BytesIO()
    parse(text).operation.write_bytecode(buffer)
    x = np.array([1, 4, 9, 16], np.float32)
    _, (y,) = run(buffer.getvalue(), x)
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


@pytest.mark.parametrize("src,dst,out_type", [("tensor<3x4xf32>", "tensor<3x4xi32>", np.int32),
                                              ("tensor<3x4xf32>", "tensor<3x4x2xbf16>", None),
                                              ("tensor<3x4xf32>", "tensor<3x4x4xui8>", np.uint8)], ids=str)
def test_bitcast_convert_reads_the_bytes(src, dst, out_type):
    x = A.copy()
    x[0, :3] = [-0.0, np.nan, -np.inf]
    graph, (y,) = run(func(f"%a: {src}", f"  %0 = stablehlo.bitcast_convert %a : ({src}) -> {dst}\n  return %0 : {dst}",
                           dst), x)
    assert [n.op for n in graph.nodes] == ["bitcast_convert"]
    assert y.tobytes() == x.tobytes() and (out_type is None or y.dtype == out_type)


def test_bitcast_convert_of_float64_is_refused_when_narrowed():
    text = func("%a: tensor<3xf64>", "  %0 = stablehlo.bitcast_convert %a : (tensor<3xf64>) -> tensor<3xi64>\n"
                "  return %0 : tensor<3xi64>", "tensor<3xi64>")
    with pytest.raises(UnsupportedOp, match="float64"):
        import_text(text, source="t.mlir")
