"""The MLIR side of the frontend: parsing, types, constant attributes, resource blobs and source
locations, over the MLIR Python bindings that ship inside the torch-mlir wheel.

torch-mlir is imported lazily so ``neuronxcc`` stays importable without it (the ``stablehlo`` extra).
"""

from __future__ import annotations

import ast
import re

import numpy as np
from neuron_sim import dtypes
from neuron_sim.graph import TensorType

from .errors import FrontendError, MissingDependency

_MLIR_TYPES = {
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "ui8": "uint8", "ui16": "uint16", "ui32": "uint32",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2", "f8E4M3": "float8_e4m3", "f8E8M0FNU": "float8_e8m0fnu",
}


def bindings():
    """``torch_mlir.ir`` and the StableHLO dialect registration, or a MissingDependency error."""
    try:
        import torch_mlir._mlir_libs._stablehlo as stablehlo
        from torch_mlir import ir
    except ImportError as err:
        raise MissingDependency("importing StableHLO", err) from None
    return ir, stablehlo


def parse(text: str, source: str | None = None):
    """Parse MLIR text (StableHLO plus the func/arith ops torch-mlir leaves in) into a module."""
    ir, stablehlo = bindings()
    ctx = ir.Context()
    stablehlo.register_dialect(ctx)
    errors: list[str] = []

    def on_diagnostic(d):
        errors.append(f"{_text_location(str(d.location), source)}: {d.message}")
        return True

    handler = ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        with ctx:
            return ir.Module.parse(text)
    except Exception as err:
        name = source or "<mlir>"
        lines = [line.strip() for line in str(err).splitlines() if line.strip() and "Unable to parse" not in line]
        lines = [re.sub(r'^(?:error:\s*)?"-":(\d+):(\d+):?', lambda m: f"{name}:{m.group(1)}:{m.group(2)}:", line) for line in lines]
        detail = "; ".join(errors or lines) or str(err)
        raise FrontendError(f"cannot parse MLIR{f' from {source}' if source else ''}: {detail}") from None
    finally:
        handler.detach()


# --- types -------------------------------------------------------------------------------------------


def dtype_of(element_type) -> str | None:
    return _MLIR_TYPES.get(str(element_type))


def tensor_type(t) -> TensorType | None:
    """The graph type of an MLIR tensor type; None when it has no graph form (dynamic, complex, ...)."""
    ir, _ = bindings()
    if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
        return None
    dtype = dtype_of(t.element_type)
    return TensorType(tuple(t.shape), dtype) if dtype else None


# --- locations ---------------------------------------------------------------------------------------

_FRAME = re.compile(r'"([^"]*)":(\d+):(\d+)')


def _text_location(loc: str, source: str | None) -> str:
    frames = _FRAME.findall(loc)
    if not frames:
        return source or "<mlir>"
    f, line, col = frames[-1]
    return f"{source or '<mlir>'}:{line}:{col}" if f in ("-", "") else f"{f}:{line}"


def frames(location, source: str | None = None) -> list[str]:
    """``file:line`` frames of an MLIR location, innermost first. Positions in parsed text (the
    parser names its buffer ``-``) become ``source:line:col``."""
    out = []
    for f, line, col in _FRAME.findall(str(location)):
        out.append(f"{source or '<mlir>'}:{line}:{col}" if f in ("-", "") else f"{f}:{line}")
    return out


def describe_location(location, source: str | None = None) -> str | None:
    """The outermost frame (the model's own line; ``callsite(callee at caller)`` lists callers
    last), followed by the frames it called through."""
    fs = frames(location, source)
    if not fs:
        return None
    if len(fs) == 1:
        return fs[0]
    return f"{fs[-1]} (via {', '.join(reversed(fs[:-1]))})"


def node_location(location, source: str | None = None) -> str | None:
    fs = frames(location, source)
    return fs[-1] if fs else None


# --- constants -----------------------------------------------------------------------------------------

_RESOURCE = re.compile(r'^\s*"?([^":\s]+)"?\s*:\s*"0x([0-9A-Fa-f]*)"', re.M)


def resource_blobs(text: str) -> dict[str, bytes]:
    """The ``dialect_resources`` blobs of a module's text: name -> raw little-endian data (the
    blob's leading 4-byte alignment word dropped)."""
    start = text.rfind("{-#")
    if start < 0:
        return {}
    return {name: bytes.fromhex(hexdata)[4:] for name, hexdata in _RESOURCE.findall(text[start:])}


def _from_bytes(data: bytes, ttype: TensorType, what: str) -> np.ndarray:
    np_dtype = dtypes.to_numpy(ttype.dtype)
    n = ttype.num_elements
    if ttype.dtype == "bool":
        raw = np.frombuffer(data, dtype=np.uint8)
        arr = raw != 0 if raw.size == n else np.unpackbits(raw, bitorder="little")[:n] != 0
    else:
        if len(data) not in (n * np_dtype.itemsize, np_dtype.itemsize):
            raise FrontendError(f"{what}: {len(data)} bytes of data for {ttype}")
        arr = np.frombuffer(data, dtype=np_dtype)
    if arr.size == 1 and n != 1:
        return np.full(ttype.shape, arr[0], dtype=arr.dtype)
    return arr.reshape(ttype.shape).copy()


def _literal(inner: str, ttype: TensorType) -> np.ndarray:
    np_dtype = dtypes.to_numpy(ttype.dtype)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64, 1: np.uint8}.get(np_dtype.itemsize)

    def hex_float(m):  # a float given by its bit pattern (NaN, inf): 0x7FC00000
        return repr(float(np.array([int(m.group(0), 16)], dtype=bits).view(np_dtype)[0]))

    if dtypes.is_float(ttype.dtype):
        inner = re.sub(r"0x[0-9A-Fa-f]+", hex_float, inner)
    inner = inner.replace("true", "True").replace("false", "False").replace("nan", "float('nan')")
    inner = re.sub(r"(?<![\w.])(-?)inf", r"\1float('inf')", inner)
    value = eval(inner, {"float": float, "__builtins__": {}}) if "float(" in inner else ast.literal_eval(inner)
    arr = np.asarray(value, dtype=np.float64 if dtypes.is_float(ttype.dtype) else None)
    arr = arr.astype(np_dtype)
    return np.full(ttype.shape, arr.reshape(()), dtype=np_dtype) if arr.ndim == 0 else arr.reshape(ttype.shape)


def constant_value(attr, ttype: TensorType, blobs) -> np.ndarray:
    """The value of a ``dense<...>`` / ``dense_resource<...>`` attribute as an array of ``ttype``.

    ``blobs`` is a callable returning the module's resource blobs (computed on first use, since it
    prints the whole module)."""
    ir, _ = bindings()
    np_dtype = dtypes.to_numpy(ttype.dtype)
    if isinstance(attr, ir.DenseElementsAttr):
        if attr.is_splat:
            v = attr.get_splat_value()
            if hasattr(v, "value"):
                scalar = v.value
                if ttype.dtype == "bool":
                    scalar = bool(scalar)
                elif dtypes.is_int(ttype.dtype):
                    scalar = np.array(scalar, dtype=np.int64).astype(np_dtype)
                return np.full(ttype.shape, scalar, dtype=np_dtype)
        else:
            try:
                return np.array(attr).astype(np_dtype).reshape(ttype.shape)
            except Exception:  # bf16 / fp8 have no buffer form in the bindings: read the text
                pass
    text = str(attr)
    m = re.match(r"dense_resource<([^>]+)>", text)
    if m:
        name = m.group(1).strip('"')
        table = blobs()
        if name not in table:
            raise FrontendError(f"constant dense_resource<{name}> has no blob in the module's dialect_resources")
        return _from_bytes(table[name], ttype, f"dense_resource<{name}>")
    m = re.match(r"dense<(.*)>\s*:", text, re.S)
    if not m:
        raise FrontendError(f"cannot read constant {text[:120]}")
    inner = m.group(1).strip()
    if inner.startswith('"0x'):
        return _from_bytes(bytes.fromhex(inner[3:-1]), ttype, "dense hex constant")
    return _literal(inner, ttype)


def int_list(attr) -> list[int]:
    """``array<i64: ...>`` or ``dense<...> : tensor<...xi64>`` (flattened, splats expanded) as a list of ints."""
    ir, _ = bindings()
    if isinstance(attr, ir.DenseElementsAttr):
        if attr.is_splat:
            return [int(attr.get_splat_value().value)] * int(np.prod(attr.type.shape))
        return [int(x) for x in np.array(attr).reshape(-1)]
    try:
        return [int(x) for x in attr]
    except TypeError:
        return [int(x) for x in re.findall(r"-?\d+", str(attr).split(":")[-1 if "array" in str(attr) else 0].split(">")[0])]


def int_attr(attr) -> int:
    return int(attr.value) if hasattr(attr, "value") else int(re.match(r"\s*(-?\d+)", str(attr)).group(1))


def struct_fields(attr) -> dict[str, object]:
    """The fields of ``#stablehlo.dot<...>`` / ``#stablehlo.gather<...>`` / ``#stablehlo.scatter<...>``:
    list fields as lists of ints, scalar fields as ints."""
    text = str(attr)
    out: dict[str, object] = {}
    for name, body in re.findall(r"(\w+)\s*=\s*\[([^\]]*)\]", text):
        out[name] = [int(x) for x in re.findall(r"-?\d+", body)]
    for name, value in re.findall(r"(\w+)\s*=\s*(-?\d+)\b(?!\s*[\],])", text):
        out.setdefault(name, int(value))
    return out


def string_value(attr) -> str:
    """A ``StringAttr`` (``"neuron.erf"``) as a Python string."""
    return attr.value if hasattr(attr, "value") else str(attr).strip('"')


def enum_value(attr) -> str:
    """``#stablehlo<comparison_direction GT>`` -> ``GT``."""
    m = re.search(r"<\w+\s+(\w+)>", str(attr))
    return m.group(1) if m else str(attr)
