"""StableHLO (as torch-mlir emits it) -> ``neuron_sim.graph.Graph``.

    graph = import_text(open("model.mlir").read(), source="model.mlir")
    graph = import_module(fx.export_and_import(model, x, output_type="stablehlo"))

The walk follows the module's ``func.func`` (``main``, else the first public function; ``func.call``
is inlined) op by op. Elementwise, shape, reduction and matmul ops map one to one onto graph ops;
``gather``/``scatter`` are matched against the forms torch-mlir emits for embedding, index_select,
torch.gather, scatter(_add), index_add/index_put and multi-dimensional indexing. Ops whose inputs
are all constants fold into constants (small results only, so weights are not duplicated into huge
literals), and dead nodes are dropped at the end. Anything without a graph form raises
``UnsupportedOp`` naming the op, its types and the model line torch-mlir attached to it (or its line
in the MLIR text).
"""

from __future__ import annotations

import math

import numpy as np
from neuron_sim import dtypes
from neuron_sim.graph import Graph, TensorType, Value, folding
from neuron_sim.graph.ops import infer

from . import mlir
from .errors import FrontendError, UnsupportedOp

UNARY = {
    "negate": "negate", "abs": "abs", "exponential": "exp", "exponential_minus_one": "expm1", "log": "log",
    "log_plus_one": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "logistic": "sigmoid", "sine": "sin",
    "cosine": "cos", "tan": "tan", "floor": "floor", "ceil": "ceil", "round_nearest_even": "round", "sign": "sign",
    "not": "not",
}
BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "maximum": "maximum",
    "minimum": "minimum", "power": "power", "remainder": "fmod",  # StableHLO remainder: sign of the dividend (C fmod)
    "atan2": "atan2", "and": "and", "or": "or", "xor": "xor", "shift_left": "shift_left",
    "shift_right_arithmetic": "shift_right",
}
CHLO = {"chlo.erf": "erf", "chlo.tan": "tan"}
REDUCE_BODIES = {"stablehlo.add": "sum", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
                 "stablehlo.multiply": "prod", "stablehlo.and": "and", "stablehlo.or": "or"}
_NEUTRAL = {"multiply": 1, "add": 0, "subtract": 0, "divide": 1}
_COMBINE = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "and": "and", "or": "or"}

HANDLERS: dict = {}


def _handles(*names):
    def register(fn):
        for name in names:
            HANDLERS[name] = fn
        return fn

    return register


def import_text(text: str | bytes, source: str | None = None, func_name: str | None = None, *,
                narrow_float64: bool = True) -> Graph:
    """Import MLIR text (what ``print(module)`` gives, resource blobs included) or MLIR bytecode.
    ``source`` names the text in locations and errors (``model.mlir:12:5``)."""
    module = mlir.parse(text, source)
    return _Importer(module, source=source, text=text if isinstance(text, str) else None,
                     narrow_float64=narrow_float64).run(func_name)


def import_module(module, func_name: str | None = None, source: str | None = None, *, narrow_float64: bool = True) -> Graph:
    """Import a torch_mlir ``ir.Module`` (or MLIR text) produced with ``output_type="stablehlo"``.

    ``narrow_float64``: values computed in float64 (torch's decompositions compute LayerNorm's
    variance that way) become float32, as the Neuron compiler does: the engines have no 64-bit
    floats. The graph's interface keeps the function's types (converts at the boundary)."""
    if isinstance(module, (str, bytes)):
        return import_text(module, source, func_name, narrow_float64=narrow_float64)
    return _Importer(module, source=source, narrow_float64=narrow_float64).run(func_name)


def _first_line(op, limit: int = 240) -> str:
    text = str(op).strip().splitlines()[0] if str(op).strip() else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Importer:
    def __init__(self, module, source: str | None = None, text: str | None = None, narrow_float64: bool = True):
        self.ir, _ = mlir.bindings()
        self.narrowing = {"float64": "float32"} if narrow_float64 else {}
        self.module = module
        self.source = source
        self._text = text
        self._blobs: dict | None = None
        self.graph: Graph | None = None
        self.env: dict = {}  # MLIR value -> graph Value
        self.const: dict[int, np.ndarray] = {}  # graph value id -> its value, for constants
        self.coord: dict[int, int] = {}  # graph value id -> d: value[i_0, ..., i_n] == i_d (iotas)
        self.concat_parts: dict[int, tuple[int, list[Value]]] = {}
        self.producers: dict = {}  # graph value id -> the node that made it
        self.splats: dict[int, object] = {}  # graph value id -> its single value (broadcast constants)
        self.op = None  # the op being imported (for locations and errors)

    # --- module and functions ---------------------------------------------------------------------
    def blobs(self) -> dict:
        if self._blobs is None:
            self._blobs = mlir.resource_blobs(self._text if self._text is not None else self.module.operation.get_asm())
        return self._blobs

    def functions(self) -> dict:
        out = {}
        for op in self.module.body.operations:
            if op.operation.name == "func.func":
                out[str(op.operation.attributes["sym_name"]).strip('"')] = op.operation
        return out

    def run(self, func_name: str | None) -> Graph:
        funcs = self.functions()
        if not funcs:
            raise FrontendError("the module has no func.func to import")
        if func_name is None:
            public = [n for n, f in funcs.items() if "sym_visibility" not in f.attributes
                      or str(f.attributes["sym_visibility"]).strip('"') == "public"]
            func_name = "main" if "main" in funcs else (public or list(funcs))[0]
        if func_name not in funcs:
            raise FrontendError(f"the module has no function @{func_name} (it has {', '.join('@' + n for n in funcs)})")
        func = funcs[func_name]
        self.graph = Graph(func_name)
        args = []
        for i, a in enumerate(func.regions[0].blocks[0].arguments):
            t = mlir.tensor_type(a.type)
            if t is None:
                raise UnsupportedOp("func.func", f"argument {i} of @{func_name} has type {a.type} (static-shape tensors of "
                                    f"{sorted(mlir._MLIR_TYPES)} only)", location=mlir.describe_location(func.location, self.source))
            args.append(self.graph.add_input(f"input{i}", t.shape, t.dtype))
        self.op = func
        args = [self.convert(a, self.narrow(a.type).dtype) for a in args]
        outputs = self.import_body(func, args)
        ret = list(func.regions[0].blocks[0].operations)[-1].operation
        self.op = ret
        outputs = [self.convert(v, mlir.tensor_type(r.type).dtype) for v, r in zip(outputs, ret.operands)]
        self.graph.set_outputs(outputs, [f"output{i}" for i in range(len(outputs))])
        _drop_dead_nodes(self.graph)
        return self.graph

    def import_body(self, func, args: list[Value]) -> list[Value]:
        block = func.regions[0].blocks[0]
        for a, v in zip(block.arguments, args):
            self.env[a] = v
        for op in block.operations:
            op = op.operation
            self.op = op
            if op.name in ("func.return", "stablehlo.return"):
                return [self.get(v) for v in op.operands]
            handler = HANDLERS.get(op.name)
            if handler is None:
                raise self.unsupported()
            for r in op.results:
                if mlir.tensor_type(r.type) is None:
                    raise self.unsupported(f"result type {r.type} has no graph form (static-shape tensors only)")
            try:
                results = handler(self, op)
            except FrontendError:
                raise
            except Exception as err:  # a graph shape rule rejected what we built: name the op
                raise self.unsupported(f"could not map it onto graph ops ({type(err).__name__}: {err})") from err
            for r, v in zip(op.results, results):
                self.env[r] = v
        raise FrontendError(f"function @{func.attributes['sym_name']} has no return")

    # --- helpers ---------------------------------------------------------------------------------
    def get(self, v) -> Value:
        return self.env[v]

    def ins(self, op) -> list[Value]:
        return [self.get(v) for v in op.operands]

    def rtype(self, op, i: int = 0) -> TensorType:
        """Result ``i``'s type as the graph computes it (64-bit floats narrowed)."""
        return self.narrow(mlir.tensor_type(op.results[i].type))

    def narrow(self, t: TensorType) -> TensorType:
        return TensorType(t.shape, self.narrowing.get(t.dtype, t.dtype))

    def loc(self) -> str | None:
        return mlir.node_location(self.op.location, self.source) if self.op is not None else None

    def unsupported(self, reason: str = "") -> UnsupportedOp:
        op = self.op
        return UnsupportedOp(op.name, reason, operand_types=[v.type for v in op.operands],
                             result_types=[r.type for r in op.results],
                             location=mlir.describe_location(op.location, self.source), text=_first_line(op))

    def constant(self, value: np.ndarray, dtype: str | None = None) -> Value:
        dtype = dtype or dtypes.dtype_name(value.dtype)
        value = np.array(value, dtype=dtypes.to_numpy(dtype), order="C")  # (ascontiguousarray makes 0-d 1-d)
        v = self.graph.add1("constant", value=value, dtype=dtype, location=self.loc())
        self.const[v.id] = value
        return v

    def scalar(self, x, dtype: str) -> Value:
        return self.constant(np.array(x, dtype=dtypes.to_numpy(dtype)), dtype)

    def splat(self, v: Value):
        """The one value every element of ``v`` has, when ``v`` is a constant or a broadcast of one."""
        if v.id in self.splats:
            return self.splats[v.id]
        value = self.const.get(v.id)
        if value is not None and value.size and np.all(value == value.reshape(-1)[0]):
            return value.reshape(-1)[0].item()
        return None

    def emit(self, name: str, *inputs: Value, **attrs) -> Value:
        if name in _NEUTRAL and len(inputs) == 2:  # x * 1, x + 0, ... (addmm's alpha/beta scaling)
            x, c = inputs
            if self.splat(c) == _NEUTRAL[name] and c.type == x.type:
                return x
            if name in ("multiply", "add") and self.splat(x) == _NEUTRAL[name] and c.type == x.type:
                return c
        if inputs and all(v.id in self.const for v in inputs):
            (t,) = infer(name, [v.type for v in inputs], attrs)
            # fold unless that materializes a bigger tensor (a broadcast bias stays a broadcast)
            if t.num_elements <= max(v.type.num_elements for v in inputs):
                (r,) = folding.evaluate(name, [self.const[v.id] for v in inputs], attrs, [t])
                return self.constant(dtypes.convert(r, t.dtype) if r.dtype != dtypes.to_numpy(t.dtype) else r, t.dtype)
        if name == "iota" and math.prod(attrs["shape"]) <= folding.FOLD_MAX_ELEMENTS:
            (t,) = infer(name, [], attrs)
            (r,) = folding.evaluate(name, [], attrs, [t])
            return self.constant(r, t.dtype)
        v = self.graph.add1(name, *inputs, location=self.loc(), **attrs)
        self.producers[v.id] = self.graph.nodes[-1]
        if name == "broadcast_in_dim" and self.splat(inputs[0]) is not None:
            self.splats[v.id] = self.splat(inputs[0])
        if name == "iota":
            self.coord[v.id] = attrs["dim"]
        return v

    def broadcast(self, v: Value, shape, dims=None) -> Value:
        shape = tuple(shape)
        if v.type.shape == shape and dims in (None, list(range(len(shape)))):
            return v
        dims = list(dims) if dims is not None else list(range(len(shape) - v.type.rank, len(shape)))
        out = self.emit("broadcast_in_dim", v, shape=shape, dims=dims)
        if v.id in self.coord:
            self.coord[out.id] = dims[self.coord[v.id]]
        return out

    def reshape(self, v: Value, shape) -> Value:
        shape = tuple(int(s) for s in shape)
        if v.type.shape == shape:
            return v
        producer = self.producers.get(v.id)
        if producer is not None and producer.op == "reshape" and v.id not in self.coord:
            v = producer.inputs[0]  # reshape of a reshape: one reshape
            if v.type.shape == shape:
                return v
        out = self.emit("reshape", v, shape=shape)
        if v.id in self.coord:  # an iota keeps its meaning when only unit dims come or go
            src_dims = [d for d, s in enumerate(v.type.shape) if s != 1]
            dst_dims = [d for d, s in enumerate(shape) if s != 1]
            if [v.type.shape[d] for d in src_dims] == [shape[d] for d in dst_dims] and self.coord[v.id] in src_dims:
                self.coord[out.id] = dst_dims[src_dims.index(self.coord[v.id])]
        return out

    def transpose(self, v: Value, perm) -> Value:
        perm = list(perm)
        if perm == list(range(len(perm))):
            return v
        out = self.emit("transpose", v, perm=perm)
        if v.id in self.coord:
            self.coord[out.id] = perm.index(self.coord[v.id])
        return out

    def convert(self, v: Value, dtype: str) -> Value:
        if v.type.dtype == dtype:
            return v
        if dtypes.is_float(v.type.dtype) and (dtypes.is_int(dtype) or dtype == "bool"):
            if dtype == "bool":  # float -> i1 is "x != 0"
                return self.emit("compare", v, self.broadcast(self.scalar(0, v.type.dtype), v.type.shape), direction="NE")
            v = self.emit("trunc", v)  # StableHLO float -> int conversion truncates toward zero
        out = self.emit("convert", v, dtype=dtype)
        if v.id in self.coord and dtypes.is_int(dtype):
            self.coord[out.id] = self.coord[v.id]
        return out

    def is_coordinate(self, v: Value, d: int) -> bool:
        """Whether ``v[i_0, ..., i_n] == i_d`` everywhere (an iota along d, however reshaped)."""
        if self.coord.get(v.id) == d:
            return True
        value = self.const.get(v.id)
        if value is None or d >= value.ndim:
            return False
        expect = np.arange(value.shape[d]).reshape([-1 if i == d else 1 for i in range(value.ndim)])
        return bool(np.array_equal(np.broadcast_to(expect, value.shape), value))

    def index_components(self, idx: Value, ivd: int, count: int) -> tuple[list[Value], tuple[int, ...]]:
        """Split gather/scatter indices into one integer tensor per indexed dim (batch shape each)."""
        shape = idx.type.shape
        if ivd == len(shape):
            return [idx], shape
        batch = shape[:ivd] + shape[ivd + 1:]
        parts = self.concat_parts.get(idx.id)
        if parts is not None and parts[0] == ivd and all(p.type.shape[ivd] == 1 for p in parts[1]):
            return [self.reshape(p, batch) for p in parts[1]], batch
        comps = []
        for i in range(count):
            start = [0] * len(shape)
            limit = list(shape)
            start[ivd], limit[ivd] = i, i + 1
            comps.append(self.reshape(self.emit("slice", idx, start=start, limit=limit, stride=[1] * len(shape)), batch))
        return comps, batch

    def linear_index(self, comps: list[Value], sizes: list[int]) -> Value:
        """Row-major linear index of several index components (sizes of the dims they index)."""
        total = comps[0]
        for comp, size in zip(comps[1:], sizes[1:]):
            scaled = self.emit("multiply", total, self.broadcast(self.scalar(size, total.type.dtype), total.type.shape))
            total = self.emit("add", scaled, self.convert(comp, total.type.dtype))
        return total


# --- handlers ------------------------------------------------------------------------------------------


def _elementwise(graph_op):
    def handle(self, op):
        return [self.emit(graph_op, *self.ins(op))]

    return handle


for _name, _graph_op in UNARY.items():
    HANDLERS[f"stablehlo.{_name}"] = _elementwise(_graph_op)
for _name, _graph_op in CHLO.items():
    HANDLERS[_name] = _elementwise(_graph_op)
for _name, _graph_op in BINARY.items():
    HANDLERS[f"stablehlo.{_name}"] = _elementwise(_graph_op)


@_handles("stablehlo.custom_call")
def _custom_call(self, op):
    """Only the calls our FX import makes: ``neuron.erf`` (an erf kept whole, see frontend.fx)."""
    target = mlir.string_value(op.attributes["call_target_name"]) if "call_target_name" in op.attributes else ""
    if target == "neuron.erf":
        return [self.emit("erf", *self.ins(op))]
    raise self.unsupported(f"custom call {target!r}")


@_handles("stablehlo.divide")
def _divide(self, op):
    a, b = self.ins(op)
    if dtypes.is_int(a.type.dtype):  # integer division truncates toward zero
        q = self.emit("trunc", self.emit("divide", a, b, dtype="float32"))
        return [self.emit("convert", q, dtype=a.type.dtype)]
    return [self.emit("divide", a, b)]


@_handles("stablehlo.shift_right_logical")
def _shift_right_logical(self, op):
    a, b = self.ins(op)
    if not a.type.dtype.startswith("uint") and a.type.dtype != "bool":
        raise self.unsupported("logical right shift of signed integers")
    return [self.emit("shift_right", a, b)]


@_handles("stablehlo.is_finite")
def _is_finite(self, op):
    (a,) = self.ins(op)
    inf = self.broadcast(self.scalar(np.inf, "float32"), a.type.shape)
    return [self.emit("compare", self.emit("abs", self.convert(a, "float32")), inf, direction="LT")]


@_handles("stablehlo.round_nearest_afz")
def _round_afz(self, op):
    (a,) = self.ins(op)
    half = self.broadcast(self.scalar(0.5, a.type.dtype), a.type.shape)
    mag = self.emit("floor", self.emit("add", self.emit("abs", a), half))
    return [self.emit("multiply", self.emit("sign", a), mag)]


@_handles("stablehlo.cbrt")
def _cbrt(self, op):
    (a,) = self.ins(op)
    third = self.broadcast(self.scalar(1.0 / 3.0, a.type.dtype), a.type.shape)
    return [self.emit("multiply", self.emit("sign", a), self.emit("power", self.emit("abs", a), third))]


@_handles("stablehlo.compare")
def _compare(self, op):
    a, b = self.ins(op)
    return [self.emit("compare", a, b, direction=mlir.enum_value(op.attributes["comparison_direction"]))]


@_handles("stablehlo.select")
def _select(self, op):
    pred, a, b = self.ins(op)
    return [self.emit("select", self.broadcast(pred, a.type.shape, [] if pred.type.rank == 0 else None), a, b)]


@_handles("stablehlo.clamp")
def _clamp(self, op):
    lo, x, hi = self.ins(op)
    out = x
    for bound, graph_op, skip in ((lo, "maximum", -np.inf), (hi, "minimum", np.inf)):
        value = self.const.get(bound.id)
        if value is not None and value.size and _is_extreme(value, x.type.dtype, skip):
            continue  # clamping to the dtype's range (torch-mlir's one-sided clamps) does nothing
        out = self.emit(graph_op, out, self.broadcast(bound, x.type.shape, [] if bound.type.rank == 0 else None))
    return [out]


def _is_extreme(value: np.ndarray, dtype: str, which: float) -> bool:
    if dtypes.is_int(dtype):
        info = np.iinfo(dtypes.to_numpy(dtype))
        limit = info.min if which < 0 else info.max
        return bool(np.all(value.astype(np.float64) <= limit if which < 0 else value.astype(np.float64) >= limit))
    return bool(np.all(value == which))


@_handles("stablehlo.convert")
def _convert(self, op):
    (a,) = self.ins(op)
    return [self.convert(a, self.rtype(op).dtype)]


@_handles("stablehlo.bitcast_convert")
def _bitcast_convert(self, op):
    (a,) = self.ins(op)
    source, result = mlir.tensor_type(op.operands[0].type), mlir.tensor_type(op.results[0].type)
    if self.narrowing and "float64" in (source.dtype, result.dtype):
        raise self.unsupported("the bytes of a float64 (narrowed to float32 on import: they are not kept)")
    return [self.emit("bitcast_convert", a, dtype=result.dtype)]


@_handles("stablehlo.optimization_barrier")
def _barrier(self, op):
    return self.ins(op)


@_handles("stablehlo.constant", "arith.constant")
def _constant(self, op):
    declared, t = mlir.tensor_type(op.results[0].type), self.rtype(op)
    value = mlir.constant_value(op.attributes["value"], declared, self.blobs)
    value = value if declared == t else dtypes.convert(value, t.dtype)
    flat = np.asarray(value).reshape(-1)
    if flat.size > 1 and np.all(flat == flat[0]):
        # A splat (torch-mlir writes erf's coefficients as full-shape constants): one scalar
        # broadcast, not a tensor in HBM that every tile would load (and every hash would encode).
        return [self.broadcast(self.scalar(flat[0], t.dtype), t.shape, [])]
    return [self.constant(value, t.dtype)]


@_handles("tensor.empty")
def _empty(self, op):  # uninitialized memory: zeros are one valid content
    t = self.rtype(op)
    return [self.broadcast(self.scalar(0, t.dtype), t.shape, [])]


@_handles("stablehlo.iota", "stablehlo.dynamic_iota")
def _iota(self, op):
    t = self.rtype(op)
    return [self.emit("iota", shape=t.shape, dim=mlir.int_attr(op.attributes["iota_dimension"]), dtype=t.dtype)]


@_handles("stablehlo.get_dimension_size")
def _dimension_size(self, op):
    (a,) = self.ins(op)
    return [self.scalar(a.type.shape[mlir.int_attr(op.attributes["dimension"])], self.rtype(op).dtype)]


@_handles("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(self, op):
    (a,) = self.ins(op)
    return [self.broadcast(a, self.rtype(op).shape, mlir.int_list(op.attributes["broadcast_dimensions"]))]


@_handles("stablehlo.reshape")
def _reshape(self, op):
    (a,) = self.ins(op)
    return [self.reshape(a, self.rtype(op).shape)]


@_handles("stablehlo.transpose")
def _transpose(self, op):
    (a,) = self.ins(op)
    return [self.transpose(a, mlir.int_list(op.attributes["permutation"]))]


@_handles("stablehlo.slice")
def _slice(self, op):
    (a,) = self.ins(op)
    start = mlir.int_list(op.attributes["start_indices"])
    limit = mlir.int_list(op.attributes["limit_indices"])
    stride = mlir.int_list(op.attributes["strides"]) if "strides" in op.attributes else [1] * len(start)
    if start == [0] * len(start) and limit == list(a.type.shape) and set(stride) <= {1}:
        return [a]
    return [self.emit("slice", a, start=start, limit=limit, stride=stride)]


@_handles("stablehlo.concatenate")
def _concatenate(self, op):
    parts = self.ins(op)
    dim = mlir.int_attr(op.attributes["dimension"])
    out = parts[0] if len(parts) == 1 else self.emit("concatenate", *parts, dim=dim)
    self.concat_parts[out.id] = (dim, parts)
    return [out]


@_handles("stablehlo.reverse")
def _reverse(self, op):
    (a,) = self.ins(op)
    for d in mlir.int_list(op.attributes["dimensions"]):
        index = self.constant(np.arange(a.type.shape[d] - 1, -1, -1, dtype=np.int32), "int32")
        a = self.emit("gather", a, index, axis=d)
    return [a]


@_handles("stablehlo.pad")
def _pad(self, op):
    a, pad_value = self.ins(op)
    low = mlir.int_list(op.attributes["edge_padding_low"])
    high = mlir.int_list(op.attributes["edge_padding_high"])
    interior = mlir.int_list(op.attributes["interior_padding"])
    value = self.const.get(pad_value.id)
    if value is None:
        raise self.unsupported("the padding value is not a constant")
    value = value.reshape(()).item()
    for d, k in enumerate(interior):  # interior padding: interleave k padding elements (reshape + pad + slice)
        if k:
            shape = a.type.shape
            split = self.reshape(a, shape[: d + 1] + (1,) + shape[d + 1:])
            padded = self.emit("pad", split, low=[0] * (len(shape) + 1), high=[k if i == d + 1 else 0 for i in range(len(shape) + 1)],
                               value=value)
            merged = self.reshape(padded, shape[:d] + (shape[d] * (k + 1),) + shape[d + 1:])
            limit = list(merged.type.shape)
            limit[d] -= k
            a = self.emit("slice", merged, start=[0] * len(shape), limit=limit, stride=[1] * len(shape))
    if any(x < 0 for x in low + high):  # negative edge padding crops
        start = [max(0, -x) for x in low]
        limit = [s - max(0, -x) for s, x in zip(a.type.shape, high)]
        a = self.emit("slice", a, start=start, limit=limit, stride=[1] * len(start))
        low, high = [max(0, x) for x in low], [max(0, x) for x in high]
    if any(low) or any(high):
        a = self.emit("pad", a, low=low, high=high, value=value)
    return [a]


def _constant_starts(self, values: list[Value], shape, sizes) -> list[int]:
    starts = []
    for v, dim, size in zip(values, shape, sizes):
        if v.id not in self.const:
            raise self.unsupported("start indices are not constants")
        starts.append(min(max(int(self.const[v.id].reshape(())), 0), dim - size))  # StableHLO clamps starts
    return starts


@_handles("stablehlo.dynamic_slice")
def _dynamic_slice(self, op):
    a, *starts = self.ins(op)
    sizes = mlir.int_list(op.attributes["slice_sizes"])
    start = _constant_starts(self, starts, a.type.shape, sizes)
    return [self.emit("slice", a, start=start, limit=[s + n for s, n in zip(start, sizes)], stride=[1] * len(start))]


@_handles("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(self, op):
    a, update, *starts = self.ins(op)
    start = _constant_starts(self, starts, a.type.shape, update.type.shape)

    def place(base: Value, upd: Value, dim: int) -> Value:
        if dim == base.type.rank:
            return upd
        shape, rank = base.type.shape, base.type.rank
        s, n = start[dim], upd.type.shape[dim]

        def cut(lo, hi):
            st, lim = [0] * rank, list(shape)
            st[dim], lim[dim] = lo, hi
            return self.emit("slice", base, start=st, limit=lim, stride=[1] * rank)

        middle = place(cut(s, s + n) if (s, n) != (0, shape[dim]) else base, upd, dim + 1)
        pieces = ([cut(0, s)] if s else []) + [middle] + ([cut(s + n, shape[dim])] if s + n < shape[dim] else [])
        return pieces[0] if len(pieces) == 1 else self.emit("concatenate", *pieces, dim=dim)

    return [place(a, update, 0)]


@_handles("stablehlo.dot_general", "stablehlo.dot")
def _dot_general(self, op):
    lhs, rhs = self.ins(op)
    if op.name == "stablehlo.dot":
        dn = {"lhs_contracting_dimensions": [lhs.type.rank - 1], "rhs_contracting_dimensions": [0]}
    else:
        dn = mlir.struct_fields(op.attributes["dot_dimension_numbers"])
    return [self.emit("dot_general", lhs, rhs, lhs_batch=dn.get("lhs_batching_dimensions", []),
                      rhs_batch=dn.get("rhs_batching_dimensions", []), lhs_contract=dn.get("lhs_contracting_dimensions", []),
                      rhs_contract=dn.get("rhs_contracting_dimensions", []), dtype=self.rtype(op).dtype)]


# --- reductions ---------------------------------------------------------------------------------------


def _body(op):
    block = op.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    return list(block.arguments), ops[:-1], ops[-1]


def _is_identity(value: np.ndarray, kind: str, dtype: str) -> bool:
    v = value.reshape(()).item()
    if kind == "sum":
        return v == 0
    if kind == "prod":
        return v == 1
    if kind in ("and", "or"):
        return bool(v) == (kind == "and")
    if (dtype.startswith("uint") or dtype == "bool") and kind in ("max", "min"):
        # torch-mlir 20261001 starts max/min reductions of unsigned types at the *signed* extremes
        # (uint8: 128 and 127, the bits of -128 and 127; bool: true and false, -1 and 0 as i1):
        # meant as the identity, taken as such - combined, they would clip every result to that
        # value (amax of a uint8 tensor gave 128, of a bool tensor True).
        bits = 1 if dtype == "bool" else 8 * dtypes.itemsize(dtype)
        if int(v) == (1 << (bits - 1) if kind == "max" else (1 << (bits - 1)) - 1):
            return True
    return _is_extreme(np.asarray(v), dtype, -np.inf if kind == "max" else np.inf)


@_handles("stablehlo.reduce")
def _reduce(self, op):
    operands = self.ins(op)
    n = len(operands) // 2
    inputs, inits = operands[:n], operands[n:]
    dims = mlir.int_list(op.attributes["dimensions"])
    args, body, ret = _body(op)
    kinds = []
    for i, r in enumerate(ret.operands):
        owner = r.owner if isinstance(r, self.ir.OpResult) else None
        kind = REDUCE_BODIES.get(owner.name) if owner is not None else None
        if kind is None or len(body) != n or {a for a in owner.operands} != {args[i], args[i + n]}:
            kinds = None
            break
        kinds.append(kind)
    if kinds is None:
        return _reduce_arg(self, op, inputs, dims, body)
    results = []
    for x, init, kind, rt in zip(inputs, inits, kinds, [self.rtype(op, i) for i in range(n)]):
        if kind in ("and", "or") and x.type.dtype != "bool":
            raise self.unsupported(f"bitwise {kind}-reduction of {x.type.dtype} (logical reductions of i1 only)")
        out = _leading_sum(self, x, dims) if kind == "sum" else None
        if out is None:
            out = self.emit("reduce", x, kind=kind, dims=dims, keepdims=False)
        value = self.const.get(init.id)
        if value is None or not _is_identity(value, kind, x.type.dtype):
            out = self.emit(_COMBINE[kind], out, self.broadcast(init, rt.shape, []))
        results.append(out)
    return results


# A float32 sum over a few leading dims of a large tensor (the batch sum of a bias or position-
# embedding gradient): as a chain of adds of whole rows. The reduce lowering puts the reduced axis
# on the free dim, which for a leading axis means element-sized DMA reads (170 us for [8, 128, 256]
# over dim 0); row adds are contiguous loads and one VectorE pass each, in CPU's order (row 0 + row
# 1 + ..., so the same fp32 roundings as CPU's outer-dim reduction).
_LEADING_SUM_MAX_ROWS = 32
_LEADING_SUM_MIN_ROW = 512


def _leading_sum(self, x, dims):
    shape = list(x.type.shape)
    if x.type.dtype != "float32" or sorted(dims) != list(range(len(dims))) or not dims:
        return None
    rows, rest = int(np.prod(shape[: len(dims)])), shape[len(dims):]
    if not 2 <= rows <= _LEADING_SUM_MAX_ROWS or int(np.prod(rest)) < _LEADING_SUM_MIN_ROW:
        return None
    flat = self.emit("reshape", x, shape=(rows, *rest))
    out = None
    for r in range(rows):
        row = self.emit("slice", flat, start=[r] + [0] * len(rest), limit=[r + 1] + rest, stride=[1] * (len(rest) + 1))
        row = self.emit("reshape", row, shape=tuple(rest))
        out = row if out is None else self.emit("add", out, row)
    return out


def _reduce_arg(self, op, inputs, dims, body):
    """argmax/argmin: a reduce over (values, iota along the reduced dim) whose body compares the
    values and selects (value, index) pairs."""
    compares = [o for o in body if o.name == "stablehlo.compare"]
    direction = mlir.enum_value(compares[0].attributes["comparison_direction"]) if compares else None
    if len(inputs) != 2 or len(dims) != 1 or direction not in ("GE", "GT", "LE", "LT") or not self.is_coordinate(inputs[1], dims[0]):
        names = ", ".join(o.name for o in body)
        raise self.unsupported(f"reduce body ({names}) is not a single add/max/min/mul/and/or per operand nor an argmax/argmin")
    values, index = inputs
    kind, arg = ("max", "argmax") if direction in ("GE", "GT") else ("min", "argmin")
    return [self.emit("reduce", values, kind=kind, dims=dims, keepdims=False),
            self.emit(arg, values, dim=dims[0], keepdims=False, dtype=self.rtype(op, 1).dtype)]


@_handles("stablehlo.sort")
def _sort(self, op):
    """torch.sort / argsort / topk as torch-mlir emits them: a sort of (values, iota along the dim)
    whose comparator is one ``LT`` (ascending) or ``GT`` (descending) of the first operand's pair.
    The graph orders the values once (``argsort``, PyTorch's stable order: NaN above every number,
    -0.0 equal to 0.0 - what CPU returns, where the comparator alone leaves NaN unordered) and every
    result is its operand gathered by those positions (a move: exact for every dtype)."""
    operands = self.ins(op)
    dim = mlir.int_attr(op.attributes["dimension"]) % max(operands[0].type.rank, 1)
    args, body, ret = _body(op)
    compare = body[0] if len(body) == 1 else None
    direction = mlir.enum_value(compare.attributes["comparison_direction"]) if compare is not None and \
        compare.name == "stablehlo.compare" else None
    if (direction not in ("LT", "GT") or list(compare.operands) != [args[0], args[1]]
            or list(ret.operands) != [compare.results[0]]):
        names = ", ".join(o.name for o in body)
        raise self.unsupported(f"sort comparator ({names}) is not one LT/GT of the first operand's elements "
                               "(the form torch-mlir gives torch.sort, argsort and topk)")
    x = operands[0]
    index_dtype = next((v.type.dtype for v in operands[1:] if self.is_coordinate(v, dim)), "int32")
    if not dtypes.is_int(index_dtype):
        index_dtype = "int32"
    if x.type.rank == 0 or x.type.shape[dim] <= 1:
        return operands  # nothing to reorder
    order = self.emit("argsort", x, dim=dim, descending=direction == "GT", dtype=index_dtype)
    return [order if self.is_coordinate(v, dim) and v.type.dtype == index_dtype
            else self.emit("take_along_axis", v, order, axis=dim) for v in operands]


@_handles("stablehlo.reduce_window")
def _reduce_window(self, op):
    """cumsum: an add-window covering the whole dim, padded by n-1 in front (torch-mlir's aten.cumsum)."""
    operands = self.ins(op)
    if len(operands) != 2:
        raise self.unsupported("reduce_window of several operands")
    x, init = operands
    rank = x.type.rank
    window = mlir.int_list(op.attributes["window_dimensions"])
    ones = [1] * rank
    strides = mlir.int_list(op.attributes["window_strides"]) if "window_strides" in op.attributes else ones
    dilations = [mlir.int_list(op.attributes[k]) if k in op.attributes else ones for k in ("base_dilations", "window_dilations")]
    padding = (np.array(mlir.int_list(op.attributes["padding"])).reshape(rank, 2).tolist() if "padding" in op.attributes
               else [[0, 0]] * rank)
    _, body, ret = _body(op)
    kind = REDUCE_BODIES.get(body[0].name) if len(body) == 1 else None
    dims = [d for d in range(rank) if window[d] != 1]
    init_value = self.const.get(init.id)
    if (not dims and strides == ones and padding == [[0, 0]] * rank and init_value is not None
            and kind is not None and _is_identity(init_value, kind, x.type.dtype)):
        return [x]  # a window of one element: each output is its input (cumsum over a dim of size 1)
    if (kind == "sum" and len(dims) == 1 and strides == ones and dilations == [ones, ones] and init_value is not None
            and _is_identity(init_value, "sum", x.type.dtype)):
        d = dims[0]
        n = x.type.shape[d]
        if window[d] == n and padding[d] == [n - 1, 0] and all(padding[i] == [0, 0] for i in range(rank) if i != d):
            return [self.emit("cumsum", x, dim=d)]
    raise self.unsupported("only the cumulative-sum window (torch.cumsum) has a graph form; pooling windows do not")


# --- gather and scatter ---------------------------------------------------------------------------------


def _permute_to(labels_have: list, labels_want: list) -> list[int]:
    return [labels_have.index(x) for x in labels_want]


@_handles("stablehlo.gather")
def _gather(self, op):
    src, idx = self.ins(op)
    dn = mlir.struct_fields(op.attributes["dimension_numbers"])
    sizes = mlir.int_list(op.attributes["slice_sizes"])
    offset_dims, collapsed = dn.get("offset_dims", []), dn.get("collapsed_slice_dims", [])
    start_map, ivd = dn.get("start_index_map", []), dn.get("index_vector_dim", idx.type.rank)
    if dn.get("operand_batching_dims") or dn.get("start_indices_batching_dims"):
        raise self.unsupported("gather with batching dims")
    window = [d for d in range(src.type.rank) if d not in start_map]
    if sorted(collapsed) != sorted(start_map) or any(sizes[d] != 1 for d in start_map) or any(
            sizes[d] != src.type.shape[d] for d in window):
        raise self.unsupported("only gathers of whole slices along the indexed dims (embedding, index_select, "
                               "torch.gather, tensor indexing) have a graph form")
    comps, batch = self.index_components(idx, ivd, len(start_map))
    nb = len(batch)
    # the result's dims, labelled: ("b", i) batch dim i, ("w", d) window of operand dim d
    result_labels = [None] * (nb + len(window))
    for pos, d in zip(offset_dims, window):
        result_labels[pos] = ("w", d)
    free = iter(range(nb))
    result_labels = [x if x is not None else ("b", next(free)) for x in result_labels]

    if not window and nb == src.type.rank:  # torch.gather: every index but one is an iota
        free_comps = [i for i, d in enumerate(start_map) if not self.is_coordinate(comps[i], d)]
        if len(free_comps) == 1:
            axis = start_map[free_comps[0]]
            return [self.emit("take_along_axis", src, comps[free_comps[0]], axis=axis)]
    if len(start_map) == 1:  # embedding / index_select along one dim
        a = start_map[0]
        out = self.emit("gather", src, comps[0], axis=a)
        have = [("w", d) for d in window if d < a] + [("b", i) for i in range(nb)] + [("w", d) for d in window if d > a]
    else:  # several indexed dims: gather rows of the operand with those dims flattened into one
        flat = self.transpose(src, start_map + window)
        flat = self.reshape(flat, (math.prod(src.type.shape[d] for d in start_map),) + tuple(src.type.shape[d] for d in window))
        out = self.emit("gather", flat, self.linear_index(comps, [src.type.shape[d] for d in start_map]), axis=0)
        have = [("b", i) for i in range(nb)] + [("w", d) for d in window]
    return [self.transpose(out, _permute_to(have, result_labels))]


@_handles("stablehlo.scatter")
def _scatter(self, op):
    operands = self.ins(op)
    if len(operands) != 3:
        raise self.unsupported("scatter of several operands at once")
    operand, idx, updates = operands
    dn = mlir.struct_fields(op.attributes["scatter_dimension_numbers"])
    update_window, inserted = dn.get("update_window_dims", []), dn.get("inserted_window_dims", [])
    sd2od, ivd = dn.get("scatter_dims_to_operand_dims", []), dn.get("index_vector_dim", idx.type.rank)
    if dn.get("input_batching_dims") or dn.get("scatter_indices_batching_dims"):
        raise self.unsupported("scatter with batching dims")
    args, body, ret = _body(op)
    result = ret.operands[0]
    if result == args[1] and not body:
        mode = "set"
    elif (isinstance(result, self.ir.OpResult) and result.owner.name == "stablehlo.add" and len(body) == 1
          and {a for a in result.owner.operands} == {args[0], args[1]}):
        mode = "add"
    else:
        raise self.unsupported(f"scatter body ({', '.join(o.name for o in body) or 'returns the old value'}) "
                               "is neither an update (set) nor an add")
    window = [d for d in range(operand.type.rank) if d not in sd2od]
    if sorted(inserted) != sorted(sd2od):
        raise self.unsupported("scatter whose indexed dims are not all inserted window dims")
    comps, batch = self.index_components(idx, ivd, len(sd2od))
    nb = len(batch)
    # updates' dims, labelled as in gather
    upd_labels = [None] * updates.type.rank
    for pos, d in zip(update_window, window):
        upd_labels[pos] = ("w", d)
    if any(updates.type.shape[pos] != operand.type.shape[d] for pos, d in zip(update_window, window)):
        raise self.unsupported("scatter of partial windows")
    free = iter(range(nb))
    upd_labels = [x if x is not None else ("b", next(free)) for x in upd_labels]

    if not window and nb == operand.type.rank:  # torch scatter / scatter_add: every index but one is an iota
        free_comps = [i for i, d in enumerate(sd2od) if not self.is_coordinate(comps[i], d)]
        if len(free_comps) == 1:
            axis = sd2od[free_comps[0]]
            return [self.emit("scatter", operand, comps[free_comps[0]], updates, axis=axis, mode=mode)]
    n = math.prod(batch)
    if len(sd2od) == 1:  # index_add / index_put along one dim
        a = sd2od[0]
        want = [("w", d) for d in window if d < a] + [("b", i) for i in range(nb)] + [("w", d) for d in window if d > a]
        src = self.transpose(updates, _permute_to(upd_labels, want))
        src_shape = operand.type.shape[:a] + (n,) + operand.type.shape[a + 1:]
        src = self.reshape(src, src_shape)
        index = self.reshape(comps[0], (n,))
        return [_scatter_rows(self, operand, index, src, a, mode)]
    # several indexed dims: scatter into the operand with those dims flattened into one
    perm = sd2od + window
    flat = self.reshape(self.transpose(operand, perm),
                        (math.prod(operand.type.shape[d] for d in sd2od),) + tuple(operand.type.shape[d] for d in window))
    src = self.transpose(updates, _permute_to(upd_labels, [("b", i) for i in range(nb)] + [("w", d) for d in window]))
    src = self.reshape(src, (n,) + tuple(operand.type.shape[d] for d in window))
    index = self.reshape(self.linear_index(comps, [operand.type.shape[d] for d in sd2od]), (n,))
    out = _scatter_rows(self, flat, index, src, 0, mode)
    out = self.reshape(out, tuple(operand.type.shape[d] for d in perm))
    return [self.transpose(out, [perm.index(d) for d in range(operand.type.rank)])]


def _scatter_rows(self, operand: Value, index: Value, src: Value, axis: int, mode: str) -> Value:
    if mode == "add":
        return self.emit("index_add", operand, index, src, axis=axis, alpha=1.0)
    # set: torch.scatter with the row index repeated along the other dims
    return self.emit("scatter", operand, self.broadcast(index, src.type.shape, [axis]), src, axis=axis, mode="set")


# --- calls ----------------------------------------------------------------------------------------------


@_handles("func.call")
def _call(self, op):
    callee = str(op.attributes["callee"]).lstrip("@").strip('"')
    funcs = self.functions()
    if callee not in funcs:
        raise self.unsupported(f"call of unknown function @{callee}")
    caller = self.op
    outs = self.import_body(funcs[callee], self.ins(op))
    self.op = caller
    return outs


def _drop_dead_nodes(graph: Graph) -> None:
    live = {v.id for v in graph.outputs}
    kept = []
    for node in reversed(graph.nodes):
        if any(v.id in live for v in node.outputs):
            kept.append(node)
            live.update(v.id for v in node.inputs)
    graph.nodes = kept[::-1]
