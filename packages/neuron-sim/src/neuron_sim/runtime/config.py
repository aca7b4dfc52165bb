"""Runtime configuration from the environment, with the real Neuron runtime's variable names.

* ``NEURON_LOGICAL_NC_CONFIG`` (1 or 2): physical NeuronCores per logical core (LNC). Real Trn2
  defaults to 2 (4 logical cores per chip); the simulator defaults to 1 (8 per chip) because a
  logical core here is simulated as one core with the combined HBM, and more, smaller devices
  are what tests of multi-device code want. A logical core gets ``LNC x`` one physical core's HBM.
* ``NEURON_RT_VISIBLE_CORES``: which logical cores this process uses, as ``"3"``, ``"0-3"`` or
  ``"0,2,5"`` (items may mix: ``"0-1,4"``). Indices count logical cores across the simulated
  instance. Default: all of them.
* ``NEURON_RT_NUM_CORES``: use the first N of the visible cores (0 means all, as in the real runtime).
* ``NEURON_LAUNCH_BLOCKING`` (0/1): run every launch synchronously in the caller's thread, so
  errors surface at the launch that caused them.
* ``NEURON_SIM_MODE`` (fast|exact, default fast): which executor runs programs (see ``neuron_sim.executor``).
  ``fast`` evaluates a NEFF's graph-level form over whole tensors; a program without one (an NKI
  kernel) always runs ``exact``. Timing comes from the ISA program in both modes.
* ``NEURON_SIM_NUM_CHIPS`` (simulator only, default 1): chips in the simulated instance, to
  give ``NEURON_RT_VISIBLE_CORES`` the index range of a multi-chip instance (a trn2.48xlarge has 16).
* ``NEURON_SIM_HBM_BYTES`` (simulator only): each logical core's HBM size in bytes instead of the
  architecture's (tests of out-of-memory paths: a small HBM fills without taking host memory).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..arch import PLATFORM_ENV, Architecture, get_architecture
from ..errors import ConfigurationError
from ..executor.registry import known_modes

LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
VISIBLE_CORES_ENV = "NEURON_RT_VISIBLE_CORES"
NUM_CORES_ENV = "NEURON_RT_NUM_CORES"
LAUNCH_BLOCKING_ENV = "NEURON_LAUNCH_BLOCKING"
SIM_MODE_ENV = "NEURON_SIM_MODE"
NUM_CHIPS_ENV = "NEURON_SIM_NUM_CHIPS"
HBM_BYTES_ENV = "NEURON_SIM_HBM_BYTES"

DEFAULT_LNC = 1
DEFAULT_SIM_MODE = "fast"
SUPPORTED_LNC = (1, 2)

_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class RuntimeConfig:
    arch: Architecture
    logical_nc_config: int = DEFAULT_LNC
    visible_cores: tuple[int, ...] = ()  # logical core ids, ascending; one device each
    launch_blocking: bool = False
    sim_mode: str = DEFAULT_SIM_MODE
    num_chips: int = 1
    hbm_capacity: int | None = None  # overrides the per-core HBM size (NEURON_SIM_HBM_BYTES)
    lnc_configured: bool = False  # NEURON_LOGICAL_NC_CONFIG was set (not the simulator's default)

    @property
    def logical_cores_per_chip(self) -> int:
        return self.arch.physical_cores_per_chip // self.logical_nc_config

    @property
    def total_logical_cores(self) -> int:
        return self.logical_cores_per_chip * self.num_chips

    @property
    def hbm_bytes_per_core(self) -> int:
        """HBM of one logical core: the physical cores it spans pool theirs."""
        if self.hbm_capacity is not None:
            return self.hbm_capacity
        return self.arch.hbm_bytes_per_core * self.logical_nc_config

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, arch: Architecture | None = None) -> RuntimeConfig:
        env = os.environ if environ is None else environ
        if arch is None:
            # An explicit mapping is the whole environment: do not consult os.environ behind its back.
            arch = get_architecture() if environ is None else get_architecture(env.get(PLATFORM_ENV) or "trn2")
        lnc = _parse_lnc(env, arch)
        num_chips = _parse_int(env, NUM_CHIPS_ENV, default=1, minimum=1)
        total = arch.physical_cores_per_chip // lnc * num_chips
        visible = _parse_visible(env, total, lnc)
        num = _parse_int(env, NUM_CORES_ENV, default=0, minimum=0)
        if num > len(visible):
            raise ConfigurationError(
                f"{NUM_CORES_ENV}={env[NUM_CORES_ENV]!r} asks for {num} NeuronCores but only {len(visible)} are "
                f"visible ({_describe_visible(env, total, lnc)})"
            )
        if num:
            visible = visible[:num]
        return cls(
            arch=arch,
            logical_nc_config=lnc,
            visible_cores=visible,
            launch_blocking=_parse_bool(env, LAUNCH_BLOCKING_ENV),
            sim_mode=_parse_mode(env),
            num_chips=num_chips,
            hbm_capacity=_parse_int(env, HBM_BYTES_ENV, default=None, minimum=1),
            lnc_configured=_get(env, LNC_ENV) is not None,
        )


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return None if value is None or not value.strip() else value.strip()


def _parse_lnc(env, arch: Architecture) -> int:
    raw = _get(env, LNC_ENV)
    if raw is None:
        return DEFAULT_LNC
    if raw not in {str(v) for v in SUPPORTED_LNC}:
        raise ConfigurationError(
            f"{LNC_ENV}={env[LNC_ENV]!r} is not supported: use 1 (one physical NeuronCore per logical core) or 2 "
            f"(two; the default on real Trn2 hardware). The simulator's default is {DEFAULT_LNC}."
        )
    lnc = int(raw)
    if arch.physical_cores_per_chip % lnc:
        raise ConfigurationError(
            f"{LNC_ENV}={lnc} does not divide the {arch.physical_cores_per_chip} physical cores of a {arch.name} chip"
        )
    return lnc


def _parse_int(env, name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(env, name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) < minimum:
        raise ConfigurationError(f"{name}={env[name]!r} must be an integer >= {minimum}")
    return int(raw)


def _parse_visible(env, total: int, lnc: int) -> tuple[int, ...]:
    raw = _get(env, VISIBLE_CORES_ENV)
    if raw is None:
        return tuple(range(total))
    valid = f"valid logical core indices are 0-{total - 1} ({_count_phrase(total, lnc)})"
    cores: list[int] = []
    for item in raw.split(","):
        m = _ITEM.match(item.strip())
        if not m:
            raise ConfigurationError(
                f"{VISIBLE_CORES_ENV}={env[VISIBLE_CORES_ENV]!r} is malformed at {item.strip()!r}: use an index "
                f"(\"3\"), a range (\"0-3\") or a comma-separated list of them (\"0,2,5\"); {valid}"
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ConfigurationError(
                f"{VISIBLE_CORES_ENV}={env[VISIBLE_CORES_ENV]!r}: range {item.strip()!r} is reversed (write {hi}-{lo})"
            )
        if hi >= total:
            raise ConfigurationError(f"{VISIBLE_CORES_ENV}={env[VISIBLE_CORES_ENV]!r}: core {hi} does not exist; {valid}")
        cores.extend(range(lo, hi + 1))
    repeated = sorted({c for c in cores if cores.count(c) > 1})
    if repeated:
        raise ConfigurationError(f"{VISIBLE_CORES_ENV}={env[VISIBLE_CORES_ENV]!r} names core(s) {repeated} more than once")
    return tuple(sorted(cores))


def _count_phrase(total: int, lnc: int) -> str:
    return f"{total} logical cores with {LNC_ENV}={lnc}"


def _describe_visible(env, total: int, lnc: int) -> str:
    if _get(env, VISIBLE_CORES_ENV) is None:
        return _count_phrase(total, lnc)
    return f"{VISIBLE_CORES_ENV}={env[VISIBLE_CORES_ENV]!r}"


def _parse_bool(env, name: str) -> bool:
    raw = _get(env, name)
    if raw is None:
        return False
    value = raw.lower()
    if value in ("0", "false"):
        return False
    if value in ("1", "true"):
        return True
    raise ConfigurationError(f"{name}={env[name]!r} must be 0 or 1")


def _parse_mode(env) -> str:
    raw = _get(env, SIM_MODE_ENV)
    if raw is None:
        return DEFAULT_SIM_MODE
    mode = raw.lower()
    if mode not in known_modes():
        raise ConfigurationError(f"{SIM_MODE_ENV}={env[SIM_MODE_ENV]!r} is not an executor mode; choose one of {known_modes()}")
    return mode
