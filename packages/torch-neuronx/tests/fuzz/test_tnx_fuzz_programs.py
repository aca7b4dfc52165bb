"""Random programs run on the neuron device - op by op, with adaptive eager, and compiled - give
CPU's results (``tnx_fuzz_runner`` says exactly how they are compared) or raise CPU's errors.

The failure report is the program itself: a JSON entry for ``regressions.json`` and a script
that runs it. A mismatch that ``tnx_fuzz_known`` describes (a bug another stream is fixing) is
excused and counted (``--hypothesis-show-statistics`` lists them); a program known to crash the
process is not run. Profiles and the number of programs: ``tnx_fuzz_profiles``; what became of
each program, per mode and row: ``tnx_fuzz_tally``.
"""

from __future__ import annotations

import os
import sys

from hypothesis import event, given
from tnx_fuzz_known import KNOWN_ISSUES, LIMITATIONS, known_crash
from tnx_fuzz_profiles import TRACE_ENV, for_mode
from tnx_fuzz_programs import programs, to_json
from tnx_fuzz_runner import compare
from tnx_fuzz_tally import TALLY, outcome_of

_LIMITATIONS = {reason for reason, _ in LIMITATIONS}


def check(program: dict, mode: str) -> None:
    if os.environ.get(TRACE_ENV, "0") not in ("", "0"):  # a program that kills the process is the last one printed
        print(f"[{mode}] {to_json(program)}", file=sys.stderr, flush=True)
    crash = known_crash(program, mode)
    if crash:
        event(f"not run (crashes the process): {crash}")
        TALLY.record(mode, *outcome_of((), _LIMITATIONS, crash, False))
        return
    try:
        mismatch, excused = compare(program, mode, KNOWN_ISSUES + LIMITATIONS)
    except BaseException as err:  # the harness failed on this program: it ends the run like a finding
        TALLY.record(mode, "finding", program=program, report=f"the harness raised {type(err).__name__}: {err}")
        raise
    for reason in sorted(set(excused)):
        event(f"excused: {reason}")
    event(f"steps: {len(program['steps'])}")
    report = mismatch.report(program, mode) if mismatch is not None else None
    TALLY.record(mode, *outcome_of(excused, _LIMITATIONS, None, mismatch is not None), program=program, report=report)
    assert mismatch is None, report


@for_mode("eager")
@given(program=programs())
def test_eager_programs_match_cpu(program):
    check(program, "eager")


@for_mode("adaptive")
@given(program=programs())
def test_adaptive_eager_programs_match_cpu(program):
    check(program, "adaptive")


@for_mode("compile")
@given(program=programs())
def test_compiled_programs_match_cpu(program):
    check(program, "compile")
