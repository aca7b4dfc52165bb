"""What a capture records: device-profile mode, cores, event types, limits.

The environment variables are the Neuron SDK's (``NEURON_RT_INSPECT_*``, see docs/environment.md);
``CaptureConfig.from_env`` reads them, and every bad value raises ``CaptureConfigError`` naming the
variable and the value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..errors import CaptureConfigError

ENABLE_ENV = "NEURON_RT_INSPECT_ENABLE"
OUTPUT_DIR_ENV = "NEURON_RT_INSPECT_OUTPUT_DIR"
SYSTEM_PROFILE_ENV = "NEURON_RT_INSPECT_SYSTEM_PROFILE"
DEVICE_PROFILE_ENV = "NEURON_RT_INSPECT_DEVICE_PROFILE"
NUM_WARMUP_ENV = "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP"
MAX_EVENTS_ENV = "NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"
FILTER_NC_ENV = "NEURON_RT_INSPECT_EVENT_FILTER_NC"
FILTER_TYPE_ENV = "NEURON_RT_INSPECT_EVENT_FILTER_TYPE"
DEFAULT_OUTPUT_DIR = "./output"
DEFAULT_MAX_EVENTS_PER_NC = 1_000_000

DEVICE_PROFILE_MODES = ("0", "model", "session")
# Event types this runtime emits, and the SDK's "hardware" group (every other type is "software").
HARDWARE_EVENTS = frozenset({"nc_exec_running", "cc_running", "cc_exec_barrier", "numerical_err", "nrt_model_switch",
                             "timestamp_sync_point", "hw_notify"})
SOFTWARE_EVENTS = frozenset({"nrt_execute", "dmem_buf_copy", "host_task"})
EVENT_TYPES = HARDWARE_EVENTS | SOFTWARE_EVENTS


def parse_core_list(text: str, what: str) -> frozenset[int]:
    """``"0,1,2-5"`` -> {0, 1, 2, 3, 4, 5}."""
    cores: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise CaptureConfigError(f"{what}={text!r}: {part!r} is not a core index or a range like 2-5") from None
        if first < 0 or last < first:
            raise CaptureConfigError(f"{what}={text!r}: {part!r} is not a valid core range")
        cores.update(range(first, last + 1))
    if not cores:
        raise CaptureConfigError(f"{what}={text!r} names no NeuronCore")
    return frozenset(cores)


def parse_event_filter(text: str, what: str = FILTER_TYPE_ENV) -> frozenset[str]:
    """The event types kept: groups (``hardware``, ``software``), names, and ``^name`` exclusions."""
    include: set[str] = set()
    exclude: set[str] = set()
    groups = {"hardware": HARDWARE_EVENTS, "software": SOFTWARE_EVENTS}
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        target = exclude if part.startswith("^") else include
        name = part.lstrip("^")
        if name in groups:
            target.update(groups[name])
        elif name in EVENT_TYPES:
            target.add(name)
        else:
            raise CaptureConfigError(
                f"{what}={text!r}: unknown event type {name!r}; use hardware, software, ^exclusions or one of "
                f"{', '.join(sorted(EVENT_TYPES))}"
            )
    if not include:  # only exclusions: everything else is kept
        include = set(EVENT_TYPES)
    return frozenset(include - exclude)


def _device_profile(value: str, what: str) -> str:
    text = str(value).strip().lower()
    text = {"1": "model", "off": "0", "false": "0"}.get(text, text)
    if text not in DEVICE_PROFILE_MODES:
        raise CaptureConfigError(f"{what}={value!r}: choose 0, 1/model (first execution of each NEFF per core) or session")
    return text


def _int(value, what: str, minimum: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise CaptureConfigError(f"{what}={value!r} is not an integer") from None
    if number < minimum:
        raise CaptureConfigError(f"{what}={value!r} must be >= {minimum}")
    return number


def _flag(value, what: str) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise CaptureConfigError(f"{what}={value!r}: use 0 or 1")


@dataclass(frozen=True)
class CaptureConfig:
    device_profile: str = "session"  # 0 | model | session
    system_profile: bool = True
    cores: frozenset[int] | None = None  # None: every visible core
    event_types: frozenset[str] = field(default_factory=lambda: EVENT_TYPES)
    max_events_per_nc: int = DEFAULT_MAX_EVENTS_PER_NC
    num_warmup: int = 0  # device profile: executions skipped (per NEFF and core in model mode)
    capture_sources: bool = True  # copy the source files instructions point at into the session
    cpu_util: bool = False  # sample host CPU utilization (ProfileMode.CPU_UTIL)
    host_memory: bool = False  # sample host memory (ProfileMode.HOST_MEMORY)

    def __post_init__(self):
        object.__setattr__(self, "device_profile", _device_profile(self.device_profile, "device_profile"))
        if self.cores is not None:
            object.__setattr__(self, "cores", frozenset(self.cores))
        unknown = set(self.event_types) - EVENT_TYPES
        if unknown:
            raise CaptureConfigError(f"unknown event types {sorted(unknown)}; known: {sorted(EVENT_TYPES)}")
        _int(self.max_events_per_nc, "max_events_per_nc", 1)
        _int(self.num_warmup, "num_warmup", 0)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CaptureConfig:
        env = os.environ if env is None else env
        config = cls(device_profile=_device_profile(env.get(DEVICE_PROFILE_ENV, "0"), DEVICE_PROFILE_ENV))
        updates: dict = {}
        if SYSTEM_PROFILE_ENV in env:
            updates["system_profile"] = _flag(env[SYSTEM_PROFILE_ENV], SYSTEM_PROFILE_ENV)
        # A system profile includes the host's CPU and memory samples (the SDK's cpu_util.pb / host_mem.pb).
        updates["cpu_util"] = updates["host_memory"] = updates.get("system_profile", True)
        if env.get(FILTER_NC_ENV, "").strip():
            updates["cores"] = parse_core_list(env[FILTER_NC_ENV], FILTER_NC_ENV)
        if env.get(FILTER_TYPE_ENV, "").strip():
            updates["event_types"] = parse_event_filter(env[FILTER_TYPE_ENV])
        if env.get(MAX_EVENTS_ENV, "").strip():
            updates["max_events_per_nc"] = _int(env[MAX_EVENTS_ENV], MAX_EVENTS_ENV, 1)
        if env.get(NUM_WARMUP_ENV, "").strip():
            updates["num_warmup"] = _int(env[NUM_WARMUP_ENV], NUM_WARMUP_ENV, 0)
        return replace(config, **updates)

    def check_cores(self, visible: Iterable[int]) -> None:
        """Raise unless every core the capture names exists in this process."""
        if self.cores is None:
            return
        visible = sorted(visible)
        missing = sorted(self.cores - set(visible))
        if missing:
            raise CaptureConfigError(
                f"capture requested for NeuronCore(s) {missing}, which do not exist: this process sees cores {visible} "
                f"(NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES)"
            )

    def to_dict(self) -> dict:
        return {
            "device_profile": self.device_profile,
            "system_profile": self.system_profile,
            "cores": None if self.cores is None else sorted(self.cores),
            "event_types": sorted(self.event_types),
            "max_events_per_nc": self.max_events_per_nc,
            "num_warmup": self.num_warmup,
            "capture_sources": self.capture_sources,
            "cpu_util": self.cpu_util,
            "host_memory": self.host_memory,
        }
