"""vLLM finds the plugin through its entry points and picks the Neuron platform by itself;
VLLM_PLUGINS and VLLM_TARGET_DEVICE behave as vLLM documents."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
import vllm_neuron

PROBE = (
    "from vllm.platforms import current_platform as p\n"
    "print('PLATFORM', type(p).__name__, p.device_type, p.dispatch_key, p.is_out_of_tree(), p.is_cpu())\n"
)


def current_platform(**env: str) -> list[str]:
    """The platform vLLM resolves in a fresh process with ``env`` added."""
    full = {k: v for k, v in os.environ.items() if k not in ("VLLM_PLUGINS", "VLLM_TARGET_DEVICE")} | env
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("PLATFORM"))
    return line.split()[1:]


def test_entry_points_are_installed():
    platform = {e.name: e.value for e in entry_points(group="vllm.platform_plugins")}
    general = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    assert platform.get("neuron") == "vllm_neuron:register"
    assert general.get("neuron_ops") == "vllm_neuron:register_ops"


def test_register_names_the_platform_when_a_device_exists():
    assert vllm_neuron.neuron_device_count() > 0
    assert vllm_neuron.register() == "vllm_neuron.platform.NeuronPlatform"


def test_register_ops_is_idempotent():
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    vllm_neuron.register_ops()
    vllm_neuron.register_ops()
    assert AttentionBackendEnum["NEURON_ATTN"].get_path() == vllm_neuron.ATTENTION_BACKEND


def test_vllm_picks_neuron_by_itself():
    assert current_platform() == ["NeuronPlatform", "neuron", "PrivateUse1", "True", "False"]


def test_vllm_plugins_allowlist_selects_or_excludes_the_plugin():
    assert current_platform(VLLM_PLUGINS="neuron")[0] == "NeuronPlatform"
    # An allowlist without "neuron" leaves vLLM on its builtin (CPU) platform.
    assert current_platform(VLLM_PLUGINS="some_other_plugin")[0] == "CpuPlatform"


def test_vllm_target_device_cpu_skips_out_of_tree_plugins():
    assert current_platform(VLLM_TARGET_DEVICE="cpu")[0] == "CpuPlatform"


def test_platform_reports_the_neuron_device():
    import torch
    from vllm_neuron.platform import NeuronPlatform

    assert NeuronPlatform.get_device_total_memory(0) == torch.neuron.mem_get_info(0)[1]
    assert NeuronPlatform.get_device_name(0) == torch.neuron.get_device_name(0)
    with pytest.raises(ValueError, match=r"\[vllm_neuron.dtype\].*float64"):
        NeuronPlatform.check_if_supports_dtype(torch.float64)
