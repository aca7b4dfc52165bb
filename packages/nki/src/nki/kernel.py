"""nki.jit: a kernel is traced once per call signature into simulator programs, then executed.

Tracing runs the kernel body with NkiTensor stand-ins for its array arguments (HBM tensors named
after the parameters). A launch grid ``kernel[n]`` traces one instance per program id: ``kernel[2]``
is LNC=2 (two physical cores sharing HBM, running in parallel); larger or multi-dimensional grids
are the legacy SPMD form, whose instances run one after another on one core.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
from dataclasses import dataclass, field

from neuron_sim import Architecture, Program, dtypes, get_architecture
from neuron_sim.isa import LoopStart
from neuron_sim.program import TensorDecl
from neuron_sim.timing import program_timing

from . import arrays, tracing
from .errors import NkiError, NkiValidationError
from .language.objects import NKIObject
from .language.objects import fields as object_fields
from .language.spmd import grid_layout, physical_core
from .launch import run
from .storage import Storage, hbm_storage
from .tensor import NkiTensor


@dataclass
class CompiledKernel:
    """The traced form of one call signature."""

    programs: list[Program]  # one per physical core (two for LNC=2); legacy grids are one program
    params: dict[int, str]  # positional index of an array argument -> HBM tensor name
    kw_params: dict[str, str]  # keyword argument -> HBM tensor name
    returned: object  # the return structure with tensor names in place of tensors
    arch: Architecture
    prints: tuple = ()  # nl.device_print calls: (prefix, HBM tensor the values land in), in trace order
    constants: dict = field(default_factory=dict)  # nl.shared_constant tensors: name -> values, bound at launch

    @property
    def tensors(self) -> dict[str, TensorDecl]:
        return {t.name: t for p in self.programs for t in p.tensors}

    @property
    def parallel(self) -> bool:
        """The programs run on separate physical cores at the same time (LNC=2)."""
        return len(self.programs) > 1

    @property
    def returned_names(self) -> list[str]:
        """The HBM tensors the kernel returns, in return order."""
        return _flatten(self.returned)

    def structure(self, values: dict):
        """The kernel's return value with ``values[name]`` in place of each returned tensor."""
        return _rebuild(self.returned, values)

    def timing(self):
        """Each program's timing (the same objects every launch of it uses). A kernel whose loops
        are bounded at run time has no timing before it runs: read ``kernel.last_timing``."""
        if any(isinstance(i, LoopStart) and i.static_trip_count() is None for p in self.programs for i in p.instructions):
            raise NkiError("this kernel's device time depends on loop bounds read at run time: call it and read "
                           "kernel.last_timing / kernel.last_device_time_ns")
        return [program_timing(p, self.arch) for p in self.programs]

    @property
    def device_time_ns(self) -> float:
        """Device time of one launch: the cores of an LNC=2 launch run at once."""
        return max(t.total_ns for t in self.timing())


def _grid(key) -> tuple[tuple[int, ...], tuple]:
    if key == () or isinstance(key, tuple) and not key:
        raise NkiError(f"a launch grid is one or more positive ints, got {key!r}")
    try:
        return grid_layout(key)
    except ValueError as err:
        raise NkiError(str(err)) from None


def _freeze(value):
    """A hashable form of a non-tensor argument (part of the compile cache key)."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, NKIObject) or dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), _freeze(object_fields(value)))
    try:
        hash(value)
    except TypeError:
        raise NkiError(f"kernel arguments must be arrays or hashable compile-time values, got {type(value).__name__}") from None
    return value


class Kernel:
    """A kernel function compiled on first call for each argument signature."""

    def __init__(self, func, grid: tuple[int, ...] = (1,), cache: dict | None = None, layout: tuple = (), **options):
        functools.update_wrapper(self, func)
        self.func = func
        self.grid = grid
        # Per grid dim, an nl.spmd_dim spreading it over physical cores, or None (legacy grids).
        self.layout = layout or (None,) * len(grid)
        self.options = options
        self._cache: dict = {} if cache is None else cache
        self.benchmark_result = None
        self.last_timing = None  # TimingResult list of the latest call (one per physical core)
        self.last_device_time_ns = None  # device time of the latest call's launch
        self._origin: Kernel | None = None  # the kernel ``self`` was made from by ``kernel[grid]``

    def __getitem__(self, grid) -> Kernel:
        sizes, layout = _grid(grid)
        launch = type(self)(self.func, sizes, self._cache, layout, **self.options)
        launch._origin = self._origin or self
        return launch

    def record(self, **results) -> None:
        """Set results of a call (last_timing, benchmark_result) here and on the kernel this
        launch was made from, so ``k[2](...)`` updates ``k.last_timing`` too."""
        for target in (self, self._origin):
            if target is not None:
                for name, value in results.items():
                    setattr(target, name, value)

    def __call__(self, *args, **kwargs):
        if tracing.active():  # called from a kernel being traced (a helper kernel): its body runs inline, as in NKI
            return self.func(*args, **kwargs)
        foreign = arrays.launcher(args, kwargs)
        if foreign is not None:  # a framework's arrays: its integration binds and launches them
            return foreign.launch(self, args, kwargs)
        try:
            return run(self, args, kwargs)
        except Exception as err:
            raise err.with_traceback(tracing.user_traceback(err.__traceback__))  # noqa: B904 - the same error

    # --- tracing ------------------------------------------------------------------------------
    def signature(self, args, kwargs, arch: Architecture) -> tuple:
        def sig(v):
            described = arrays.describe(v)
            if described is None:
                return ("value", _freeze(v))
            shape, dtype = described
            return ("array", shape, dtypes.dtype_name(dtype))

        layout = tuple(d.key() if d is not None else None for d in self.layout)
        return (arch.name, self.grid, layout, tuple(sig(a) for a in args), tuple(sorted((k, sig(v)) for k, v in kwargs.items())))

    def compile(self, args, kwargs, arch: Architecture | None = None) -> CompiledKernel:
        arch = arch or get_architecture(self.options.get("platform_target"))
        key = self.signature(args, kwargs, arch)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self._trace(args, kwargs, arch)
        return compiled

    def _trace(self, args, kwargs, arch: Architecture) -> CompiledKernel:
        lnc = self.grid in ((1,), (2,))
        # Parameter names per position (``*args`` positions are named args_0, args_1, ...).
        declared = list(inspect.signature(self.func).parameters.values())
        names = [p.name for p in declared if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        rest = next((p.name for p in declared if p.kind == p.VAR_POSITIONAL), "arg")
        names += [f"{rest}_{i}" for i in range(max(0, len(args) - len(names)))]
        programs, instances = [], []
        for program_id in itertools.product(*(range(g) for g in self.grid)):
            ctx = tracing.TraceContext(arch, self.__name__, getattr(self.func, "__code__", None), tuple(program_id), self.grid)
            with tracing.tracing(ctx):
                tensor_args, params, kw_params = _bind_arguments(ctx, names, args, kwargs)
                tensor_kwargs = {k: v for k, v in tensor_args.items() if isinstance(k, str)}
                positional = [tensor_args[i] for i in range(len(args))]
                result = self.func(*positional, **tensor_kwargs)
                returned = _returned_names(ctx, result, self.func)
                _finish_tensor_table(ctx, params, kw_params, returned, self.__name__, self.func)
            instances.append((ctx, returned))
        # Each builder checked its instructions as they were traced; what is left are the checks of
        # each whole program, over the one tensor table the instances share.
        tables = _merge_tables([c for c, _ in instances])
        cores = [(c.program_id[0], c) for c, _ in instances]  # (physical core, its builder)
        if not lnc:  # legacy SPMD: the instances of each physical core run back to back, as one program
            per_core: dict[int, list] = {}
            for ctx, _ in instances:
                per_core.setdefault(physical_core(ctx.program_id, self.layout), []).append(ctx)
            if len(per_core) > 2:
                raise NkiError(f"the launch grid spreads {self.__name__} over {len(per_core)} physical cores; a logical "
                               "NeuronCore has at most 2 (nl.nc(2))")
            cores = []
            for core in sorted(per_core):
                first, *rest = per_core[core]
                first.instructions.extend(i for c in rest for i in c.instructions)
                cores.append((core, first))
        for core, ctx in cores:
            ctx.tensors[:] = tables
            if len(cores) > 1:
                ctx.name = f"{self.__name__}_core{core}"
            programs.append(ctx.build())
        prints = tuple(p for ctx, _ in instances for p in ctx.prints)
        constants = {name: value for ctx, _ in instances for name, value in ctx.constants.items()}
        return CompiledKernel(programs, params, kw_params, instances[0][1], arch, prints, constants)


def _bind_arguments(ctx, names, args, kwargs):
    """HBM stand-ins for array arguments, named after the kernel's parameters."""
    tensor_args: dict = {}
    params: dict[int, str] = {}
    kw_params: dict[str, str] = {}
    for i, value in enumerate(args):
        described = arrays.describe(value)
        if described is not None:
            name = names[i] if i < len(names) else f"arg{i}"
            tensor_args[i] = _hbm_argument(ctx, described, name)
            params[i] = tensor_args[i].name
        else:
            tensor_args[i] = value
    for key, value in kwargs.items():
        described = arrays.describe(value)
        if described is not None:
            tensor_args[key] = _hbm_argument(ctx, described, key)
            kw_params[key] = tensor_args[key].name
        else:
            tensor_args[key] = value
    return tensor_args, params, kw_params


def _hbm_argument(ctx, described, name: str) -> NkiTensor:
    shape, dtype = described
    return NkiTensor(hbm_storage(ctx, shape or (1,), dtypes.dtype_name(dtype), name, "input"))


def _returned_names(ctx, result, func):
    """The kernel's return value with HBM tensor names in place of tensors."""
    if result is None:
        return None
    if isinstance(result, NkiTensor):
        where = tracing.function_location(func, returns=True)
        if result.buffer in ("sbuf", "psum"):
            raise NkiValidationError("kernel.return", f"a kernel returns HBM tensors (nl.shared_hbm); {result!r} is on chip",
                                     where)
        if result.storage.shape == result.shape and result.offset == 0:
            return result.name
        if result.offset == 0 and result.size == math.prod(result.storage.shape) and result.is_contiguous():
            return Reshaped(result.name, result.shape)  # out.reshape(...) of a whole output tensor
        raise NkiValidationError("kernel.return", f"return the whole output tensor (or a reshape of it), not a view of "
                                                  f"{result.name!r}", where)
    if isinstance(result, (tuple, list)):
        return type(result)(_returned_names(ctx, r, func) for r in result)
    raise NkiValidationError("kernel.return", f"a kernel returns tensors (or a tuple of them), got {type(result).__name__}",
                             tracing.function_location(func, returns=True))


@dataclass(frozen=True)
class Reshaped:
    """A returned reshape of a whole output tensor: the caller gets the tensor in this shape."""

    name: str
    shape: tuple[int, ...]


def _flatten(returned) -> list[str]:
    if returned is None:
        return []
    if isinstance(returned, str):
        return [returned]
    if isinstance(returned, Reshaped):
        return [returned.name]
    return [n for r in returned for n in _flatten(r)]


def _rebuild(returned, values: dict):
    if returned is None:
        return None
    if isinstance(returned, str):
        return values[returned]
    if isinstance(returned, Reshaped):
        return values[returned.name].reshape(returned.shape)
    return type(returned)(_rebuild(r, values) for r in returned)


def _finish_tensor_table(ctx, params, kw_params, returned, kernel_name: str, func) -> None:
    """Set each HBM tensor's kind from how the kernel used it; refuse a kernel with no output."""
    outputs = set(_flatten(returned))
    arguments = set(params.values()) | set(kw_params.values())
    decls = []
    for t in ctx.tensors:
        kind = t.kind
        if t.name in outputs:
            kind = "output"
        elif t.name in arguments and t.name in ctx.hbm_written:
            kind = "inout"
        decls.append(TensorDecl(t.name, t.shape, t.dtype, kind))
    ctx.tensors[:] = decls
    if not outputs and not any(t.kind == "inout" for t in decls):
        raise NkiValidationError(
            "kernel.no_output",
            f"kernel {kernel_name!r} writes no output: return an nl.shared_hbm tensor or store into an output "
            "tensor passed as an argument",
            tracing.function_location(func),
        )
    unwritten = [n for n in outputs if n not in ctx.hbm_written]
    if unwritten:
        raise NkiValidationError(
            "kernel.output_unwritten", f"kernel {kernel_name!r} returns tensor(s) {unwritten} but never writes them",
            tracing.function_location(func, returns=True),
        )


def _merge_tables(contexts) -> list[TensorDecl]:
    """One tensor table for all instances: tensors of the same name are the same (shared) tensor."""
    merged: dict[str, TensorDecl] = {}
    for ctx in contexts:
        for t in ctx.tensors:
            if t.name in merged:
                old = merged[t.name]
                if (old.shape, old.dtype) != (t.shape, t.dtype):
                    raise NkiValidationError("kernel.spmd_tensor", f"instances disagree on tensor {t.name!r}: {old} vs {t}", None)
                if t.kind != old.kind and "inout" in (t.kind, old.kind):
                    merged[t.name] = TensorDecl(t.name, t.shape, t.dtype, "inout")
            else:
                merged[t.name] = t
    return list(merged.values())


def jit(func=None, **options):
    """Decorate a kernel function. ``mode=`` and other legacy options are accepted and ignored;
    the target comes from NEURON_PLATFORM_TARGET_OVERRIDE, as in NKI 0.3+ (``platform_target=``
    is refused here; the legacy ``neuronxcc.nki.jit`` still honours it)."""
    if "platform_target" in options:
        raise NkiError("nki.jit(platform_target=...) was removed in NKI 0.3; set NEURON_PLATFORM_TARGET_OVERRIDE instead "
                       "(the legacy neuronxcc.nki.jit still accepts it)")
    return make_kernel(func, options)


def make_kernel(func, options: dict):
    """``func`` (or, with ``func=None``, a decorator) as a Kernel with ``options``."""
    if func is None:
        return lambda f: make_kernel(f, options)
    if isinstance(func, Kernel):
        return func
    return Kernel(func, **options)


__all__ = ["Kernel", "CompiledKernel", "jit", "Storage"]
