"""nl.NKIObject: the base of the configuration objects kernels pass around (dataclasses or plain
classes whose fields are compile-time values, nki-library's ``AttnConfig`` and friends)."""

from __future__ import annotations

import dataclasses


class NKIObject:
    """Base class for NKI kernel dataclasses and configuration objects. ``NKIObject(a=1, b=2)``
    sets the keyword arguments as attributes; subclasses (often ``@dataclass``) define their
    own fields. Passed to a kernel, an object is a compile-time value: kernels are traced once
    per distinct field values (see ``fields``)."""

    def __init__(self, **kwargs) -> None:
        for name, value in kwargs.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in fields(self).items())})"


def fields(obj) -> dict:
    """An object's field values by name: a dataclass's fields, else its attributes."""
    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return dict(vars(obj))
