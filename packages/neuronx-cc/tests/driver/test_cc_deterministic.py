"""Compilation is deterministic: the same graphs give byte-identical NEFFs in processes with
different ``PYTHONHASHSEED`` values (no set or hash order reaches the output; torch-mlir's folding
of constant compares, which read uninitialized memory, is kept out of the frontend's graphs)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

SCRIPT = textwrap.dedent("""
    import hashlib
    import torch
    import torch.nn.functional as F
    from torch.fx.experimental.proxy_tensor import make_fx
    from neuronxcc.compiler import compile_neff
    from neuronxcc.frontend import from_fx
    from neuronxcc.frontend.fx import decompositions

    g = torch.Generator().manual_seed(0)
    x, y, i = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g) + 3, torch.randint(0, 7, (5,), generator=g)
    cases = {
        "remainder": (lambda a: torch.remainder(a, 1.5), (x,)),
        "mod_negative": (lambda a: a % -0.75, (x,)),
        "floor_divide": (lambda a, b: a // b, (x, y)),
        "cross_entropy": (lambda a, t: F.cross_entropy(a, t), (x, i)),
        "masked_softmax": (lambda a, t: torch.softmax(torch.where(t[:, None] == torch.arange(7), a, -1e9), -1), (x, i)),
        "layer_norm_gelu": (lambda a: F.gelu(F.layer_norm(a, (7,))), (x,)),
        "int64_words": (lambda t: (t.long() * 1 + 2**40 != t.long(), t.long() - 3), (i,)),
    }
    for name, (fn, args) in cases.items():
        graph = from_fx(make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*args), list(args))
        print(name, hashlib.sha256(compile_neff(graph, "trn2", name=name).to_bytes()).hexdigest())
""")


def _hashes(seed: int) -> str:
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_neffs_are_byte_identical_across_hash_seeds():
    first = _hashes(0)
    assert len(first.splitlines()) == 7
    for seed in (1, 2):
        assert _hashes(seed) == first, f"PYTHONHASHSEED={seed} compiled other bytes"
