"""Bool tensor constants of one graph stay distinct through torch-mlir's FX importer: it converts
each to a temporary uint8 tensor and caches literals by ``id()``, so a later constant whose
temporary took a freed one's id got the earlier constant's values (a max-pooling mask of one
window offset read as another's, depending on the allocator)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.compiler.testing import run_fast  # noqa: E402
from neuronxcc.frontend import from_fx  # noqa: E402
from neuronxcc.frontend.fx import _literal_tracker  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from torch_mlir.extras.fx_importer import RefTracker  # noqa: E402


def _mappings(tracker, count=200):
    """The literal entries of ``count`` temporaries, each dropped after it is tracked (as the
    importer's uint8 copies of bool constants are)."""
    found = []
    for i in range(count):
        found.append(tracker.track(torch.full((1, 3), i % 2, dtype=torch.uint8)))
    return found


def test_torch_mlirs_own_cache_confuses_freed_temporaries():
    """The premise: with torch-mlir's tracker, a freed temporary's entry is handed to another."""
    assert len({id(m) for m in _mappings(RefTracker())}) < 200


def test_the_importers_cache_gives_each_temporary_its_own_entry():
    assert len({id(m) for m in _mappings(_literal_tracker())}) == 200


MASKS = [[[True, False, True]], [[False, True, True]], [[True, True, False]], [[False, False, True]]] * 4


def _masked(x):
    return [torch.where(torch.as_tensor(m), x, -x) for m in MASKS]


def test_distinct_bool_constants_keep_their_values():
    x = torch.arange(1.0, 4.0).reshape(1, 3)
    gm = make_fx(_masked, tracing_mode="fake")(x)
    graph = from_fx(gm, [x])
    got = run_fast(graph, {graph.inputs[0].name: x.numpy()})
    for out, want in zip(got.values(), _masked(x)):
        np.testing.assert_array_equal(out, want.numpy())
