"""Compiling one op signature into a launchable NEFF (the slow path, once per signature).

What the call must produce comes from the op's meta kernel on the call's own shapes and strides,
so results have CPU's shapes, dtypes and strides (and bad arguments raise CPU's errors). A
mutating overload (``add_``, ``add.out``, ``_foreach_mul_``) is compiled as its functional
overload followed by a cast to each written tensor's dtype; whether the results are written
straight into those tensors or through a temporary is decided per call (``in_place``), from the
aliasing facts the compiler records in the NEFF and how the call's tensors alias.
"""

from __future__ import annotations

import torch
from neuronxcc.compiler import INEXACT_INTEGER, CompileError
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..ops import stand_ins
from ..ops.fallback import as_cpu_kernel_returns
from ..ops.schema import argument, arguments_by_name, mutated_arguments, with_argument
from .dtypes import NotLowerable, sim_dtype
from .empty import EmptyOperand
from .entry import CompiledNeff, OutputSpec
from .tracing import dense_permutation, graph_for, is_row_major, row_major_strides, storage_span
from .variants import COMPUTE_IN_OUT_DTYPE, RUNTIME_SCALARS, functional_variant


class CpuRefuses(NotLowerable):
    """CPU's kernel refuses this call's arguments (on stand-ins of any values): the call runs on
    CPU at once, which raises CPU's error at the call."""


def _meta(x):
    if getattr(x, "_tnx_wrapped_number", False):
        return x.item()  # a number for a Tensor argument promotes as a number, not as a 0-d tensor
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


def _for_trace(x):
    if isinstance(x, torch.device):
        return torch.device("cpu")  # factories: make_fx builds on CPU
    if getattr(x, "_tnx_wrapped_number", False):
        return x.item()  # traced as the number it is: the op wraps it again and promotes it as one
    if isinstance(x, torch.Tensor) and x.device.type == "cpu":  # a host 0-dim operand: its value is in the key
        return _HostScalar(x.item(), x.dtype)
    if isinstance(x, torch.Tensor) and x.numel() == 0:  # no values, no buffer: its layout is in the key
        return _HostEmpty(tuple(x.shape), tuple(x.stride()), x.dtype)
    return x


class _HostScalar:
    """A host 0-dim tensor operand, re-made inside the trace (a constant of the graph)."""

    def __init__(self, value, dtype):
        self.value, self.dtype = value, dtype

    def make(self):
        return torch.full((), self.value, dtype=self.dtype)


class _HostEmpty:
    """An empty device operand, re-made inside the trace (it holds nothing a buffer would carry)."""

    def __init__(self, shape, strides, dtype):
        self.shape, self.strides, self.dtype = shape, strides, dtype

    def make(self):
        return torch.empty_strided(self.shape, self.strides, dtype=self.dtype)


def _meta_tree(value, made: dict):
    """``value`` for the meta kernel: one meta tensor per tensor object, so the meta kernel sees
    the call's aliasing (an out= tensor that is also an input)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_meta_tree(v, made) for v in value)
    if isinstance(value, torch.Tensor):
        if id(value) not in made:
            made[id(value)] = _meta(value)
        return made[id(value)]
    return _meta(value)


def build(op, args, kwargs, tensors: list[torch.Tensor], arch, compile_graph) -> CompiledNeff:
    """Trace, import and compile (``compile_graph(graph, arch) -> Neff``) ``op`` for this call."""
    mutated = mutated_arguments(op)
    functional = functional_variant(op) if mutated else op
    if functional is None:
        raise NotLowerable(f"{op} writes {mutated} and has no functional overload")
    drop = set(mutated) if mutated and not op._schema.name.endswith("_") else set()  # out= arguments
    runtime = RUNTIME_SCALARS.get(functional)
    if runtime is not None and not isinstance(argument(op, args, kwargs, runtime[0]), torch.Tensor):
        runtime = None  # the Scalar is a compile-time constant in this call
    if runtime is not None:
        functional = runtime[1]
    functional_kwargs = {n: v for n, v in kwargs.items() if n not in drop}
    if f"{op._schema.name}.{op._overloadname}" in COMPUTE_IN_OUT_DTYPE and argument(op, args, kwargs, "dtype") is None:
        functional_kwargs["dtype"] = argument(op, args, kwargs, mutated[0]).dtype
    flat, spec = tree_flatten((args, functional_kwargs))
    positions = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor) and x.device.type != "cpu" and x.numel()]
    specs = [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors]

    made: dict = {}
    meta_args = tuple(_meta_tree(a, made) for a in args)
    meta_kwargs = {n: _meta_tree(v, made) for n, v in kwargs.items()}
    # CPU's kernel takes the number where the call holds a 0-d input, as the meta kernel does
    if runtime is not None:  # the number the meta and CPU kernels take in its place (a Scalar[]: one each)
        scalars = argument(op, args, kwargs, runtime[0])
        placeholder = 1.0 if scalars.dim() == 0 else [1.0] * scalars.numel()
    cpu_args, cpu_kwargs = (args, kwargs) if runtime is None else with_argument(op, args, kwargs, runtime[0], placeholder)
    if runtime is not None:
        meta_args, meta_kwargs = with_argument(op, meta_args, meta_kwargs, runtime[0], placeholder)
    try:
        meta_result = op(*meta_args, **meta_kwargs)  # out= tensors are resized here
    except (NotImplementedError, RuntimeError, IndexError, ValueError) as err:
        if _cpu_checks(op, cpu_args, cpu_kwargs, 0) is not None or "meta" in str(err).lower() or "data-dependent" in str(err):
            # CPU's kernel accepts the call: the meta kernel is what fails
            raise NotLowerable(f"{op} has no usable meta kernel: {str(err).splitlines()[0]}") from None
        raise  # the op's own argument checks, reported at the call as CPU does
    cpu = _cpu_checks(op, cpu_args, cpu_kwargs, sum(_nbytes(x) for x in tree_flatten(meta_result)[0]))
    meta_result = as_cpu_kernel_returns(op, args, kwargs, meta_result)  # where CPU's kernel differs from meta
    _, out_spec = tree_flatten(meta_result)
    if mutated:  # the written tensors as CPU's kernel left them (resized with CPU's strides)
        by_name = arguments_by_name(op, *(cpu[:2] if cpu is not None else (meta_args, meta_kwargs)))
        produced, _ = tree_flatten([by_name[n] for n in mutated])
    else:
        produced, _ = tree_flatten(meta_result)
        if cpu is not None:
            produced = _with_cpus_layouts(produced, tree_flatten(cpu[2])[0])
    if any(x is not None and not isinstance(x, torch.Tensor) for x in produced):
        raise NotLowerable(f"{op} returns non-tensor values")
    written_dtypes = [x.dtype for x in produced] if mutated else None

    traced = [_for_trace(x) for x in flat]
    # An in-place op's written tensor j is the input at flat position sources[j]; a result that is
    # that very input (a fused optimizer's gradients when there is no grad scale) is left as it is.
    sources = _written_sources(op, args, kwargs, mutated, flat) if mutated and not drop else None
    unchanged: list[int] = []
    # Empty results hold no values and need no buffer: made at launch, beside the kernel's outputs
    # (the saved mean and invstd of a batch norm in eval are [0]). If all are empty, no kernel runs.
    empty = {i: OutputSpec(tuple(x.shape), tuple(x.stride()), x.dtype, 0) for i, x in enumerate(produced)
             if not mutated and isinstance(x, torch.Tensor) and x.numel() == 0}
    if empty and all(x is None or i in empty for i, x in enumerate(produced)):
        raise EmptyOperand("only empty results")
    kept = [x for i, x in enumerate(produced) if i not in empty]

    def call(*inputs):
        values = [x.make() if isinstance(x, (_HostScalar, _HostEmpty)) else x for x in traced]
        for pos, t in zip(positions, inputs):
            values[pos] = t
        a, k = tree_unflatten(values, spec)
        results, _ = tree_flatten(functional(*a, **k))
        unchanged.clear()
        if sources is not None:
            for j, (r, pos) in enumerate(zip(results, sources)):
                if pos is not None and r is values[pos]:
                    unchanged.append(j)
                    results[j] = None
        if written_dtypes is not None:  # written tensors keep their dtype: results are cast on the way in
            results = [r if r is None or r.dtype == d else r.to(d) for r, d in zip(results, written_dtypes)]
        return [r for i, r in enumerate(results) if i not in empty]

    name = op._schema.name.split("::", 1)[1] + ("" if op._overloadname == "default" else "_" + op._overloadname)
    output_perms = _output_perms(kept)
    graph, none_positions = graph_for(call, specs, output_perms, name)
    none_positions = [p for p in none_positions if p not in unchanged]
    outputs, perms = [], []
    for j, x in enumerate(kept):
        if x is None or j in unchanged:
            continue
        shape, strides, perm = tuple(x.shape), tuple(x.stride()), output_perms[j]
        if perm is None and not is_row_major(shape, strides):
            strides = row_major_strides(shape)  # overlapping or gapped: a contiguous result
        sim_dtype(x.dtype)
        nbytes = storage_span(shape, strides) * x.element_size()
        if nbytes == 0:
            raise EmptyOperand("an empty result")
        outputs.append(OutputSpec(shape, strides, x.dtype, nbytes))
        perms.append(perm)

    if len(none_positions) + len(unchanged) + len(outputs) != len(kept) or len(graph.outputs) != len(outputs) \
            or any(kept[p] is not None for p in none_positions):
        raise NotLowerable(f"{op}: the traced results do not match its meta results")
    for value, spec, perm in zip(graph.outputs, outputs, perms):
        shape = tuple(spec.shape[p] for p in perm) if perm is not None else spec.shape
        if tuple(value.type.shape) != shape or value.type.dtype != sim_dtype(spec.dtype):
            # Never write one type's bytes into another's buffer: run this call on CPU instead.
            raise NotLowerable(f"{op}: traced result {value.type} differs from CPU's {list(spec.shape)} {spec.dtype}")
    try:
        neff = compile_graph(graph, arch)
    except CompileError as err:
        if err.rule == INEXACT_INTEGER:  # the compiler's verdict: no engine gives CPU's integers here
            raise NotLowerable(f"{op}: {err.detail}") from None
        raise
    return CompiledNeff(
        neff=neff,
        in_nbytes=[storage_span(s, st) * d.itemsize for s, st, d in specs],
        outputs=outputs,
        none_positions=none_positions,
        empty_outputs=sorted(empty.items()),
        out_spec=out_spec,
        mutated=mutated,
        unchanged=list(unchanged),
    )


def _written_sources(op, args, kwargs, mutated, flat) -> list:
    """For each tensor an in-place call writes, its position among the flattened arguments."""
    by_name = arguments_by_name(op, args, kwargs)
    written, _ = tree_flatten([by_name[n] for n in mutated])
    return [next((p for p, x in enumerate(flat) if x is w), None) if isinstance(w, torch.Tensor) else None
            for w in written if w is not None]


def _output_perms(produced: list) -> list:
    """The dim order of each result's buffer (None: row-major, or no result)."""
    perms = []
    for x in produced:
        shape, strides = (tuple(x.shape), tuple(x.stride())) if x is not None else ((), ())
        perms.append(None if x is None or is_row_major(shape, strides) else dense_permutation(shape, strides))
    return perms


def _with_cpus_layouts(results: list, cpu_results: list) -> list:
    """The meta results with the strides of CPU's results of the same shape and dtype: meta
    kernels give some results another layout than CPU's kernel (``0.5 ** x`` of a permuted ``x``
    is contiguous on CPU, floor division takes its first operand's layout)."""
    if len(results) != len(cpu_results):
        return results
    return [torch.empty_strided(c.shape, c.stride(), dtype=m.dtype, device="meta")
            if isinstance(m, torch.Tensor) and isinstance(c, torch.Tensor) and m.shape == c.shape and m.dtype == c.dtype
            and m.stride() != c.stride() else m for m, c in zip(results, cpu_results)]


def _nbytes(x) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _cpu_checks(op, args, kwargs, result_bytes: int):
    """CPU's kernel over stand-ins of the call (``stand_ins.probe``): the stand-in arguments after
    the call, or None if they and the ``result_bytes`` CPU's results take are too large to make. Raises CpuRefuses if CPU refuses the arguments - meta
    kernels accept some that CPU refuses (a softmax dim out of range, whose lowering then ran for
    minutes), raise other errors, or resize what CPU does not - and for dtypes CPU lacks (argmax
    of bool)."""
    try:
        return stand_ins.probe(op, args, kwargs, result_bytes)
    except Exception as err:  # noqa: BLE001 - whatever CPU says, it says it for this signature
        raise CpuRefuses(f"{op} fails on CPU for these arguments: {type(err).__name__}: {str(err).splitlines()[0][:200]}") from None
