"""Fuzz programs: what they are, how hypothesis makes them, and how they print.

A program is JSON: input tensors (dtype, the values of a base tensor - every value a literal -
and a view of it: transposed, sliced with steps, expanded, as_strided) and steps, each an op of
``tnx_fuzz_ops.OPS`` applied to earlier values with drawn parameters. ``source(program)`` is the
program as a runnable Python script, ``to_json``/``from_json`` keep it in a reproducer file.

The generator runs each step on CPU while it draws, so later steps fit the shapes and dtypes at
hand (mostly: some are drawn to fail, and a program ends at its first error).
"""

from __future__ import annotations

import json
import math
import random
import warnings

import torch
from hypothesis import strategies as st
from tnx_fuzz_ops import FUSSY, NAMESPACE, OPS, Op, rarely
from tnx_fuzz_profiles import input_dtypes
from tnx_fuzz_values import DTYPES, REGIMES, elements, is_float, literal, make_tensor, regime_kind

SIZES = [1, 2, 3, 0, 4, 5, 7] * 8 + [128, 130]  # a partition-sized dim now and then
MAX_LITERAL = 24  # more elements than this: a pool of values, spread by a stride (hypothesis limits an example's size)
MAX_NUMEL = 4096  # a step making more than this is not drawn (the device would just be slower)


# --- the program as data ------------------------------------------------------------------------------


def input_name(i: int) -> str:
    return f"x{i}"


def step_name(i: int) -> str:
    return f"v{i}"


def base_source(spec: dict) -> str:
    """Source of an input's base tensor on CPU."""
    dtype = f"torch.{spec['dtype']}"
    values = spec["values"]
    shape = literal(tuple(spec["shape"]))
    if isinstance(values, dict):  # {"pool": [...], "stride": k}: element i is pool[i * k % len(pool)]
        n = math.prod(spec["shape"])
        return (f"torch.tensor({literal(values['pool'])}, dtype={dtype})"
                f"[torch.arange({n}) * {values['stride']} % {len(values['pool'])}].reshape({shape})")
    return f"torch.tensor({literal(values)}, dtype={dtype}).reshape({shape})"


def make_base(spec: dict) -> torch.Tensor:
    dtype = DTYPES[spec["dtype"]]
    values = spec["values"]
    if isinstance(values, dict):
        pool = make_tensor(values["pool"], (len(values["pool"]),), dtype)
        n = math.prod(spec["shape"])
        return pool[torch.arange(n) * values["stride"] % len(values["pool"])].reshape(spec["shape"])
    return make_tensor(values, tuple(spec["shape"]), dtype)


def step_source(step: dict) -> str:
    return OPS[step["op"]].source(step["args"], step.get("params", {}))


def source(program: dict, device: str = "neuron") -> str:
    """The program as a script that runs it on ``device`` and prints every value."""
    lines = ["import torch", "from math import inf, nan", f"dev = torch.device({device!r})", "",
             "def setitem(t, key, value):", "    t[key] = value", "    return t", "",
             "class _Key:", "    def __getitem__(self, key):", "        return key", "", "K = _Key()", ""]
    for i, spec in enumerate(program["inputs"]):
        lines.append(f"{input_name(i)} = {spec['view'].format(b=base_source(spec) + '.to(dev)')}")
    for i, step in enumerate(program["steps"]):
        lines.append(f"{step_name(i)} = {step_source(step)}")
    names = [input_name(i) for i in range(len(program["inputs"]))] + [step_name(i) for i in range(len(program["steps"]))]
    lines.append(f"for name, value in zip({literal(names)}, [{', '.join(names)}]):")
    lines.append("    print(name, value.cpu())")
    return "\n".join(lines)


def to_json(program: dict) -> str:
    return json.dumps(program, separators=(",", ":"))


def from_json(text: str) -> dict:
    program = json.loads(text)
    for step in program["steps"]:
        if step["op"] not in OPS:
            raise ValueError(f"program uses op {step['op']!r}, which tnx_fuzz_ops.OPS does not define")
    return program


# --- inputs ------------------------------------------------------------------------------------------

sizes = st.sampled_from(SIZES)
shapes = st.lists(sizes, min_size=0, max_size=3)


@st.composite
def related_shape(draw, shape: list[int]) -> list[int]:
    """A shape that broadcasts with ``shape`` (most of the time), or any shape."""
    kind = draw(st.sampled_from(["same", "same", "ones", "suffix", "swap", "any"]))
    if kind == "same":
        return list(shape)
    if kind == "ones":
        return [1 if draw(st.booleans()) else n for n in shape]
    if kind == "suffix":
        return list(shape[draw(st.integers(0, len(shape))):])
    if kind == "swap" and len(shape) >= 2:
        return shape[:-2] + [shape[-1], shape[-2]]
    return draw(shapes)


@st.composite
def views(draw, shape: list[int]):
    """(base shape, view template over ``{b}``) giving a tensor of ``shape``."""
    nd = len(shape)
    kind = draw(st.sampled_from(["plain"] * 4 + ["transpose", "slice", "expand", "as_strided", "offset"]))
    if kind == "transpose" and nd >= 2:
        i, j = draw(st.permutations(list(range(nd))))[:2]
        base = list(shape)
        base[i], base[j] = base[j], base[i]
        return base, f"{{b}}.transpose({i}, {j})"
    if kind == "slice" and nd >= 1:
        d = draw(st.integers(0, nd - 1))
        step, start = draw(st.integers(2, 3)), draw(st.integers(0, 2))
        base = list(shape)
        base[d] = start + step * shape[d] + draw(st.integers(0, 1))
        key = ", ".join([":"] * d + [f"{start}:{start + step * shape[d]}:{step}"])
        return base, f"{{b}}[{key}]"
    if kind == "expand" and nd >= 1:
        base = [1 if draw(st.booleans()) else n for n in shape]
        return base, f"{{b}}.expand({literal(tuple(shape))})"
    if kind == "as_strided" and nd >= 1:
        order = draw(st.permutations(list(range(nd))))  # innermost first
        strides = [0] * nd
        step = draw(st.integers(1, 2))
        for d in order:
            strides[d] = step
            step *= shape[d] + draw(st.integers(0, 1))
        offset = draw(st.integers(0, 3))
        extent = offset + (sum((n - 1) * s for n, s in zip(shape, strides)) + 1 if all(shape) else 0)
        return [extent], f"{{b}}.as_strided({literal(tuple(shape))}, {literal(tuple(strides))}, {offset})"
    if kind == "offset" and nd >= 1:
        d = draw(st.integers(0, nd - 1))
        start = draw(st.integers(1, 2))
        base = list(shape)
        base[d] += start + draw(st.integers(0, 1))
        return base, f"{{b}}.narrow({d}, {start}, {shape[d]})"
    return list(shape), "{b}"


@st.composite
def input_specs(draw, shape: list[int]) -> dict:
    dtype = draw(st.sampled_from(input_dtypes(DTYPES)))
    base, view = draw(views(shape))
    torch_dtype = DTYPES[dtype]
    regime = draw(st.sampled_from(REGIMES[regime_kind(torch_dtype)]))
    n = math.prod(base)
    if n <= MAX_LITERAL:
        values = draw(st.lists(elements(torch_dtype, regime), min_size=n, max_size=n))
    else:
        values = {"pool": draw(st.lists(elements(torch_dtype, regime), min_size=1, max_size=12)),
                  "stride": draw(st.sampled_from([1, 3, 7, 11]))}
    return {"dtype": dtype, "shape": base, "values": values, "view": view}


# --- steps -------------------------------------------------------------------------------------------


def _broadcasts(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        torch.broadcast_shapes(a.shape, b.shape)
        return True
    except RuntimeError:
        return False


def _fits(kind: str, a: torch.Tensor, b: torch.Tensor) -> bool:
    if kind == "to_a":  # written into a: b broadcasts to a's shape, the result casts to a's dtype
        return (_broadcasts(a, b) and torch.broadcast_shapes(a.shape, b.shape) == a.shape
                and torch.can_cast(torch.result_type(a, b), a.dtype))
    if kind == "same":
        return a.shape == b.shape
    if kind == "same_dtype":
        return a.dtype == b.dtype and a.dim() == b.dim()
    if kind == "cat":
        return a.dim() == b.dim() and sum(x != y for x, y in zip(a.shape, b.shape)) <= 1
    if kind == "matmul":
        return a.dim() >= 1 and b.dim() >= 1 and b.shape[-2 if b.dim() >= 2 else 0] == a.shape[-1]
    if kind == "into":
        return a.dtype == b.dtype
    return _broadcasts(a, b)


def pick_partner(draw, kind: str, a: torch.Tensor, env: dict) -> str:
    """The name of a second operand for ``a``: one that fits ``kind`` most of the time."""
    names = list(env)[::-1]
    fitting = [n for n in names if _fits(kind, a, env[n]) and (kind not in ("to_a", "same_dtype", "into") or env[n] is not a)]
    if fitting and not rarely(draw, 15):
        return draw(st.sampled_from(fitting))
    return draw(st.sampled_from(names))


def result_without_out(op: Op, params: dict, operands: list[torch.Tensor]) -> torch.Tensor | None:
    """What an ``out=`` op computes before writing ``out`` (on CPU operands; None if it raises)."""
    names = [f"r{i}" for i in range(len(operands))]
    try:
        return eval(op.reval_source(names, params), NAMESPACE, dict(zip(names, operands), dev=torch.device("cpu")))  # noqa: S307
    except Exception:  # noqa: BLE001
        return None


def undefined_cast(op: Op, params: dict, operands: list[torch.Tensor]) -> bool:
    """Would the step cast a float that an integer dtype cannot hold (NaN, inf, out of range)?
    C++ leaves that undefined and so does PyTorch; programs do not do it."""
    target = None
    source = operands[0]
    cast = op.meta.get("cast")
    if cast == "dtype":
        target = DTYPES[params["dtype"]["dtype"]]
    elif cast:
        target = DTYPES[cast]
    elif op.name in ("copy_", "setitem_t") and len(operands) > 1:
        target, source = operands[0].dtype, operands[1]
    elif "reval" in op.meta:  # out=: the op's result is cast to the out tensor's dtype (reductions allow it)
        target = DTYPES[params["out_dtype"]["dtype"]] if "out_dtype" in params else operands[-1].dtype
        source = result_without_out(op, params, operands)
        if source is None:
            return False  # the op fails anyway
    if target is None or not is_float(source.dtype) or is_float(target) or target == torch.bool:
        return False
    info = torch.iinfo(target)
    x = source.double()
    return bool((~torch.isfinite(x)).any() or (x.trunc() < info.min).any() or (x.trunc() > info.max).any())


def run_step(step: dict, env: dict) -> torch.Tensor:
    """Evaluate one step in ``env`` (names -> tensors, plus ``dev`` and ``setitem``)."""
    return eval(step_source(step), NAMESPACE, env)  # noqa: S307 - the program is our own source



def materialize_inputs(program: dict, device: torch.device) -> dict:
    env = {"dev": device}
    for i, spec in enumerate(program["inputs"]):
        env[input_name(i)] = eval(spec["view"].format(b="base"), NAMESPACE, {"base": make_base(spec).to(device)})  # noqa: S307
    return env


@st.composite
def programs(draw, max_steps: int = 6) -> dict:
    """A program of 1 to ``max_steps`` steps over 1 to 3 inputs."""
    first = draw(shapes)
    inputs = [draw(input_specs(first))]
    for _ in range(draw(st.integers(0, 2))):
        inputs.append(draw(input_specs(draw(related_shape(first)))))
    program = {"inputs": inputs, "steps": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = materialize_inputs(program, torch.device("cpu"))
        values = {k: v for k, v in env.items() if k != "dev"}
        wanted = max_steps - draw(st.integers(0, max_steps - 1))  # hypothesis favours 0: long programs
        # Ops are chosen by a Random seeded with a drawn number and the inputs: hypothesis's own
        # draws (and its habit of reusing earlier examples' draws) pick a few of 200 ops far more
        # often than the others.
        choose = random.Random(f"{draw(st.integers(0, 2 ** 32 - 1))} {json.dumps(inputs)}").choice
        for _ in range(3 * wanted):
            if len(program["steps"]) == wanted or not _draw_step(draw, program, env, values, choose):
                break
    return program


def _draw_step(draw, program: dict, env: dict, values: dict, choose) -> bool:
    """Draw one step, run it on CPU; False when the program ends (the step raised)."""
    names = list(values)[::-1]  # the latest value first (what hypothesis shrinks towards)
    a = draw(st.sampled_from(names))
    usual = not rarely(draw, 60)  # now and then an op on operands CPU mostly refuses
    ops = [name for name in sorted(OPS) if not usual or OPS[name].when(*[values[a]] * OPS[name].arity)]
    op = OPS[choose(ops)]
    if op.name in FUSSY and draw(st.integers(0, 3)):
        return True
    args = [a] + [pick_partner(draw, "into" if op.partner == "into" and i == op.arity - 1
                               else op.partner if op.partner != "into" else "broadcast", values[a], values)
                  for i in range(1, op.arity)]
    operands = [values[n] for n in args]
    if usual and not op.when(*operands):
        return True
    params = op.params(draw, *operands) if op.params else {}
    if undefined_cast(op, params, operands):
        return True
    step = {"op": op.name, "args": args, "params": params} if params else {"op": op.name, "args": args}
    try:
        result = run_step(step, env)
    except Exception:  # noqa: BLE001 - a program may end in an error; both sides must raise it
        program["steps"].append(step)
        return False
    if not isinstance(result, torch.Tensor) or result.numel() > MAX_NUMEL:
        return True
    name = step_name(len(program["steps"]))
    program["steps"].append(step)
    env[name] = values[name] = result
    return True
