"""Capture with no code change: ``NEURON_RT_INSPECT_ENABLE=1`` starts a recorder in the process.

``neuron_explorer_inspect.pth`` (installed beside the package) calls ``start_from_env`` at
interpreter start-up when the variable is set; ``neuron-explorer inspect`` sets it for the command
it runs. A bad setting is reported on stderr and capture stays off: profiling must never stop the
program being profiled.
"""

from __future__ import annotations

import atexit
import os
import sys

from ..errors import ExplorerError
from .config import DEFAULT_OUTPUT_DIR, ENABLE_ENV, OUTPUT_DIR_ENV, CaptureConfig
from .recorder import Recorder

_recorder: Recorder | None = None


def start_from_env() -> Recorder | None:
    """Start the process-wide capture the environment asks for (once); returns it, or None."""
    global _recorder
    if _recorder is not None or os.environ.get(ENABLE_ENV, "0").strip() != "1":
        return _recorder
    try:
        recorder = Recorder(os.environ.get(OUTPUT_DIR_ENV) or DEFAULT_OUTPUT_DIR, CaptureConfig.from_env())
        recorder.start(lazy=True)
    except ExplorerError as err:
        print(f"neuron-explorer: capture disabled: {err}", file=sys.stderr)
        return None
    _recorder = recorder
    atexit.register(_stop)
    return recorder


def _stop() -> None:
    if _recorder is not None and _recorder.capturing:
        try:
            _recorder.stop()
        except Exception as err:  # at exit: report, never raise into the interpreter's shutdown
            print(f"neuron-explorer: finishing the capture in {_recorder.session_dir} failed: {err}", file=sys.stderr)
