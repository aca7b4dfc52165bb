"""NeuronProfiler: puts the framework trace beside the device and runtime traces of the same window.

    exporter = NeuronProfiler(config)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=config, on_trace_ready=exporter.export_trace) as prof:
        ...
    config.get_session_dir()    # <profile_output_dir>/<host>_pid_<pid>/<timestamp>/, with trace.json
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
from neuron_explorer.session import layout

from .config import NeuronConfig


class NeuronProfiler:
    def __init__(self, config: NeuronConfig | None = None):
        if config is not None and not isinstance(config, NeuronConfig):
            raise TypeError(f"NeuronProfiler takes a NeuronConfig, got {type(config).__name__}")
        self.config = config if config is not None else NeuronConfig()

    def profile(self, **kwargs) -> torch.profiler.profile:
        """A torch.profiler.profile over CPU and the neuron device with this config, exporting here."""
        kwargs.setdefault("activities", [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1])
        kwargs.setdefault("experimental_config", self.config)
        kwargs.setdefault("on_trace_ready", self.export_trace)
        return torch.profiler.profile(**kwargs)

    def get_session_dir(self) -> Path | None:
        return self.config.get_session_dir()

    def export_trace(self, prof, path: str | os.PathLike | None = None) -> Path:
        """Write ``prof``'s trace (Chrome JSON) as ``trace.json`` in the session directory of the window
        it profiled (or to ``path``); with ``neff_cache_dir``, copy the NEFFs written there during the
        window into the session's ``neff_cache/``. Returns the trace's path."""
        session = self.config.get_session_dir()
        if path is None:
            if session is None:
                raise RuntimeError("no profiled window has finished with this NeuronConfig: pass it as the profile's "
                                   "experimental_config and list ProfilerActivity.PrivateUse1 in its activities")
            path = session / layout.FRAMEWORK_TRACE_FILE
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        if session is not None and self.config.neff_cache_dir is not None:
            self._copy_cached_neffs(session)
        return path

    def _copy_cached_neffs(self, session: Path) -> None:
        started = self.config.session_started[session] - 1.0  # file times are coarser than time.time()
        target = session / "neff_cache"
        for neff in Path(self.config.neff_cache_dir).rglob("*.neff"):
            try:
                if neff.is_file() and not neff.is_symlink() and neff.stat().st_mtime >= started:
                    target.mkdir(exist_ok=True)
                    shutil.copy2(neff, target / neff.name)
            except OSError:
                continue
