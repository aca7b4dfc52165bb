"""The README's Python examples run as written (in a scratch directory)."""

import re
from pathlib import Path

from neuron_sim.runtime import reset_runtime

README = Path(__file__).resolve().parents[1] / "README.md"
WALKTHROUGH = "## Why is my model slow? A walkthrough\n"


def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    reset_runtime()  # the example gets a runtime of its own
    # The torch walkthrough runs in torch-neuronx's tests (tests/profiling/test_tnx_explorer_walkthrough.py).
    text = README.read_text().split(WALKTHROUGH, 1)
    blocks = re.findall(r"```python\n(.*?)```", text[0] + text[1].split("\n## ", 1)[1], re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    reset_runtime()
    out = capsys.readouterr().out
    assert "MFU" in out and "aten::mm 3" in out and "tensor" in out
