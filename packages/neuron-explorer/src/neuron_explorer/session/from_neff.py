"""A session from a NEFF alone (``neuron-explorer view -n x.neff``): the program's schedule is data
independent, so one simulated execution is its device profile - no run needed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from neuron_sim import NeffFormatError, ValidationError
from neuron_sim.neff import Neff
from neuron_sim.timing import estimate
from neuron_sim.trace import LaunchRecord

from ..capture.config import CaptureConfig
from ..capture.recorder import task_events, task_line
from ..errors import ExplorerError, ProfileFormatError
from .writer import SessionWriter, new_session_dir


def session_from_neff(neff_path: str | os.PathLike, output_dir: str | os.PathLike) -> Path:
    path = Path(neff_path)
    try:
        neff = Neff.load(path)
    except FileNotFoundError:
        raise ExplorerError(f"NEFF {path} does not exist") from None
    except IsADirectoryError:
        raise ExplorerError(f"{path} is a directory, not a NEFF (use -d for profile directories)") from None
    except NeffFormatError as err:
        raise ProfileFormatError(str(err)) from None
    try:
        timing = estimate(neff.program)
    except ValidationError as err:
        raise ProfileFormatError(f"NEFF {path} cannot be scheduled: {err}") from None
    config = CaptureConfig(device_profile="session")
    session = new_session_dir(output_dir)
    writer = SessionWriter(session, config.to_dict(), display_name=path.name)
    now = time.perf_counter_ns()
    record = LaunchRecord(launch_id=1, device=0, queue="default", name=neff.program.name, kind="neff", start_ns=0.0,
                          end_ns=timing.total_ns, host_start_ns=now, host_end_ns=now, context=f"simulated from {path.name}",
                          timings=(timing,), programs=(neff.program,), metadata=neff.metadata, executor="", core_id=0)
    writer.write_tasks([task_line(record, 0, threading.get_native_id(), list(task_events("neff")), True, writer)])
    writer.close({"simulated_from": str(path)})
    return session
