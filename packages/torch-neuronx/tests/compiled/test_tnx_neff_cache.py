"""The NEFF disk cache across processes: an entry serves only the call it was compiled for (a NEFF
of another op under an op's key is refused and rebuilt, never run), and a change to anything that
shapes a NEFF or its timing - the code of any package, or the target - makes new entries, for eager
ops and compiled graphs alike, instead of reusing old ones."""

from __future__ import annotations

import glob
import json
import os
import shutil

import neuron_sim
import neuronxcc.compiler
import pytest
import torch_neuronx
from neuron_sim.neff import inspect
from tnx_helpers import run_python

# argv: torch ops to run eagerly, and "graph" for a torch.compile'd function. Prints what each entry
# cache did: {"compiled": ..., "disk_hits": ...} for eager ops and, if a graph ran, for graphs.
RUN_OPS = """
import json, sys, warnings, torch, torch_neuronx
from torch_neuronx.compiled.cache import CACHE
from torch_neuronx.dynamo.graph_cache import CACHE as GRAPHS
a = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 1
b = torch.full((3, 4), 3.0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for op in sys.argv[1:] or ["add", "mul"]:
        if op == "graph":
            got = torch.compile(lambda x, y: x * y - x, backend="neuron")(a.to("neuron"), b.to("neuron")).cpu()
            assert torch.equal(got, a * b - a), got
            continue
        got = getattr(torch, op)(a.to("neuron"), b.to("neuron")).cpu()
        assert torch.equal(got, getattr(torch, op)(a, b)), (op, got)
result = {"compiled": CACHE.stats.compiled, "disk_hits": CACHE.stats.disk_hits,
          "warnings": [str(w.message) for w in caught if "NEFF cache" in str(w.message)]}
if "graph" in sys.argv[1:]:
    result["graphs"] = {"compiled": GRAPHS.stats.compiled, "disk_hits": GRAPHS.stats.disk_hits}
print(json.dumps(result))
"""


def run_ops(cache_dir, *ops: str, pythonpath: str | None = None, env: dict | None = None) -> dict:
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(cache_dir), **(env or {})}
    if pythonpath is not None:
        # Ahead of the sources under test, not instead of them: without them the other packages
        # came from wherever the venv installs them, a different checkout whose fingerprints
        # missed the cache whatever the copy held.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, os.environ.get("PYTHONPATH")) if p)
    code = f"import sys; sys.argv[1:] = {list(ops)!r}\n" + RUN_OPS
    return json.loads(run_python(code, env, timeout=300).stdout.strip().splitlines()[-1])


def entry_of(cache_dir, op: str) -> str:
    """The cache file of ``aten.<op>.Tensor``, found by the request it records."""
    paths = [p for p in glob.glob(os.path.join(str(cache_dir), "**", "*.neff"), recursive=True)
             if f"op='aten.{op}', overload='Tensor'" in inspect(p)["compiled_for"]]
    assert len(paths) == 1, paths
    return paths[0]


@pytest.fixture
def add_and_mul_cached(tmp_path):
    first = run_ops(tmp_path, "add", "mul")
    assert first["compiled"] == 2 and first["warnings"] == []
    return tmp_path


def test_another_ops_neff_under_an_ops_key_is_refused_and_rebuilt(add_and_mul_cached):
    # The reproducer: with add's NEFF copied over mul's entry, a * b computed a + b.
    cache_dir = add_and_mul_cached
    shutil.copyfile(entry_of(cache_dir, "add"), entry_of(cache_dir, "mul"))
    second = run_ops(cache_dir, "mul")  # asserts a * b == CPU's
    assert second["compiled"] == 1 and second["disk_hits"] == 0
    assert len(second["warnings"]) == 1 and "compiled for another request" in second["warnings"][0]
    third = run_ops(cache_dir, "add", "mul")  # rebuilt and rewritten: both clean hits again
    assert third == {"compiled": 0, "disk_hits": 2, "warnings": []}


def test_a_symlink_from_one_entry_to_another_is_refused(add_and_mul_cached):
    cache_dir = add_and_mul_cached
    mul = entry_of(cache_dir, "mul")
    os.unlink(mul)
    os.symlink(entry_of(cache_dir, "add"), mul)
    second = run_ops(cache_dir, "mul")
    assert second["compiled"] == 1 and "symbolic link" in second["warnings"][0]
    assert not os.path.islink(mul)


# One eager op and one compiled graph: both kinds of entry (one entry class, one cache class).
WARM = ("mul", "graph")
MISSED = {"compiled": 1, "disk_hits": 0, "warnings": [], "graphs": {"compiled": 1, "disk_hits": 0}}
HIT = {"compiled": 0, "disk_hits": 1, "warnings": [], "graphs": {"compiled": 0, "disk_hits": 1}}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("warm-neff-cache")
    assert run_ops(cache_dir, *WARM) == MISSED
    assert run_ops(cache_dir, *WARM) == HIT
    return cache_dir


def run_with_a_copy_of(package, source: str | None, cache_dir, tmp_path) -> dict:
    """The same calls in a process that imports a copy of ``package``'s top-level package, with a
    comment line appended to ``source`` (relative to ``package``'s folder) unless it is None."""
    top = package.__name__.split(".")[0]
    installed = os.path.dirname(package.__file__)
    for _ in package.__name__.split(".")[1:]:
        installed = os.path.dirname(installed)
    shutil.copytree(installed, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    if source is not None:
        relative = os.path.relpath(os.path.dirname(package.__file__), installed)
        with open(tmp_path / top / os.path.normpath(os.path.join(relative, source)), "a") as f:
            f.write("\n# touched\n")
    return run_ops(cache_dir, *WARM, pythonpath=str(tmp_path))


@pytest.mark.parametrize("package, source", [
    (neuron_sim, "isa/vector.py"),  # the ISA and its validation
    (neuron_sim, "builder.py"),  # the program builder
    (neuron_sim, "timing/model.py"),  # the timing model (the NEFF's recorded summary)
    (neuron_sim, "arch/trn2.py"),  # the architecture data
    (neuronxcc.compiler, "fusion.py"),  # the compiler
    (neuronxcc.compiler, "../frontend/fx.py"),  # a compiler frontend
    (torch_neuronx, "compiled/tracing.py"),  # this package's tracing
], ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_touching_code_that_shapes_a_neff_invalidates_its_entries(warm_cache, tmp_path, package, source):
    # Which files each fingerprint covers, one by one: neuron-sim tests/test_fingerprint.py,
    # neuronx-cc tests/test_cc_fingerprint.py.
    assert run_with_a_copy_of(package, source, warm_cache, tmp_path) == MISSED


def test_another_target_makes_its_own_entries(warm_cache):
    assert run_ops(warm_cache, *WARM, env={"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}) == MISSED
    assert run_ops(warm_cache, *WARM) == HIT  # trn2's entries are still there


def test_control_an_untouched_copy_hits_the_cache(warm_cache, tmp_path):
    # Where the code is installed is not part of the key, only what it says.
    assert run_with_a_copy_of(neuron_sim, None, warm_cache, tmp_path) == HIT


def test_the_entry_size_limit_comes_from_the_environment(monkeypatch, tmp_path):
    from torch_neuronx.compiled.cache import disk_cache

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    assert disk_cache().max_entry_bytes == 256 << 20
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB", "1.5")
    assert disk_cache().max_entry_bytes == 3 << 19
    for bad in ("0", "-2", "lots"):
        monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB", bad)
        with pytest.raises(ValueError, match=f"TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB='{bad}': expected a positive number"):
            disk_cache()
