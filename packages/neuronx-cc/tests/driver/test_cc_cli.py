"""The ``neuronx-cc`` command line: compile, inspect, and their errors and exit codes."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from neuron_sim import estimate
from neuron_sim.neff import Neff
from neuronxcc.driver import cli

MLP_TEXT = """
func.func @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %c = stablehlo.constant dense<0.0> : tensor<4x8xf32>
  %1 = stablehlo.maximum %0, %c : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
"""


def _kernel_neff(path):
    """A real NEFF (with a recorded timing summary), written by nki."""
    nki = pytest.importorskip("nki")
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def add(a_input, b_input):
        c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(a_input.shape, a_input.dtype, buffer=nl.sbuf)
        b = nl.ndarray(b_input.shape, b_input.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=a_input)
        nisa.dma_copy(dst=b, src=b_input)
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=c_output, src=a)
        return c_output

    x = np.ones((128, 64), np.float32)
    nki.baremetal(add, save_neff_name=str(path))(x, x)
    return path


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- inspect -----------------------------------------------------------------------------------------


def test_inspect_prints_tensors_instructions_and_timing(tmp_path, capsys):
    neff = _kernel_neff(tmp_path / "add.neff")
    code, out, err = run_cli(capsys, "inspect", str(neff))
    assert code == 0, err
    assert "tensors:" in out and "float32" in out and "128x64" in out and "32.0 KiB" in out
    assert "instructions:" in out and "vector" in out and "dma" in out
    assert "timing (recorded in the NEFF):" in out
    for field in ("total time", "engine busy", "MFU", "HBM bytes"):
        assert field in out, field


def test_inspect_json(tmp_path, capsys):
    neff = _kernel_neff(tmp_path / "add.neff")
    code, out, _ = run_cli(capsys, "inspect", "--json", str(neff))
    assert code == 0
    data = json.loads(out)
    assert data["timing_summary"] == Neff.load(neff).timing_summary
    assert data["timing_summary"]["total_time_ns"] == pytest.approx(estimate(Neff.load(neff).program).total_ns)
    assert sum(data["instruction_counts"].values()) == data["num_instructions"]
    assert {t["kind"] for t in data["tensors"]} >= {"input", "output"}


def test_inspect_estimates_timing_when_the_neff_has_none(tmp_path, capsys):
    from neuron_sim.neff import Neff

    path = _kernel_neff(tmp_path / "add.neff")
    neff = Neff.load(path)
    Neff(neff.program).save(tmp_path / "bare.neff")
    code, out, _ = run_cli(capsys, "inspect", str(tmp_path / "bare.neff"))
    assert code == 0 and "estimated now" in out and "total time" in out


def test_inspect_missing_file(tmp_path, capsys):
    code, _, err = run_cli(capsys, "inspect", str(tmp_path / "nope.neff"))
    assert code == cli.EXIT_IO and "no such file" in err and "nope.neff" in err


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped"])
def test_inspect_corrupt_neff(tmp_path, capsys, damage):
    path = _kernel_neff(tmp_path / "add.neff")
    data = bytearray(path.read_bytes())
    if damage == "garbage":
        data = bytearray(b"definitely not a neff file" * 10)
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    code, out, err = run_cli(capsys, "inspect", str(path))
    assert code == cli.EXIT_BAD_NEFF and "not a valid NEFF" in err and str(path) in err
    assert out == ""


def test_inspect_directory(tmp_path, capsys):
    code, _, err = run_cli(capsys, "inspect", str(tmp_path))
    assert code == cli.EXIT_IO and "directory" in err


# --- compile ---------------------------------------------------------------------------------------------


@pytest.fixture
def fake_compiler(monkeypatch, tmp_path):
    """Stands in for neuronxcc.compiler.compile_neff (same signature) so the driver's plumbing is
    tested whatever state the compiler is in; test_compile_end_to_end uses the real one."""
    calls = []
    template = _kernel_neff(tmp_path / "template.neff")

    def compile_neff(graph, arch):
        from neuron_sim.neff import Neff

        calls.append((graph, arch))
        return Neff.load(template)

    monkeypatch.setattr(cli, "compile_neff", compile_neff)
    return calls


def test_compile_imports_and_writes_the_neff(tmp_path, capsys, fake_compiler):
    pytest.importorskip("torch_mlir")
    src = tmp_path / "mlp.mlir"
    src.write_text(MLP_TEXT)
    code, out, err = run_cli(capsys, "compile", str(src), "-o", str(tmp_path / "out.neff"), "--target", "trn3")
    assert code == 0, err
    graph, arch = fake_compiler[0]
    assert arch.name.lower().startswith("trn3") or "3" in arch.name
    # relu's splat zero is one scalar broadcast to the shape
    assert [n.op for n in graph.nodes] == ["dot_general", "constant", "broadcast_in_dim", "maximum"]
    assert (tmp_path / "out.neff").exists() and "out.neff" in out and "instructions" in out


def test_compile_default_output_name(tmp_path, capsys, fake_compiler):
    pytest.importorskip("torch_mlir")
    src = tmp_path / "model.mlir"
    src.write_text(MLP_TEXT)
    code, _, err = run_cli(capsys, "compile", str(src))
    assert code == 0, err
    assert (tmp_path / "model.neff").exists()


def test_compile_missing_file(tmp_path, capsys):
    code, _, err = run_cli(capsys, "compile", str(tmp_path / "missing.mlir"), "-o", str(tmp_path / "x.neff"))
    assert code == cli.EXIT_IO and "no such file" in err and "missing.mlir" in err


def test_compile_bad_target(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["compile", "x.mlir", "--target", "trn9"])
    assert exc.value.code == cli.EXIT_USAGE
    assert "trn9" in capsys.readouterr().err


def test_compile_unparsable_mlir_names_the_line(tmp_path, capsys):
    pytest.importorskip("torch_mlir")
    src = tmp_path / "bad.mlir"
    src.write_text("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.frobnicate %x\n}\n")
    code, _, err = run_cli(capsys, "compile", str(src), "-o", str(tmp_path / "x.neff"))
    assert code == cli.EXIT_REJECTED and "cannot parse MLIR" in err and "bad.mlir:2" in err


def test_compile_unsupported_op_names_op_types_and_line(tmp_path, capsys):
    pytest.importorskip("torch_mlir")
    src = tmp_path / "sort.mlir"
    src.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        '  %0 = "stablehlo.sort"(%x) <{dimension = 0 : i64}> ({\n'
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "    %c = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
        "    stablehlo.return %c : tensor<i1>\n"
        "  }) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n}\n")
    code, _, err = run_cli(capsys, "compile", str(src), "-o", str(tmp_path / "x.neff"))
    assert code == cli.EXIT_REJECTED
    assert "unsupported op 'stablehlo.sort'" in err and "tensor<4xf32>" in err and "sort.mlir:2" in err
    assert not (tmp_path / "x.neff").exists()


def test_compile_without_torch_mlir(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_mlir", None)  # as if the extra were not installed
    src = tmp_path / "m.mlir"
    src.write_text(MLP_TEXT)
    code, _, err = run_cli(capsys, "compile", str(src), "-o", str(tmp_path / "x.neff"))
    assert code == cli.EXIT_MISSING_DEPENDENCY and "neuronx-cc[stablehlo]" in err


def test_compile_unwritable_output(tmp_path, capsys, fake_compiler):
    pytest.importorskip("torch_mlir")
    src = tmp_path / "m.mlir"
    src.write_text(MLP_TEXT)
    code, _, err = run_cli(capsys, "compile", str(src), "-o", str(tmp_path / "no" / "such" / "dir" / "x.neff"))
    assert code == cli.EXIT_IO and "cannot write" in err


SOFTMAX_TEXT = """
func.func @main(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x16xf32>
  %d = stablehlo.subtract %x, %mb : tensor<4x16xf32>
  %e = stablehlo.exponential %d : tensor<4x16xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<4xf32>) -> tensor<4x16xf32>
  %y = stablehlo.divide %e, %sb : tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
"""


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _compile_and_run(tmp_path, capsys, text, inputs, target="trn2"):
    """CLI compile -> NEFF on disk -> CLI inspect -> the NEFF's ISA program on the exact executor."""
    pytest.importorskip("torch_mlir")
    pytest.importorskip("neuronxcc.compiler")
    from neuron_sim.neff import Neff
    from neuronxcc.compiler.testing import run_exact

    src = tmp_path / "model.mlir"
    src.write_text(text)
    out_path = tmp_path / "model.neff"
    code, out, err = run_cli(capsys, "compile", str(src), "-o", str(out_path), "--target", target)
    if code == cli.EXIT_REJECTED and "no lowering for op" in err:
        pytest.skip(f"the compiler cannot lower this model yet: {err.strip()}")
    assert code == 0, err
    assert "instructions" in out and "estimated on" in out
    code, shown, err = run_cli(capsys, "inspect", str(out_path))
    assert code == 0, err
    assert "input0" in shown and "output0" in shown and "total time" in shown and "MFU" in shown
    program = Neff.load(out_path).program
    outputs = run_exact(program, {f"input{i}": x for i, x in enumerate(inputs)})
    return outputs, shown


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_compile_end_to_end(tmp_path, capsys, target):
    """The real compiler: MLIR -> NEFF -> inspect, and the NEFF's ISA program computes the model."""
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    outputs, shown = _compile_and_run(tmp_path, capsys, SOFTMAX_TEXT, [x], target)
    assert f"target {target}" in shown
    np.testing.assert_allclose(outputs["output0"], _softmax(x), rtol=1e-5, atol=1e-6)


def test_compile_end_to_end_torch_model(tmp_path, capsys):
    """A torch model (RMSNorm + softmax + SiLU) through torch-mlir, the CLI and the exact executor."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_mlir")
    from torch_mlir import fx

    class Model(torch.nn.Module):
        def forward(self, x):
            h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            return torch.nn.functional.silu(h).softmax(-1)

    x = torch.randn(8, 32)
    text = str(fx.export_and_import(Model(), x, output_type="stablehlo"))
    outputs, _ = _compile_and_run(tmp_path, capsys, text, [x.numpy()])
    np.testing.assert_allclose(outputs["output0"], Model()(x).numpy(), rtol=1e-5, atol=1e-6)


def test_compile_end_to_end_mlp(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal((16, 8)).astype(np.float32)
    outputs, _ = _compile_and_run(tmp_path, capsys, MLP_TEXT, [x, w])
    np.testing.assert_allclose(outputs["output0"], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_compile_error_from_the_compiler_names_op_and_line(tmp_path, capsys, monkeypatch):
    """A graph the compiler refuses (CompileError) exits 1 with the op and the MLIR line."""
    pytest.importorskip("torch_mlir")
    compiler = pytest.importorskip("neuronxcc.compiler")

    def refuse(graph, arch):
        node = graph.nodes[0]
        raise compiler.CompileError("compile.unsupported_op", f"no lowering for op {node.op!r} yet", op=node.op,
                                    location=node.location)

    monkeypatch.setattr(cli, "compile_neff", refuse)
    src = tmp_path / "mlp.mlir"
    src.write_text(MLP_TEXT)
    code, _, err = run_cli(capsys, "compile", str(src), "-o", str(tmp_path / "x.neff"))
    assert code == cli.EXIT_REJECTED and "cannot compile" in err and "dot_general" in err and "mlp.mlir:3:" in err
    assert not (tmp_path / "x.neff").exists()


def test_console_script_help():
    exe = os.path.join(os.path.dirname(sys.executable), "neuronx-cc")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "neuronxcc.driver.cli"]
    result = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "compile" in result.stdout and "inspect" in result.stdout
    assert "exit codes" in result.stdout
