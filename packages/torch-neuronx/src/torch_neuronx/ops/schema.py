"""Facts about an op read from its schema: which arguments it writes, and its arguments by name."""

from __future__ import annotations

import functools

# In-place ops whose result does not depend on the values of the ``self`` they write (random
# fills, fill_, zero_): ``self`` is only written. After a failed launch, such an op makes a tensor
# the failure left invalid valid again, as a copy into it does.
OVERWRITES_SELF = frozenset({
    "aten::fill_", "aten::zero_", "aten::bernoulli_", "aten::uniform_", "aten::normal_", "aten::random_",
    "aten::exponential_", "aten::cauchy_", "aten::log_normal_", "aten::geometric_",
    # the device's draws behind those (kernels.random.ops)
    *(f"neuron_rng::{name}_" for name in ("uniform", "normal", "bernoulli", "random", "exponential", "geometric",
                                          "log_normal", "cauchy")),
})


def mutated_arguments(op) -> list[str]:
    """Names of the arguments ``op`` writes, in schema order."""
    return [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]


@functools.cache
def positional_names(op) -> tuple[str, ...]:
    """The names of ``op``'s positional arguments (reading the schema builds new objects each time)."""
    return tuple(a.name for a in op._schema.arguments if not a.kwarg_only)


def arguments_by_name(op, args, kwargs) -> dict:
    """The call's argument values by schema name."""
    values = dict(zip(positional_names(op), args))
    values.update(kwargs)
    return values


def argument(op, args, kwargs, name: str):
    """The value of argument ``name`` in a call of ``op`` (None if not given)."""
    positional = positional_names(op)
    if name in positional:
        i = positional.index(name)
        if i < len(args):
            return args[i]
    return kwargs.get(name)


def with_argument(op, args, kwargs, name: str, value):
    """``args, kwargs`` of a call of ``op`` with argument ``name`` set to ``value``."""
    positional = positional_names(op)
    if name in positional and positional.index(name) < len(args):
        i = positional.index(name)
        return (*args[:i], value, *args[i + 1:]), kwargs
    return args, {**kwargs, name: value}
