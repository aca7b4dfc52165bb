"""The type of a graph value: a shape and a dtype (its own module: the op registry's shape rules
and the graph both use it)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "dtype", dtypes.dtype_name(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def to_list(self) -> list:
        return [list(self.shape), self.dtype]

    def __str__(self) -> str:
        return f"{'x'.join(map(str, self.shape)) or 'scalar'}x{self.dtype}"
