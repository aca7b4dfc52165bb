"""A NEFF written and read back holds exactly the program, graph, timing summary and metadata."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim.neff import NEFF_MAGIC, NEFF_VERSION, Neff
from neuron_sim.programs import tiled_matmul


def _same_program(a, b):
    assert a.name == b.name
    assert a.target == b.target
    assert a.tensors == b.tensors
    assert a.metadata == b.metadata
    assert a.graph == b.graph
    assert len(a.instructions) == len(b.instructions)
    assert [i.to_dict() for i in a.instructions] == [i.to_dict() for i in b.instructions]
    assert [type(i) for i in a.instructions] == [type(i) for i in b.instructions]


def test_round_trip_through_bytes(neff, neff_bytes):
    back = Neff.from_bytes(neff_bytes)
    _same_program(neff.program, back.program)
    assert back.timing_summary == neff.timing_summary
    assert back.timing_summary["per_engine_ns"]["vector"] == 310.5
    assert back.metadata == neff.metadata
    assert back.program.graph == neff.program.graph
    assert back.program.graph["nodes"][0]["op"] == "matmul"


def test_round_trip_through_a_file(neff, tmp_path):
    path = tmp_path / "matmul.neff"
    neff.save(path)
    back = Neff.load(path)
    _same_program(neff.program, back.program)
    assert back.timing_summary == neff.timing_summary
    assert path.read_bytes().startswith(NEFF_MAGIC)
    assert int.from_bytes(path.read_bytes()[8:12], "little") == NEFF_VERSION


def test_tensor_table_and_source_locations_survive(neff_bytes):
    back = Neff.from_bytes(neff_bytes).program
    assert [(t.name, t.shape, t.dtype, t.kind) for t in back.tensors] == [
        ("lhsT", (256, 256), "bfloat16", "input"),
        ("rhs", (256, 512), "bfloat16", "input"),
        ("out", (256, 512), "bfloat16", "output"),
    ]
    assert [t.name for t in back.inputs] == ["lhsT", "rhs"]
    assert all(inst.location and ":" in inst.location for inst in back.instructions)


def test_optional_sections_can_be_absent():
    program = tiled_matmul(128, 128, 512)
    back = Neff.from_bytes(Neff(program).to_bytes())
    assert back.program.graph is None
    assert back.timing_summary is None
    assert back.metadata == {}
    _same_program(program, back.program)


def test_bytes_are_deterministic(neff):
    assert neff.to_bytes() == neff.to_bytes()


def test_numpy_scalars_in_timing_are_stored_as_numbers(program):
    back = Neff.from_bytes(Neff(program, timing_summary={"total_ns": np.float32(2.5), "n": np.int64(3)}).to_bytes())
    assert back.timing_summary == {"total_ns": 2.5, "n": 3}


def test_unserializable_metadata_is_a_clear_type_error(program):
    with pytest.raises(TypeError, match="section 'metadata'.*object"):
        Neff(program, metadata={"callback": object()}).to_bytes()


def test_no_pickle_in_the_file(neff_bytes):
    # A pickle would start with b"\x80" or contain module references; the file is JSON + zlib.
    assert b"neuron_sim.isa" not in neff_bytes
    assert not neff_bytes.startswith(b"\x80")
