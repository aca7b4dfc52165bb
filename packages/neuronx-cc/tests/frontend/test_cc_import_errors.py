"""Every way the importer refuses its input: UnsupportedOp names the op, its types and the line
(the model's Python line when torch-mlir attached one, else the line in the MLIR text)."""

import sys

import numpy as np
import pytest

pytest.importorskip("torch_mlir")

from neuronxcc.frontend import FrontendError, MissingDependency, UnsupportedOp, import_text, run_graph  # noqa: E402
from neuronxcc.frontend import stablehlo as importer  # noqa: E402


def fn(sig, body, results):
    return f"func.func @main({sig}) -> ({results}) {{\n{body}\n}}\n"


def rejects(text, op, *fragments, line=None):
    with pytest.raises(UnsupportedOp) as err:
        import_text(text, source="m.mlir")
    message = str(err.value)
    assert err.value.op == op, message
    assert f"unsupported op '{op}'" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    if line is not None:
        assert err.value.location.startswith(f"m.mlir:{line}:"), err.value.location
        assert f"at m.mlir:{line}:" in message
    return err.value


def test_unknown_op_names_types_line_and_text():
    text = fn("%x: tensor<4xf32>",
              '  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64}> ({\n'
              "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
              "    %c = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
              "    stablehlo.return %c : tensor<i1>\n"
              "  }) : (tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>", "tensor<4xf32>")
    err = rejects(text, "stablehlo.sort", "types (tensor<4xf32>) -> (tensor<4xf32>)", 'op: %0 = "stablehlo.sort"', line=2)
    assert err.operand_types == ["tensor<4xf32>"] and err.result_types == ["tensor<4xf32>"]


def test_custom_call():
    text = fn("%x: tensor<4xf32>", '  %0 = stablehlo.custom_call @foo(%x) : (tensor<4xf32>) -> tensor<4xf32>\n'
              "  return %0 : tensor<4xf32>", "tensor<4xf32>")
    rejects(text, "stablehlo.custom_call", "tensor<4xf32>", line=2)


def test_pooling_window():
    text = fn("%x: tensor<4x6xf32>",
              "  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>\n"
              '  %0 = "stablehlo.reduce_window"(%x, %c) <{window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}> ({\n'
              "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %m = stablehlo.maximum %a, %b : tensor<f32>\n"
              "    stablehlo.return %m : tensor<f32>\n  }) : (tensor<4x6xf32>, tensor<f32>) -> tensor<2x3xf32>\n"
              "  return %0 : tensor<2x3xf32>", "tensor<2x3xf32>")
    rejects(text, "stablehlo.reduce_window", "pooling windows", line=3)


def test_cumsum_window_is_supported():
    text = fn("%x: tensor<2x4xf32>",
              "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
              '  %0 = "stablehlo.reduce_window"(%x, %c) <{padding = dense<[[0, 0], [3, 0]]> : tensor<2x2xi64>, '
              "window_dimensions = array<i64: 1, 4>, window_strides = array<i64: 1, 1>}> ({\n"
              "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %m = stablehlo.add %a, %b : tensor<f32>\n"
              "    stablehlo.return %m : tensor<f32>\n  }) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>\n"
              "  return %0 : tensor<2x4xf32>", "tensor<2x4xf32>")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    (y,) = run_graph(import_text(text), x)
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1))


def test_dynamic_shape_argument():
    text = fn("%x: tensor<?xf32>", "  return %x : tensor<?xf32>", "tensor<?xf32>")
    rejects(text, "func.func", "argument 0", "tensor<?xf32>", "static-shape")


def test_result_type_without_graph_form():
    text = fn("%x: tensor<4xf32>", "  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xcomplex<f32>>\n"
              "  %1 = stablehlo.real %0 : (tensor<4xcomplex<f32>>) -> tensor<4xf32>\n  return %1 : tensor<4xf32>", "tensor<4xf32>")
    rejects(text, "stablehlo.convert", "complex<f32>", "no graph form", line=2)


def test_logical_shift_of_signed_integers():
    text = fn("%x: tensor<4xi32>", "  %0 = stablehlo.shift_right_logical %x, %x : tensor<4xi32>\n  return %0 : tensor<4xi32>",
              "tensor<4xi32>")
    rejects(text, "stablehlo.shift_right_logical", "signed", line=2)


def test_pad_with_a_computed_value():
    text = fn("%x: tensor<4xf32>, %v: tensor<f32>",
              "  %0 = stablehlo.pad %x, %v, low = [1], high = [0], interior = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<5xf32>\n"
              "  return %0 : tensor<5xf32>", "tensor<5xf32>")
    rejects(text, "stablehlo.pad", "padding value is not a constant", line=2)


def test_dynamic_slice_with_runtime_start():
    text = fn("%x: tensor<4xf32>, %i: tensor<i64>",
              "  %0 = stablehlo.dynamic_slice %x, %i, sizes = [2] : (tensor<4xf32>, tensor<i64>) -> tensor<2xf32>\n"
              "  return %0 : tensor<2xf32>", "tensor<2xf32>")
    rejects(text, "stablehlo.dynamic_slice", "start indices are not constants", line=2)


def test_reduce_with_an_unknown_body():
    text = fn("%x: tensor<4x3xf32>",
              "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
              '  %0 = "stablehlo.reduce"(%x, %c) <{dimensions = array<i64: 0>}> ({\n'
              "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %d = stablehlo.subtract %a, %b : tensor<f32>\n"
              "    stablehlo.return %d : tensor<f32>\n  }) : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>\n"
              "  return %0 : tensor<3xf32>", "tensor<3xf32>")
    rejects(text, "stablehlo.reduce", "stablehlo.subtract", "argmax", line=3)


def test_bitwise_reduce_of_integers():
    text = fn("%x: tensor<4xi32>",
              "  %c = stablehlo.constant dense<-1> : tensor<i32>\n"
              "  %0 = stablehlo.reduce(%x init: %c) applies stablehlo.and across dimensions = [0] : "
              "(tensor<4xi32>, tensor<i32>) -> tensor<i32>\n  return %0 : tensor<i32>", "tensor<i32>")
    rejects(text, "stablehlo.reduce", "bitwise and-reduction of int32", line=3)


GATHER = ('  %0 = "stablehlo.gather"(%a, %i) <{{dimension_numbers = #stablehlo.gather<{dn}>, slice_sizes = array<i64: {sizes}>}}> : '
          "(tensor<3x4xf32>, tensor<2x1xi64>) -> {result}\n  return %0 : {result}")


def test_gather_of_partial_windows():
    body = GATHER.format(dn="offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1",
                         sizes="1, 2", result="tensor<2x2xf32>")
    rejects(fn("%a: tensor<3x4xf32>, %i: tensor<2x1xi64>", body, "tensor<2x2xf32>"), "stablehlo.gather", "whole slices", line=2)


def test_gather_with_batching_dims():
    text = fn("%a: tensor<2x4xf32>, %i: tensor<2x1xi64>",
              '  %0 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], '
              "operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 1>, "
              "slice_sizes = array<i64: 1, 1>}> : (tensor<2x4xf32>, tensor<2x1xi64>) -> tensor<2xf32>\n"
              "  return %0 : tensor<2xf32>", "tensor<2xf32>")
    rejects(text, "stablehlo.gather", "batching dims", line=2)


def _scatter(body_ops, dn="update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1",
             updates="tensor<2x4xf32>"):
    return fn(f"%a: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: {updates}",
              f'  %0 = "stablehlo.scatter"(%a, %i, %u) <{{scatter_dimension_numbers = #stablehlo.scatter<{dn}>}}> ({{\n'
              f"  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n{body_ops}"
              f"  }}) : (tensor<3x4xf32>, tensor<2x1xi64>, {updates}) -> tensor<3x4xf32>\n  return %0 : tensor<3x4xf32>",
              "tensor<3x4xf32>")


def test_scatter_with_a_multiply_body():
    text = _scatter("    %m = stablehlo.multiply %x, %y : tensor<f32>\n    stablehlo.return %m : tensor<f32>\n")
    rejects(text, "stablehlo.scatter", "stablehlo.multiply", "neither an update (set) nor an add", line=2)


def test_scatter_of_partial_windows():
    text = _scatter("    stablehlo.return %y : tensor<f32>\n", updates="tensor<2x2xf32>")
    rejects(text, "stablehlo.scatter", "partial windows", line=2)


def test_scatter_with_indexed_window_dims():
    text = _scatter("    stablehlo.return %y : tensor<f32>\n",
                    dn="update_window_dims = [1, 2], inserted_window_dims = [], scatter_dims_to_operand_dims = [0], index_vector_dim = 1",
                    updates="tensor<2x1x4xf32>")
    rejects(text, "stablehlo.scatter", "not all inserted window dims", line=2)


def test_a_graph_rule_rejection_is_reported_as_the_op(monkeypatch):
    def broken(self, op):
        raise ValueError("boom")

    monkeypatch.setitem(importer.HANDLERS, "stablehlo.negate", broken)
    text = fn("%x: tensor<4xf32>", "  %0 = stablehlo.negate %x : tensor<4xf32>\n  return %0 : tensor<4xf32>", "tensor<4xf32>")
    rejects(text, "stablehlo.negate", "could not map it onto graph ops (ValueError: boom)", line=2)


def test_parse_errors_name_the_line():
    with pytest.raises(FrontendError, match=r"cannot parse MLIR from m.mlir: m.mlir:2:\d+: .*stablehlo.nonsense"):
        import_text(fn("%x: tensor<4xf32>", "  %0 = stablehlo.nonsense %x : tensor<4xf32>\n  return %0 : tensor<4xf32>",
                       "tensor<4xf32>"), source="m.mlir")


def test_module_without_functions_and_missing_function():
    with pytest.raises(FrontendError, match="no func.func"):
        import_text("module {\n}\n")
    with pytest.raises(FrontendError, match=r"no function @other \(it has @main\)"):
        import_text(fn("%x: tensor<4xf32>", "  return %x : tensor<4xf32>", "tensor<4xf32>"), func_name="other")


def test_dense_resource_without_its_blob():
    text = fn("", "  %0 = stablehlo.constant dense_resource<missing_blob> : tensor<2xf32>\n  return %0 : tensor<2xf32>",
              "tensor<2xf32>")
    with pytest.raises(FrontendError, match="dense_resource<missing_blob> has no blob"):
        import_text(text)


def test_unsupported_op_from_a_torch_model_points_at_the_model_line():
    torch = pytest.importorskip("torch")
    from neuronxcc.frontend import import_module
    from torch_mlir import fx

    class Pooler(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            return torch.nn.functional.max_pool1d(y, 2)  # the line the error must name

    module = fx.export_and_import(Pooler(), torch.randn(1, 4, 6), output_type="stablehlo")
    with pytest.raises(UnsupportedOp) as err:
        import_module(module)
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1) if "the line the error must name" in text)
    assert err.value.op == "stablehlo.reduce_window"
    assert err.value.location == f"{__file__}:{line}"
    assert "tensor<1x4x1x6xf32>" in map(str, err.value.operand_types) and f"test_cc_import_errors.py:{line}" in str(err.value)


def test_missing_torch_mlir(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_mlir", None)
    with pytest.raises(MissingDependency, match=r"pip install 'neuronx-cc\[stablehlo\]'"):
        import_text("func.func @main() -> () {\n  return\n}\n")
