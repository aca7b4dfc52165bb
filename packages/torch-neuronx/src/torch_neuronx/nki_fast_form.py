"""A kernel's fast form: a torch function computing what an NKI kernel computes, compiled into the
graph-level form of the kernel's program.

    @nki.jit
    def sin_kernel(in_ptr0, out_ptr): ...

    @torch_neuronx.fast_form(sin_kernel)
    def sin_reference(in_ptr0, out_ptr):
        return torch.sin(in_ptr0)

Under ``NEURON_SIM_MODE=fast`` (the default) the kernel's launches on neuron tensors then
evaluate the reference's graph over whole tensors instead of interpreting the kernel's
instructions one by one, so a model that calls kernels runs at the speed of one that does not;
under ``NEURON_SIM_MODE=exact`` they run the kernel's own instructions. Device time comes from
the kernel's instructions either way (the same figure in both modes). A kernel without a fast
form always runs its instructions.

The reference is called with the kernel's arguments (a parameter the kernel only writes arrives
as an uninitialized tensor of its shape) and returns the new values of what the kernel writes:
the parameters it writes, in parameter order, then the HBM tensors it creates and returns, in
return order - one tensor or a tuple, each with the shape and dtype of the tensor it stands for.
It is traced and compiled once per kernel signature, as any compiled op.

``check_fast_form(kernel, *args)`` runs a kernel both ways on the same inputs and compares them
(the differential test a fast form should have).
"""

from __future__ import annotations

import torch
from neuron_sim import dtypes

from .compiled.dtypes import NotLowerable
from .compiled.tracing import graph_for, row_major_strides

_REFERENCES: dict = {}  # the kernel's Python function (shared by kernel[grid] forms) -> reference


class FastFormError(ValueError):
    """A fast form that does not match its kernel (what it returns, shapes, dtypes) or cannot be
    compiled."""


def fast_form(kernel):
    """Decorator: register the function as ``kernel``'s fast form (replacing an earlier one)."""
    if not callable(getattr(kernel, "func", None)):
        raise TypeError(f"fast_form takes an @nki.jit kernel, got {type(kernel).__name__}")

    def register(reference):
        _REFERENCES[kernel.func] = reference
        return reference

    return register


def has_fast_form(kernel) -> bool:
    return getattr(kernel, "func", None) in _REFERENCES


def attach(kernel, compiled, args, kwargs, torch_dtype) -> bool:
    """Give the program of this kernel signature its graph-level form (once per signature);
    False when the kernel has no fast form or runs on two cores at once (LNC=2)."""
    reference = _REFERENCES.get(getattr(kernel, "func", None))
    if reference is None or len(compiled.programs) != 1:
        return False
    program = compiled.programs[0]
    if program.graph is None:
        program.graph = _graph(reference, kernel.__name__, compiled, args, kwargs, torch_dtype)
    return True


def _graph(reference, name: str, compiled, args, kwargs, torch_dtype):
    decls = compiled.tensors
    params = [(i, n) for i, n in compiled.params.items()] + [(k, n) for k, n in compiled.kw_params.items()]
    # A parameter the kernel writes (``inout``: NKI cannot tell whether the kernel reads it too) is
    # handed to the reference; the graph may not read it, as it writes it (see below).
    read = [(where, pname) for where, pname in params if decls[pname].kind in ("input", "inout")]
    written = [pname for _where, pname in params if decls[pname].kind in ("output", "inout")]
    written += [n for n in compiled.returned_names if n not in written and n not in dict(params).values()]

    def spec(tensor_name):
        decl = decls[tensor_name]
        return decl.shape, row_major_strides(decl.shape), torch_dtype(dtypes.to_numpy(decl.dtype))

    def traced(*tensors):
        call_args, call_kwargs = list(args), dict(kwargs)
        given = dict(zip((where for where, _n in read), tensors))
        for where, pname in params:
            shape, _strides, dtype = spec(pname)
            value = given[where] if where in given else torch.empty(shape, dtype=dtype)
            if isinstance(where, int):
                call_args[where] = value
            else:
                call_kwargs[where] = value
        result = reference(*call_args, **call_kwargs)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != len(written):
            raise FastFormError(f"fast form of {name} returned {len(results)} tensors; the kernel writes {len(written)}: "
                                f"{written}")
        for value, tensor_name in zip(results, written):
            shape, _strides, dtype = spec(tensor_name)
            if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape) or value.dtype != dtype:
                got = f"{list(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else type(value).__name__
                raise FastFormError(f"fast form of {name}: the value for {tensor_name!r} must be a {list(shape)} {dtype} "
                                    f"tensor, got {got}")
        return results

    try:
        graph, _none = graph_for(traced, [spec(n) for _w, n in read], [None] * len(written), f"{name}_fast_form")
    except FastFormError:
        raise
    except NotLowerable as err:
        if isinstance(err.__context__, FastFormError):
            raise err.__context__ from None
        raise FastFormError(f"fast form of {name} cannot be compiled: {err}") from None
    used = {id(v) for node in graph.nodes for v in node.inputs} | {id(v) for v in graph.outputs}
    inputs = []
    for value, (_where, pname) in zip(graph.inputs, read):
        if decls[pname].kind == "inout":
            if id(value) in used:
                raise FastFormError(f"fast form of {name} reads {pname!r}, which the kernel writes: a fast form may read "
                                    "only the parameters the kernel does not write")
            continue  # written only: not an input of the graph
        value.name = pname  # the graph binds the kernel's own HBM tensors
        inputs.append(value)
    graph.inputs = inputs
    for value, tensor_name in zip(graph.outputs, written):
        value.name = tensor_name
    return graph
