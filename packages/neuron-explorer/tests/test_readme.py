"""The README's Python examples run as written (in a scratch directory)."""

import re
from pathlib import Path

from neuron_sim.runtime import reset_runtime

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    reset_runtime()  # the example gets a runtime of its own
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    reset_runtime()
    out = capsys.readouterr().out
    assert "MFU" in out and "aten::mm 3" in out and "tensor" in out
