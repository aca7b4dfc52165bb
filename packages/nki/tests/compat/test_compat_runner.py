"""nki.compat on a folder of our own small kernel files: every outcome class, from one worker."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

KERNEL = '''
import nki
import nki.language as nl
import numpy as np


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(x), nl.load(x)))
    return out


@nki.jit
def too_tall(x):
    t = nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)  # too-tall
    return t
'''

TESTS = '''
import nki
import nki.language as nl
import numpy as np
import pytest
from kernels import double, too_tall


@nki.jit
def test_kernel_named_like_a_test(x):  # a unittest-style file's kernel: not collected as a test
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out

X = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)


def test_ok():
    np.testing.assert_array_equal(double(X), 2 * X)


def test_wrong():
    np.testing.assert_array_equal(double(X), 3 * X)


def test_ok_by_a_comparison_expected_to_fail():
    assert not np.allclose(double(X), 3 * X)  # a test decides itself what a False means


def test_rejected():
    too_tall(X)


def test_crash():
    import nki.language as nl
    nl.no_such_function()


@pytest.mark.skip(reason="needs a device we do not model")
def test_skipped():
    pass
'''

SCRIPT_WRONG = '''
import numpy as np
from kernels import double

if __name__ == "__main__":
    x = np.ones((128, 4), np.float32)
    print("match:", np.allclose(double(x), 5 * x))
'''

SCRIPT_NO_CHECK = '''
import argparse

import numpy as np
from kernels import double

if __name__ == "__main__":
    rows = argparse.ArgumentParser().parse_args().__dict__.get("rows", 128)  # sees no arguments of ours
    print(double(np.ones((rows, 4), np.float32)).sum())
'''


def test_outcomes_of_tests_and_scripts(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "kernels.py").write_text(textwrap.dedent(KERNEL))
    (repo / "test_kernels.py").write_text(textwrap.dedent(TESTS))
    (repo / "run_wrong.py").write_text(textwrap.dedent(SCRIPT_WRONG))
    (repo / "run_plain.py").write_text(textwrap.dedent(SCRIPT_NO_CHECK))
    out = tmp_path / "outcomes.jsonl"
    markdown = tmp_path / "report.md"
    proc = subprocess.run([sys.executable, "-m", "nki.compat", str(repo), "--label", f"{repo}=example/repo@abc123",
                           "--json", str(out), "--markdown", str(markdown), "--timeout", "120"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    outcomes = {(o["file"], o["unit"]): o for o in map(json.loads, out.read_text().splitlines())}
    status = {k: o["status"] for k, o in outcomes.items()}
    assert status == {
        ("run_plain.py", "<script>"): "no-check",
        ("run_wrong.py", "<script>"): "wrong",
        ("test_kernels.py", "test_ok"): "ok",
        ("test_kernels.py", "test_wrong"): "wrong",
        ("test_kernels.py", "test_ok_by_a_comparison_expected_to_fail"): "ok",
        ("test_kernels.py", "test_rejected"): "rejected",
        ("test_kernels.py", "test_crash"): "crash",
        ("test_kernels.py", "test_skipped"): "skipped",
    }
    ok = outcomes[("test_kernels.py", "test_ok")]
    assert ok["kernels"] == ["double"] and ok["launches"] == 1 and ok["device_ns"] > 0
    line = next(i + 1 for i, text in enumerate(KERNEL.strip("\n").splitlines()) if "# too-tall" in text)
    assert outcomes[("test_kernels.py", "test_rejected")]["detail"].startswith("[partition.limit]")
    assert f"kernels.py:{line + 1}" in outcomes[("test_kernels.py", "test_rejected")]["detail"]
    assert "AttributeError" in outcomes[("test_kernels.py", "test_crash")]["detail"]
    assert "np.allclose" in outcomes[("run_wrong.py", "<script>")]["detail"] or "numpy.allclose" in \
        outcomes[("run_wrong.py", "<script>")]["detail"]
    report = markdown.read_text()
    assert "| example/repo@abc123 | 8 | 2 | 2 | 1 | 1 | 0 | 1 | 1 | 28.6 | 0 | 28.6 |" in report
    assert "| ok | `test_kernels.py` | `test_ok` | double |" in report  # the kernels each unit launched
    assert "ok        " in proc.stdout and "test_kernels.py::test_wrong" in proc.stdout
