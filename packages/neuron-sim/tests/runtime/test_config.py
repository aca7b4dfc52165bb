"""Environment parsing: valid values give the right devices; invalid ones name the variable."""

from __future__ import annotations

import pytest
from neuron_sim import ConfigurationError, OutOfMemoryError, get_architecture
from neuron_sim.runtime import Runtime, RuntimeConfig

TRN2 = get_architecture("trn2")
TRN3 = get_architecture("trn3")


def config(**env) -> RuntimeConfig:
    return RuntimeConfig.from_env(env, arch=TRN2)


def test_defaults_one_chip_lnc1():
    c = config()
    assert c.logical_nc_config == 1
    assert c.visible_cores == tuple(range(8))
    assert c.hbm_bytes_per_core == TRN2.hbm_bytes_per_core
    assert c.launch_blocking is False
    assert c.sim_mode == "fast"


def test_lnc2_halves_cores_and_pools_hbm():
    c = config(NEURON_LOGICAL_NC_CONFIG="2")
    assert c.visible_cores == (0, 1, 2, 3)
    assert c.hbm_bytes_per_core == 2 * TRN2.hbm_bytes_per_core
    rt = Runtime(c)
    assert rt.device_count == 4
    assert rt.device(3).hbm.capacity == 2 * TRN2.hbm_bytes_per_core


def test_hbm_bytes_sets_every_devices_hbm():
    c = config(NEURON_SIM_HBM_BYTES="67108864", NEURON_LOGICAL_NC_CONFIG="2")
    assert c.hbm_bytes_per_core == 64 << 20  # the size asked for, not LNC x the architecture's
    rt = Runtime(c)
    assert [rt.device(i).hbm.capacity for i in range(rt.device_count)] == [64 << 20] * 4
    block = rt.device(0).allocate(48 << 20, "block")
    with pytest.raises(OutOfMemoryError, match="HBM of neuron:0"):
        rt.device(0).allocate(32 << 20, "more")
    rt.device(0).free(block)


@pytest.mark.parametrize("value", ["0", "-1", "64M", "1e6"])
def test_invalid_hbm_bytes(value):
    with pytest.raises(ConfigurationError, match=rf"NEURON_SIM_HBM_BYTES={value!r} must be an integer >= 1"):
        config(NEURON_SIM_HBM_BYTES=value)


@pytest.mark.parametrize(
    ("value", "cores"),
    [("0", (0,)), ("5", (5,)), ("0-3", (0, 1, 2, 3)), ("0,2,5", (0, 2, 5)), (" 6, 1-2 ", (1, 2, 6)), ("7-7", (7,))],
)
def test_visible_cores_forms(value, cores):
    assert config(NEURON_RT_VISIBLE_CORES=value).visible_cores == cores


def test_visible_cores_become_devices_with_their_core_ids():
    rt = Runtime(config(NEURON_RT_VISIBLE_CORES="2,5"))
    assert [d.index for d in rt.devices] == [0, 1]
    assert [d.core_id for d in rt.devices] == [2, 5]
    assert rt.device(1).name == "neuron:1"


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"NEURON_RT_VISIBLE_CORES": "8"}, "0-7"),
        ({"NEURON_RT_VISIBLE_CORES": "0-9"}, "core 9 does not exist"),
        ({"NEURON_RT_VISIBLE_CORES": "a"}, "malformed"),
        ({"NEURON_RT_VISIBLE_CORES": "1;2"}, "malformed"),
        ({"NEURON_RT_VISIBLE_CORES": "-1"}, "malformed"),
        ({"NEURON_RT_VISIBLE_CORES": "0,,1"}, "malformed"),
        ({"NEURON_RT_VISIBLE_CORES": "3-1"}, "reversed"),
        ({"NEURON_RT_VISIBLE_CORES": "1,0-2"}, "more than once"),
        ({"NEURON_RT_VISIBLE_CORES": "4", "NEURON_LOGICAL_NC_CONFIG": "2"}, "0-3"),
    ],
)
def test_invalid_visible_cores_name_the_variable_and_value(env, fragment):
    with pytest.raises(ConfigurationError) as info:
        config(**env)
    msg = str(info.value)
    assert "NEURON_RT_VISIBLE_CORES" in msg
    assert repr(env["NEURON_RT_VISIBLE_CORES"]) in msg
    assert fragment in msg


@pytest.mark.parametrize("value", ["0", "3", "4", "true", "two", "-2"])
def test_invalid_lnc(value):
    with pytest.raises(ConfigurationError, match="NEURON_LOGICAL_NC_CONFIG") as info:
        config(NEURON_LOGICAL_NC_CONFIG=value)
    assert repr(value) in str(info.value)


def test_num_cores_takes_the_first_n_visible():
    assert config(NEURON_RT_NUM_CORES="3").visible_cores == (0, 1, 2)
    assert config(NEURON_RT_NUM_CORES="2", NEURON_RT_VISIBLE_CORES="1,4,6").visible_cores == (1, 4)
    assert config(NEURON_RT_NUM_CORES="0").visible_cores == tuple(range(8))  # 0 means all, as in the real runtime


@pytest.mark.parametrize(("value", "fragment"), [("9", "only 8 are visible"), ("x", "integer"), ("-1", "integer")])
def test_invalid_num_cores(value, fragment):
    with pytest.raises(ConfigurationError, match="NEURON_RT_NUM_CORES") as info:
        config(NEURON_RT_NUM_CORES=value)
    assert fragment in str(info.value)


def test_num_cores_beyond_visible_names_both():
    with pytest.raises(ConfigurationError) as info:
        config(NEURON_RT_NUM_CORES="3", NEURON_RT_VISIBLE_CORES="0-1")
    assert "NEURON_RT_NUM_CORES" in str(info.value) and "NEURON_RT_VISIBLE_CORES='0-1'" in str(info.value)


def test_launch_blocking():
    assert config(NEURON_LAUNCH_BLOCKING="1").launch_blocking is True
    assert config(NEURON_LAUNCH_BLOCKING="0").launch_blocking is False
    assert Runtime(config(NEURON_LAUNCH_BLOCKING="1")).blocking is True
    assert Runtime(config(NEURON_LAUNCH_BLOCKING="1"), blocking=False).blocking is False
    with pytest.raises(ConfigurationError, match="NEURON_LAUNCH_BLOCKING='yes'"):
        config(NEURON_LAUNCH_BLOCKING="yes")


def test_sim_mode():
    assert config(NEURON_SIM_MODE="fast").sim_mode == "fast"
    assert config(NEURON_SIM_MODE="EXACT").sim_mode == "exact"
    with pytest.raises(ConfigurationError, match="NEURON_SIM_MODE='turbo'"):
        config(NEURON_SIM_MODE="turbo")


def test_multi_chip_instance_widens_the_index_range():
    c = config(NEURON_SIM_NUM_CHIPS="2", NEURON_LOGICAL_NC_CONFIG="2", NEURON_RT_VISIBLE_CORES="6-7")
    assert c.visible_cores == (6, 7)
    with pytest.raises(ConfigurationError, match="NEURON_SIM_NUM_CHIPS"):
        config(NEURON_SIM_NUM_CHIPS="0")


def test_empty_values_mean_unset():
    assert config(NEURON_RT_VISIBLE_CORES="", NEURON_LOGICAL_NC_CONFIG=" ").visible_cores == tuple(range(8))


def test_reads_os_environ_and_platform_target(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "1-2")
    c = RuntimeConfig.from_env()
    assert c.arch is TRN3
    assert c.visible_cores == (1, 2)
    assert c.hbm_bytes_per_core == TRN3.hbm_bytes_per_core
