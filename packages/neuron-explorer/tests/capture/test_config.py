"""Capture options and the NEURON_RT_INSPECT_* environment."""

import pytest
from neuron_explorer import CaptureConfig, CaptureConfigError
from neuron_explorer.capture import parse_core_list, parse_event_filter
from neuron_explorer.capture.config import HARDWARE_EVENTS, SOFTWARE_EVENTS


def test_core_lists_take_indices_and_ranges():
    assert parse_core_list("0,1,2-5", "x") == {0, 1, 2, 3, 4, 5}
    assert parse_core_list(" 7 ", "x") == {7}


@pytest.mark.parametrize("text", ["", "a", "3-1", "-2", "1,,x"])
def test_bad_core_lists_name_the_value(text):
    with pytest.raises(CaptureConfigError, match="NC"):
        parse_core_list(text, "NC")


def test_event_filters_take_groups_names_and_exclusions():
    assert parse_event_filter("hardware") == HARDWARE_EVENTS
    assert parse_event_filter("software,^host_task") == SOFTWARE_EVENTS - {"host_task"}
    assert parse_event_filter("^nrt_execute") == (HARDWARE_EVENTS | SOFTWARE_EVENTS) - {"nrt_execute"}
    with pytest.raises(CaptureConfigError, match="unknown event type 'bogus'"):
        parse_event_filter("hardware,bogus")


def test_environment_capture_options():
    env = {"NEURON_RT_INSPECT_DEVICE_PROFILE": "1", "NEURON_RT_INSPECT_EVENT_FILTER_NC": "0-1",
           "NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC": "10", "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP": "2",
           "NEURON_RT_INSPECT_EVENT_FILTER_TYPE": "hardware", "NEURON_RT_INSPECT_SYSTEM_PROFILE": "0"}
    c = CaptureConfig.from_env(env)
    assert (c.device_profile, c.cores, c.max_events_per_nc, c.num_warmup, c.system_profile) == ("model", {0, 1}, 10, 2, False)
    assert c.event_types == HARDWARE_EVENTS
    assert CaptureConfig.from_env({}).device_profile == "0"  # the SDK's default: system profile only


@pytest.mark.parametrize("name, value", [("NEURON_RT_INSPECT_DEVICE_PROFILE", "full"),
                                         ("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC", "many"),
                                         ("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC", "0"),
                                         ("NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP", "-1"),
                                         ("NEURON_RT_INSPECT_SYSTEM_PROFILE", "maybe")])
def test_bad_environment_values_name_the_variable(name, value):
    with pytest.raises(CaptureConfigError, match=name.removeprefix("NEURON_RT_INSPECT_") if "PROFILE" not in name else name):
        CaptureConfig.from_env({name: value})


def test_capture_for_a_core_that_does_not_exist_is_refused():
    with pytest.raises(CaptureConfigError, match=r"NeuronCore\(s\) \[7\], which do not exist: this process sees cores \[0, 1\]"):
        CaptureConfig(cores={0, 7}).check_cores([0, 1])
