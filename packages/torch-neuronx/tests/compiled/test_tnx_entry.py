"""CompiledNeff, the one cache entry of eager ops and compiled graphs: its launch facts round-trip
through the NEFF's metadata, and a NEFF whose facts do not fit its own tensor table is refused on
load (a ValueError naming the tensor), so it is rebuilt instead of launched."""

from __future__ import annotations

import warnings

import pytest
import torch
from neuron_sim.graph import Graph
from neuron_sim.neff import CacheKey, Neff, NeffCacheWarning
from neuronxcc.compiler import compile_neff
from torch.utils._pytree import tree_flatten
from torch_neuronx.compiled.cache import CACHE, disk_cache
from torch_neuronx.compiled.entry import METADATA_KEY, CompiledNeff, OutputSpec


def double(rows: int = 5, cols: int = 7) -> CompiledNeff:
    g = Graph("double")
    x = g.add_input("in0", (rows, cols), "float32")
    g.set_outputs([g.add1("add", x, x)], ["out0"])
    neff = compile_neff(g, "trn2")
    nbytes = rows * cols * 4
    return CompiledNeff(neff, [nbytes], [OutputSpec((rows, cols), (cols, 1), torch.float32, nbytes)],
                        out_spec=tree_flatten(torch.empty(0))[1])


def stored(entry: CompiledNeff) -> Neff:
    entry.neff.metadata[METADATA_KEY] = entry.metadata()
    return Neff.from_bytes(entry.neff.to_bytes())


def test_facts_round_trip_through_the_neff():
    entry = double()
    back = CompiledNeff.from_neff(stored(entry))
    assert back.in_nbytes == entry.in_nbytes and back.outputs == entry.outputs
    assert back.out_spec == entry.out_spec and back.name == "double"


@pytest.mark.parametrize("change, message", [
    (lambda e: setattr(e.outputs[0], "nbytes", 4), r"binds 'out0' to 4 bytes of float32, but its tensor table declares output \[5, 7\] float32 \(140 bytes\)"),
    (lambda e: setattr(e.outputs[0], "dtype", torch.bfloat16), r"binds 'out0' to 140 bytes of bfloat16"),
    (lambda e: e.in_nbytes.append(140), r"binds 'in1' to 140 bytes, but its tensor table declares none"),
    (lambda e: e.in_nbytes.clear(), r"needs buffers its metadata does not bind: \['in0'\]"),
])
def test_facts_that_do_not_fit_the_tensor_table_are_refused(change, message):
    entry = double()
    change(entry)
    with pytest.raises(ValueError, match=message):
        CompiledNeff.from_neff(stored(entry))


def test_missing_or_malformed_metadata_is_refused():
    entry = double()
    with pytest.raises(ValueError, match=f"has no {METADATA_KEY} metadata of version"):
        CompiledNeff.from_neff(entry.neff)
    neff = stored(entry)
    neff.metadata[METADATA_KEY]["outputs"] = [["not", "a", "spec"]]
    with pytest.raises(ValueError, match="malformed"):
        CompiledNeff.from_neff(neff)


def test_a_disk_entry_whose_facts_do_not_fit_is_rebuilt_with_a_warning(neuron, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    x = torch.arange(35, dtype=torch.float32).reshape(5, 7)
    CACHE.clear()
    assert torch.equal((x.to(neuron) * 3).cpu(), x * 3)
    # Damage the facts of mul's entry but keep it intact and recorded for its request.
    (path,) = [p for p in tmp_path.glob("**/*.neff") if "op='aten.mul'" in (Neff.load(p).compiled_for or "")]
    neff = Neff.load(path)
    neff.metadata[METADATA_KEY]["outputs"][0][3] = 8
    disk_cache().put(CacheKey(path.stem, neff.compiled_for), neff)
    CACHE.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.equal((x.to(neuron) * 3).cpu(), x * 3)
    messages = [str(w.message) for w in caught if issubclass(w.category, NeffCacheWarning)]
    assert len(messages) == 1 and "binds 'out0' to 8 bytes" in messages[0] and "rebuilt" in messages[0]
    assert CompiledNeff.from_neff(Neff.load(path)).outputs[0].nbytes == 140  # rewritten
    CACHE.clear()
