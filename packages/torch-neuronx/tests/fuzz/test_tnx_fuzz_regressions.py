"""Every mismatch the fuzz has found, replayed (``regressions.json``) in each mode it was seen in.

An entry is ``{"id", "about", "program", "modes"}`` plus, while its bug is open,
``"xfail": {mode: "<issue item> - <owning stream>"}``: such a case is xfail(strict=True), so it
fails the moment the fix lands and the mark must go. ``"crash": [modes]`` kill or exhaust the
process in those modes (a segfault, unbounded memory, a lowering that does not end): they run
in a subprocess under a memory and a time limit, with a small simulated HBM.
The entries need no excuse list: any difference from CPU fails them.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from tnx_fuzz_programs import from_json, to_json
from tnx_fuzz_runner import MODES, compare
from tnx_helpers import run_python

HERE = os.path.dirname(__file__)
ENTRIES = json.load(open(os.path.join(HERE, "regressions.json")))
CRASH_MEMORY_LIMIT = 6 << 30  # a crash case that allocates without bound fails here instead of taking the machine
CRASH_TIME_LIMIT_S = 60  # one small program in a fresh interpreter takes ~20 s on a loaded 2-core machine
CRASH_HBM_BYTES = 256 << 20  # a program growing a tensor without bound runs out of device memory in seconds


def _cases():
    for entry in ENTRIES:
        for mode in entry["modes"]:
            reason = entry.get("xfail", {}).get(mode)
            marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
            yield pytest.param(entry, mode, id=f"{entry['id']}-{mode}", marks=marks)


def test_entries_are_well_formed():
    ids = [entry["id"] for entry in ENTRIES]
    assert len(ids) == len(set(ids)), "regression ids must be unique"
    for entry in ENTRIES:
        assert set(entry) <= {"id", "about", "program", "modes", "xfail", "crash"}, entry["id"]
        assert entry["about"] and set(entry["modes"]) <= set(MODES), entry["id"]
        assert set(entry.get("xfail", {})) <= set(entry["modes"]) >= set(entry.get("crash", [])), entry["id"]
        from_json(to_json(entry["program"]))  # every op still exists


@pytest.mark.parametrize(("entry", "mode"), list(_cases()))
def test_regression(entry, mode):
    program = from_json(to_json(entry["program"]))
    if mode in entry.get("crash", []):
        code = f"""
            import json, resource, sys
            resource.setrlimit(resource.RLIMIT_AS, ({CRASH_MEMORY_LIMIT}, {CRASH_MEMORY_LIMIT}))
            sys.path[:0] = [{HERE!r}, {os.path.dirname(HERE)!r}]
            from tnx_fuzz_runner import compare
            mismatch, _ = compare(json.loads({to_json(program)!r}), {mode!r})
            assert mismatch is None, mismatch.report(json.loads({to_json(program)!r}), {mode!r})
        """
        try:
            run_python(code, env={"NEURON_SIM_HBM_BYTES": str(CRASH_HBM_BYTES)}, timeout=CRASH_TIME_LIMIT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{entry['id']} ({mode}) did not finish in {CRASH_TIME_LIMIT_S} s") from None
        return
    mismatch, _ = compare(program, mode)
    assert mismatch is None, mismatch.report(program, mode)
