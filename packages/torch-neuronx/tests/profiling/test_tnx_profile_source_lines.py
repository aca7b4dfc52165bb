"""An eager op's device instructions point at the user's line that called it: its program is
cached and shared by every call site (its own locations are the compiler's), so the launch
carries the call site, taken only while a profile runs. NKI kernels and compiled graphs keep
their own lines (the kernel's, the compiled function's)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch
import torch_neuronx.execution.launch as launch
from neuron_explorer import open_profile
from neuron_explorer.session.reader import find_sessions
from tnx_helpers import sin_kernel
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler


def _line(marker: str, path: str = __file__) -> int:
    """The line of ``path`` that ends with the comment ``# @<marker>``."""
    with open(path) as f:
        (number,) = [n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# @{marker}")]
    return number


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 32)

    def forward(self, x):
        h = self.fc1(x)  # @fc1
        h = torch.relu(h)  # @relu
        return self.fc2(h)  # @fc2


def _tanh3(x):
    return torch.tanh(x) * 3  # @compiled-body


def _instructions(session) -> list[tuple[int, str, frozenset, frozenset]]:
    """Per launch (in launch order): its op, the locations of its rows and where their stack
    frames resolve to (file, line) through the StackFrame tables."""
    profile = open_profile(session)
    files = {r["id"]: r["name"] for r in profile.table("StackFrameFileName").to_pylist()}
    lines = {r["id"]: (files[str(r["file_name_id"])], r["line_number"])
             for r in profile.table("StackFrameFileLocation").to_pylist()}
    frames = {f"[{r['id']}]": lines[str(r["file_location_id"])] for r in profile.table("StackFrame").to_pylist()}
    per_launch: dict[int, tuple[str, set, set]] = {}
    for r in profile.table("Instruction", columns=["launch_id", "hlo_name", "nki_source_location", "stack_frame_ids"]).to_pylist():
        name, locations, resolved = per_launch.setdefault(r["launch_id"], (r["hlo_name"], set(), set()))
        locations.add(r["nki_source_location"])
        resolved.add(frames.get(r["stack_frame_ids"]))
    return [(k, n, frozenset(loc), frozenset(res)) for k, (n, loc, res) in sorted(per_launch.items())]


def test_eager_instructions_point_at_the_users_lines(tmp_path):
    torch.manual_seed(0)
    model = _Net().to("neuron")
    x = torch.randn(16, 64).to("neuron")
    model(x)  # compiled and warm
    config = NeuronConfig(profile_output_dir=tmp_path)
    with NeuronProfiler(config).profile():
        for _ in range(2):
            model(x)
        torch.neuron.synchronize()
    got = [(name, locations, resolved) for _, name, locations, resolved in _instructions(config.get_session_dir())]
    expected = []
    for marker, op in (("fc1", "aten::addmm"), ("relu", "aten::relu"), ("fc2", "aten::addmm")):
        line = _line(marker)
        expected.append((op, frozenset({f"{__file__}:{line}"}), frozenset({(__file__, line)})))
    assert got == expected * 2
    # the user's file is in the session, for the UI's source view
    captured = {r["name"]: r["captured"] for r in open_profile(config.get_session_dir()).table("StackFrameFileName").to_pylist()}
    assert captured[__file__] is True


def test_nki_kernels_and_compiled_graphs_keep_their_own_lines(tmp_path):
    x = torch.rand(128, 32, device="neuron")
    out = torch.empty_like(x)
    compiled = torch.compile(_tanh3, backend="neuron")
    compiled(x)
    sin_kernel(x, out)  # compiled and warm
    config = NeuronConfig(profile_output_dir=tmp_path)
    with NeuronProfiler(config).profile():
        compiled(x)  # @compiled-call
        sin_kernel(x, out)  # @nki-call
        torch.neuron.synchronize()
    (graph, kernel) = _instructions(config.get_session_dir())
    body = _line("compiled-body")
    assert graph[2] == {f"{__file__}:{body}"} and graph[3] == {(__file__, body)}, graph
    kernel_file = sys.modules[sin_kernel.__module__].__file__
    assert kernel[1] == "sin_kernel" and len(kernel[2]) == 3, kernel  # load, sin, store
    assert {file for file, _ in kernel[3]} == {kernel_file}, kernel


def test_no_stack_walk_while_nothing_is_profiled(monkeypatch):
    def walked():
        raise AssertionError("the call site was taken with no profile running")

    x = torch.randn(8, 8, device="neuron")
    monkeypatch.setattr(launch, "user_call_site", walked)
    torch.testing.assert_close((torch.relu(x) + 1).cpu(), torch.relu(x.cpu()) + 1)


def test_neuron_explorer_inspect_names_the_scripts_lines(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import torch
        import torch_neuronx  # noqa: F401

        w = torch.randn(32, 32).to("neuron")
        x = torch.randn(8, 32).to("neuron")
        for _ in range(2):
            y = torch.tanh(x @ w)  # @matmul-tanh
        print(y.sum().cpu().item())  # @sum
        """))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "neuron_explorer.cli", "inspect", "-o", str(out), "--", sys.executable,
                           str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (session,) = find_sessions(out)
    got = {(name, locations) for _, name, locations, _ in _instructions(session)}
    matmul, total = (f"{script}:{_line(m, str(script))}" for m in ("matmul-tanh", "sum"))
    assert got == {("aten::mm", frozenset({matmul})), ("aten::tanh", frozenset({matmul})),
                   ("aten::sum", frozenset({total}))}, got
