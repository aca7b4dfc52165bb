"""neuron-explorer's README walkthrough ("Why is my model slow?") runs as written on the eager GPT
step: the top ops by device time agree between torch.profiler and the Parquet tables, the top
op's engines and waits are there, and the source lines name the walkthrough's own step lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch.autograd import DeviceType

README = Path(__file__).resolve().parents[3] / "neuron-explorer" / "README.md"
SECTION = "## Why is my model slow? A walkthrough\n"


def _walkthrough() -> str:
    section = README.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return block


def test_the_walkthrough_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = _walkthrough()
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    out = capsys.readouterr().out
    assert "Self NEURON" in out

    device_ns = {e.key: e.self_device_time_total * 1e3 for e in namespace["prof"].key_averages()
                 if e.device_type == DeviceType.CPU and e.self_device_time_total > 0}
    top = namespace["top"]
    assert len(top) == 5 and all(row[2] > 0 for row in top)
    for name, _, ns, *_ in top:  # Explorer's device time per op is torch.profiler's
        assert ns == pytest.approx(device_ns[name], rel=1e-3), (name, ns, device_ns.get(name))
    assert top[0][2] == pytest.approx(max(device_ns.values()), rel=1e-3)  # the top op is torch.profiler's top op

    # The source lines: the step's own lines carry device time (exec'd from the README, the code's
    # file is README.md and its lines count from the block's first line).
    step_lines = {n for n, text in enumerate(code.splitlines(), 1) if text.strip() in ("loss = model(x, y)", "opt.step()")}
    located = {int(loc.rpartition(":")[2]) for loc, _, _ in namespace["lines"] if loc and loc.startswith(f"{README}:")}
    assert located and located <= step_lines, (located, step_lines)
