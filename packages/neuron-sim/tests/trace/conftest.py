"""Fixtures for the trace tests: a private runtime publishing to a private sink."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import get_architecture
from neuron_sim.programs import tiled_matmul
from neuron_sim.runtime import Runtime, RuntimeConfig
from neuron_sim.trace import TraceSink

ARCH = get_architecture("trn2")


@pytest.fixture
def sink():
    return TraceSink()


@pytest.fixture
def runtime(sink):
    rt = Runtime(RuntimeConfig.from_env({}, arch=ARCH), trace=sink)
    yield rt
    for d in rt.devices:
        for q in d.queues:
            q.wait_idle()
            q.take_failure()


@pytest.fixture
def matmul():
    return tiled_matmul(256, 256, 512, dtype="float32", arch=ARCH)


@pytest.fixture
def matmul_buffers():
    def make(seed=0):
        rng = np.random.default_rng(seed)
        return {
            "lhsT": rng.standard_normal((256, 256)).astype(np.float32),
            "rhs": rng.standard_normal((256, 512)).astype(np.float32),
            "out": np.zeros((256, 512), np.float32),
        }

    return make
