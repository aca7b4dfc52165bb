"""Writing a profile in the other formats ``--output-format`` offers. File names follow Neuron
Explorer: ``system_profile.<ext>`` and one ``device_profile_model_<neff>.<ext>`` per NEFF."""

from __future__ import annotations

import re
from pathlib import Path

from ..profile import Profile
from .chrome import ChromeTraceWriter
from .events import device_events, system_events
from .perfetto import PerfettoTraceWriter
from .summary_text import summary_text

FORMATS = ("parquet", "json", "perfetto", "summary-text")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def export(profile: Profile, fmt: str, output_dir: str | Path) -> list[Path]:
    """Write ``profile`` as ``fmt`` (json, perfetto or summary-text) into ``output_dir``; returns the files."""
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "summary-text":
        path = out / "summary.txt"
        path.write_text(summary_text(profile))
        return [path]
    if fmt not in ("json", "perfetto"):
        raise ValueError(f"output format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    ext = "json" if fmt == "json" else "pftrace"

    def writer(path: Path):
        return ChromeTraceWriter(path, {"profile": profile.name}) if fmt == "json" else PerfettoTraceWriter(path)

    system = writer(out / f"system_profile.{ext}")
    for event in system_events(profile):
        system.add(event)
    system.close()
    files = [system.path]
    devices: dict[str, object] = {}
    try:
        for neff, event in device_events(profile):
            w = devices.get(neff)
            if w is None:
                stem = _UNSAFE.sub("_", neff.removesuffix(".neff"))
                w = devices[neff] = writer(out / f"device_profile_model_{stem}.{ext}")
            w.add(event)
    finally:
        for w in devices.values():
            w.close()
    return files + [w.path for w in devices.values()]
