"""Which comparisons a unit made against its reference, and which failed.

A script that prints ``np.allclose(out, ref)`` instead of asserting it still compared: numpy's
and torch's comparison functions are wrapped while units run, and each call made from the
unit's own files is logged with its result.
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np

# (module, attribute, True if the function returns a bool rather than raising)
_NUMPY = [
    (np, "allclose", True), (np, "array_equal", True),
    (np.testing, "assert_allclose", False), (np.testing, "assert_array_equal", False),
    (np.testing, "assert_array_almost_equal", False), (np.testing, "assert_almost_equal", False),
    (np.testing, "assert_equal", False),
]


class ComparisonLog:
    def __init__(self, root: str, with_torch: bool):
        """``with_torch``: the unit uses torch (importing it costs seconds: only then)."""
        self.root = os.path.abspath(root) + os.sep
        self.count = 0
        self.failed: list[str] = []
        self._wrapped: list[tuple] = []  # (module, name, original), to restore
        for module, name, returns_bool in _NUMPY:
            self._wrap(module, name, returns_bool)
        if with_torch:
            try:
                import torch  # optional: only units that use torch need it
            except ImportError:
                return
            self._wrap(torch, "allclose", True)
            self._wrap(torch, "equal", True)
            self._wrap(torch.testing, "assert_close", False)

    def restore(self) -> None:
        for module, name, original in reversed(self._wrapped):
            setattr(module, name, original)
        self._wrapped.clear()

    def clear(self) -> None:
        self.count = 0
        self.failed = []

    def _from_unit(self) -> str | None:
        frame = sys._getframe(2)
        if frame.f_code.co_filename.startswith(self.root):
            return f"{os.path.relpath(frame.f_code.co_filename, self.root)}:{frame.f_lineno}"
        return None

    def _wrap(self, module, name: str, returns_bool: bool) -> None:
        original = getattr(module, name)
        if getattr(original, "_nki_compat", False):
            return

        @functools.wraps(original)
        def logged(*args, **kwargs):
            where = self._from_unit()
            try:
                result = original(*args, **kwargs)
            except AssertionError:
                if where is not None:
                    self.count += 1
                raise
            if where is not None:
                self.count += 1
                if returns_bool and not bool(result):
                    self.failed.append(f"{module.__name__}.{name} returned False at {where}")
            return result

        logged._nki_compat = True
        setattr(module, name, logged)
        self._wrapped.append((module, name, original))
