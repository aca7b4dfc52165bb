"""Errors of the StableHLO / FX frontend. Each names what was rejected and where it came from."""

from __future__ import annotations


class FrontendError(ValueError):
    """The frontend cannot turn its input into a graph (malformed module, missing dependency, ...)."""


class UnsupportedOp(FrontendError, NotImplementedError):
    """An op (or a pattern of an op) the importer has no graph form for.

    ``op`` is the op's name (``stablehlo.sort``, ``torch.aten.foo``), ``operand_types`` and
    ``result_types`` its MLIR types, ``location`` the source line torch-mlir attached (the Python
    model line) or the line in the MLIR text, ``reason`` what exactly is missing.
    """

    def __init__(self, op: str, reason: str = "", *, operand_types=(), result_types=(), location: str | None = None,
                 text: str | None = None):
        self.op = op
        self.reason = reason
        self.operand_types = [str(t) for t in operand_types]
        self.result_types = [str(t) for t in result_types]
        self.location = location
        self.text = text
        parts = [f"unsupported op '{op}'"]
        if reason:
            parts[0] += f": {reason}"
        if self.operand_types or self.result_types:
            parts.append(f"types ({', '.join(self.operand_types)}) -> ({', '.join(self.result_types)})")
        if location:
            parts.append(f"at {location}")
        if text:
            parts.append(f"op: {text}")
        super().__init__("\n  ".join(parts))


class MissingDependency(FrontendError, ImportError):
    """torch / torch-mlir are needed for this entry point but are not installed."""

    def __init__(self, what: str, err: BaseException | None = None):
        super().__init__(
            f"{what} needs torch-mlir (and torch): install the extra with `pip install 'neuronx-cc[stablehlo]'`"
            + (f" ({type(err).__name__}: {err})" if err else ""))
