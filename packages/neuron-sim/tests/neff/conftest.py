"""Shared fixtures for the NEFF tests: a real compiled program and helpers to forge files."""

from __future__ import annotations

import hashlib
import json

import pytest
from neuron_sim.neff import Neff
from neuron_sim.neff.container import CHECKSUM_SIZE, pack
from neuron_sim.programs import tiled_matmul

GRAPH = {"nodes": [{"op": "matmul", "inputs": ["lhsT", "rhs"], "outputs": ["out"], "transpose_lhs": True}]}
TIMING = {"total_ns": 1834.25, "per_engine_ns": {"tensor": 1200.0, "vector": 310.5, "dma": 1700}, "bottleneck": "dma"}
METADATA = {"compiler_options": ["--auto-cast=none", "-O2"], "source_hash": "ab" * 32}


@pytest.fixture
def program():
    p = tiled_matmul(256, 256, 512)
    p.graph = json.loads(json.dumps(GRAPH))
    return p


@pytest.fixture
def neff(program):
    return Neff(program=program, timing_summary=dict(TIMING), metadata=dict(METADATA))


@pytest.fixture
def neff_bytes(neff):
    return neff.to_bytes()


@pytest.fixture
def reseal():
    """Recompute the trailing checksum, to forge files whose damage lies beyond the checksum."""

    def _reseal(data: bytes) -> bytes:
        body = data[:-CHECKSUM_SIZE]
        return body + hashlib.sha256(body).digest()

    return _reseal


@pytest.fixture
def forge(neff):
    """Build a correctly sealed file from a (possibly wrong) program dict and extra sections."""

    def _forge(program_dict=None, sections=None, drop=(), header_extra=None) -> bytes:
        base = neff.program.to_dict()
        base.pop("graph")
        raw = {"program": json.dumps(base if program_dict is None else program_dict).encode()}
        raw.update(sections or {})
        for name in drop:
            raw.pop(name, None)
        header = {
            "format": "neuron-sim-neff",
            "version": 1,
            "producer": "test",
            "program": neff.program.name,
            "target": "trn2",
            "created_by": {},
            "tensors": [t.to_dict() for t in neff.program.tensors],
            **(header_extra or {}),
        }
        return pack(header, raw)

    return _forge
