"""TensorE utilization of compiled dot_generals in the timing model (MFU as Neuron Explorer defines it)."""

import pytest
from cc_helpers import Graph, compile_graph
from neuron_sim import estimate
from neuron_sim.programs.matmul import tiled_matmul

LAYOUTS = {  # contract dims of [2048, 2048] operands
    "x @ w (lhs transposed on TensorE)": (1, 0),
    "lhsT @ w (no transposes)": (0, 0),
    "x @ w.T (torch Linear: both transposed)": (1, 1),
}


def square(n, lc, rc, dtype="bfloat16"):
    g = Graph("mm")
    a = g.add_input("a", (n, n), dtype)
    b = g.add_input("b", (n, n), dtype)
    g.set_outputs([g.add1("dot_general", a, b, lhs_contract=(lc,), rhs_contract=(rc,))], ["out"])
    return g


def test_2048_cubed_bf16_reaches_85_percent_mfu():
    summary = estimate(compile_graph(square(2048, 1, 0))).summary
    assert summary["mfu_estimated_percent"] >= 85.0, summary["mfu_estimated_percent"]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_keeps_tensor_engine_busy(layout):
    lc, rc = LAYOUTS[layout]
    summary = estimate(compile_graph(square(2048, lc, rc))).summary
    assert summary["mfu_estimated_percent"] >= 84.0
    assert summary["tensor_active_time_percent"] >= 94.0


def test_at_least_as_fast_as_the_hand_tiled_program():
    """Given lhsT (no transposes needed), the compiled graph matches neuron_sim's tiled_matmul."""
    compiled = estimate(compile_graph(square(2048, 0, 0))).total_ns
    hand = estimate(tiled_matmul(2048, 2048, 2048)).total_ns
    assert compiled <= hand * 1.02


def test_odd_shapes_stay_efficient():
    """Shapes that are not multiples of 128/512 lose only their partial tiles."""
    g = Graph("odd")
    a = g.add_input("a", (1000, 1500), "bfloat16")
    b = g.add_input("b", (1500, 1300), "bfloat16")
    g.set_outputs([g.add1("dot_general", a, b, lhs_contract=(1,), rhs_contract=(0,))], ["out"])
    assert estimate(compile_graph(g)).summary["mfu_estimated_percent"] >= 65.0


def test_fp32_runs_at_a_quarter_rate():
    bf16 = estimate(compile_graph(square(1024, 0, 0))).total_ns
    fp32 = estimate(compile_graph(square(1024, 0, 0, "float32"))).total_ns
    assert 3.0 * bf16 < fp32 < 5.0 * bf16
