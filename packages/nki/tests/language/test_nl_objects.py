"""nl.NKIObject: configuration objects as compile-time kernel arguments."""

from dataclasses import dataclass

import nki
import nki.language as nl
import numpy as np
from nki_helpers import rand

TRACES = []


@dataclass
class ScaleConfig(nl.NKIObject):
    factor: float
    add: float = 0.0


class TileConfig(nl.NKIObject):
    def __init__(self, rows: int):
        self.rows = rows
        self.tiles = 256 // rows


@nki.jit
def scaled(x, config: ScaleConfig, tiles: TileConfig):
    TRACES.append((config.factor, tiles.rows))
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(tiles.tiles):
        rows = slice(i * tiles.rows, (i + 1) * tiles.rows)
        nl.store(out[rows, :], nl.add(nl.multiply(nl.load(x[rows, :]), config.factor), config.add))
    return out


def test_objects_are_compile_time_values_traced_once_per_field_values():
    TRACES.clear()
    x = rand((256, 32), seed=1)
    for _ in range(2):
        np.testing.assert_allclose(scaled(x, ScaleConfig(2.0, 1.0), TileConfig(128)), 2 * x + 1, rtol=1e-6)
    assert TRACES == [(2.0, 128)]
    np.testing.assert_allclose(scaled(x, ScaleConfig(3.0), TileConfig(64)), 3 * x, rtol=1e-6)
    assert TRACES == [(2.0, 128), (3.0, 64)]


def test_keyword_construction_and_repr():
    obj = nl.NKIObject(a=1, b="two")
    assert (obj.a, obj.b) == (1, "two") and repr(obj) == "NKIObject(a=1, b='two')"
    assert repr(ScaleConfig(2.0)) == "ScaleConfig(factor=2.0, add=0.0)"
