"""nki.typing: annotations for kernel parameters.

    import nki.typing as nt

    @nki.jit
    def kernel(x: nt.tensor[128, 512], out: nt.mutable_tensor): ...

``nt.tensor[...]`` (a shape, optionally with a dtype: ``nt.tensor[[128, 512], nl.float32]``) and
``nt.mutable_tensor`` (a tensor the kernel writes) describe parameters for readers and tools; they
are not checked when a kernel is traced - the tracer takes shapes and dtypes from the arguments.
"""

from __future__ import annotations


class TensorType:
    """What ``nt.tensor[...]`` gives: the annotation's shape and dtype (None when not given)."""

    def __init__(self, name: str, shape=None, dtype=None, mutable: bool = False):
        self.name, self.shape, self.dtype, self.mutable = name, shape, dtype, mutable

    def __getitem__(self, key) -> TensorType:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], (list, tuple)):
            shape, dtype = tuple(key[0]), key[1]
        else:
            shape, dtype = (tuple(key) if isinstance(key, (list, tuple)) else (key,)), None
        return TensorType(self.name, shape, dtype, self.mutable)

    def __repr__(self) -> str:
        if self.shape is None:
            return f"nt.{self.name}"
        return f"nt.{self.name}[{list(self.shape)}{', ' + str(self.dtype) if self.dtype is not None else ''}]"


tensor = TensorType("tensor")
mutable_tensor = TensorType("mutable_tensor", mutable=True)

__all__ = ["tensor", "mutable_tensor", "TensorType"]
