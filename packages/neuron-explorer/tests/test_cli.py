"""The neuron-explorer command: round trips from capture to every output, and its errors."""

import json
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from explorer_helpers import ARCH, buffers_for, capture, chain_program
from neuron_explorer.cli import main
from neuron_explorer.session.reader import find_sessions
from neuron_sim.neff import Neff
from neuron_sim.programs import tiled_matmul


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    program = chain_program()
    capture(out, lambda rt: [rt.device(0).launch(program, buffers_for(program, i), name="aten::exp") for i in range(2)])
    return out


def test_show_profile_schema(capsys):
    assert main(["--show-profile-schema", "--schema-format", "json"]) == 0
    assert "Instruction" in json.loads(capsys.readouterr().out)["tables"]


def test_view_ingest_only_prints_the_profile_directory(output_dir, capsys):
    assert main(["view", "-d", str(output_dir), "--ingest-only"]) == 0
    (path,) = capsys.readouterr().out.split()
    assert path.endswith("/profile") and (find_sessions(output_dir)[0] / "profile" / "Instruction.parquet").is_file()


def test_view_summary_text(output_dir, capsys):
    assert main(["view", "-d", str(output_dir), "--output-format", "summary-text"]) == 0
    out = capsys.readouterr().out
    assert "Top 10 operations by device time" in out and "aten::exp" in out


@pytest.mark.parametrize("fmt, ext", [("json", "json"), ("perfetto", "pftrace")])
def test_view_trace_formats(output_dir, tmp_path, capsys, fmt, ext):
    assert main(["view", "-d", str(output_dir), "--output-format", fmt, "--output-dir", str(tmp_path)]) == 0
    files = capsys.readouterr().out.split()
    assert any(f.endswith(f"system_profile.{ext}") for f in files) and len(files) == 2
    assert all((tmp_path / f.rsplit("/", 1)[1]).stat().st_size > 0 for f in files)


def test_view_a_neff_alone(tmp_path, capsys):
    path = tmp_path / "mm.neff"
    Neff(tiled_matmul(256, 256, 512, dtype="bfloat16", arch=ARCH)).save(path)
    assert main(["view", "-n", str(path), "--output-format", "summary-text", "--output-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "1 device executions (1 with instruction traces)" in out and "MATMUL" in out


@pytest.mark.parametrize("args, message", [
    (["view", "-d", "/nonexistent/dir"], "does not exist"),
    (["view", "-n", "/nonexistent.neff"], "does not exist"),
    (["view", "-d", "."], "holds no capture session"),
    (["inspect", "-o", "x"], "needs a command"),
    (["inspect", "-o", "x", "--nc", "0-1,9", "--", "true"], r"\[9\], which do not exist"),
    (["inspect", "-o", "x", "--event-types", "cosmic", "--", "true"], "unknown event type 'cosmic'"),
])
def test_errors_are_one_line_and_name_the_value(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuron-explorer: error:") and __import__("re").search(message, err), err


def test_inspect_captures_a_command_with_no_code_change(tmp_path, capsys):
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from neuron_sim.programs import tiled_matmul
        from neuron_sim.runtime import get_runtime
        p = tiled_matmul(256, 256, 512, dtype="float32")
        get_runtime().device(0).launch(p, {"lhsT": np.ones((256, 256), np.float32), "rhs": np.ones((256, 512), np.float32),
                                          "out": np.zeros((256, 512), np.float32)}, name="aten::mm")
        get_runtime().synchronize()
    """))
    out = tmp_path / "profiles"
    assert main(["inspect", "-o", str(out), "--", sys.executable, str(script)]) == 0
    assert "captured 1 session(s)" in capsys.readouterr().err
    assert main(["view", "-d", str(out), "--output-format", "summary-text"]) == 0
    assert "aten::mm" in capsys.readouterr().out
    assert main(["inspect", "-o", str(tmp_path / "none"), "--", sys.executable, "-c", "pass"]) == 0
    assert "wrote no profile" in capsys.readouterr().err


def test_view_serves_the_ui_on_loopback(output_dir):
    proc = subprocess.Popen([sys.executable, "-m", "neuron_explorer.cli", "view", "-d", str(output_dir), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("View the profile at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split(" at ")[1].strip()
        with urllib.request.urlopen(url + "api/profiles", timeout=30) as response:
            assert json.loads(response.read())[0]["instruction_count"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
