"""Conformance of the ``neuron`` device against PyTorch's own OpInfo database.

For every OpInfo in ``torch.testing._internal.common_methods_invocations.op_db`` and each dtype
(float32, bfloat16), the first few sample inputs are made for device ``neuron`` (as PyTorch's
device-generic tests make them: some arguments stay on CPU by design), run there and, copied to
CPU, run on CPU (same seed, so random ops draw the same numbers); the results are compared with
dtype-appropriate tolerances. Ops that return uninitialized memory (``empty``...) are compared by
shape and dtype only. Each (op, dtype) is then:

* ``device``   - every sample matched and every ATen op it ran was compiled for the NeuronCore;
* ``fallback`` - every sample matched, but some ATen ops ran through CPU fallback (listed);
* ``failed``   - a sample raised on neuron but not on CPU, or its results differ (reason given).

(op, dtype) pairs with no sample that runs on CPU are not counted. Writes docs/op_coverage.md:

    python tools/op_coverage.py [--samples 3] [--ops add,mul] [--output docs/op_coverage.md]
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import time
import warnings

import torch
import torch_neuronx
from torch.utils._pytree import tree_flatten, tree_map

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Tolerances: fp32 ops compiled for the NeuronCore round in their own order (reductions, fused
# chains) and use the engines' activation functions; bf16 results are rounded once per op.
TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
OP_TIMEOUT_SECONDS = 120
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise Timeout(f"took longer than {OP_TIMEOUT_SECONDS} s")


# Their results are uninitialized memory: only the shape and dtype mean anything.
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}


def to_cpu(x):
    """A CPU copy; a view keeps its place in a CPU copy of its whole storage (``as_strided``
    samples read storage outside the view)."""
    if not isinstance(x, torch.Tensor) or x.device.type == "cpu":
        return x
    if x.untyped_storage().nbytes() == x.numel() * x.element_size() and x.is_contiguous():
        return x.cpu()
    storage = x.untyped_storage().cpu()
    return torch.empty(0, dtype=x.dtype).set_(storage, x.storage_offset(), x.size(), x.stride())


def run_sample(op, sample, device: str):
    """Run ``sample`` (made for neuron) on neuron, or on CPU copies of its tensors."""
    torch.manual_seed(0)
    move = to_cpu if device == "cpu" else (lambda x: x)
    # Factory samples name their device as a torch.device or a string ("neuron:0").
    kwargs = {k: ("cpu" if device == "cpu" and (isinstance(v, torch.device) or (k == "device" and isinstance(v, str)))
                  else tree_map(move, v))
              for k, v in sample.kwargs.items()}
    return op(tree_map(move, sample.input), *tree_map(move, sample.args), **kwargs)


def compare(expected, actual, dtype, values: bool = True, tolerances: dict | None = None) -> str | None:
    """None if ``actual`` (from neuron) matches ``expected`` (from CPU), else why not.
    ``tolerances``: per dtype, instead of TOLERANCES (tools/hf_sweep.py compares whole models)."""
    tolerances = TOLERANCES if tolerances is None else tolerances
    exp_leaves, exp_spec = tree_flatten(expected)
    act_leaves, act_spec = tree_flatten(actual)
    act_leaves = [to_cpu(x) for x in act_leaves]
    if exp_spec != act_spec:
        return f"result structure {act_spec} != {exp_spec}"
    for e, a in zip(exp_leaves, act_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"got {type(a).__name__} where CPU gives a tensor"
            if a.dtype != e.dtype or a.shape != e.shape:
                return f"{a.dtype} {list(a.shape)} != CPU {e.dtype} {list(e.shape)}"
            if not values:
                continue
            tol = tolerances.get(e.dtype, dict(rtol=0, atol=0)) if e.is_floating_point() or e.is_complex() else dict(rtol=0, atol=0)
            try:
                torch.testing.assert_close(a, e, equal_nan=True, **tol)
            except AssertionError as err:
                lines = [s.strip() for s in str(err).splitlines() if s.strip()]
                return "mismatch: " + "; ".join(lines[1:4])
        elif isinstance(e, float) and isinstance(a, float):
            if not (abs(a - e) <= 1e-4 * abs(e) + 1e-5 or (a != a and e != e)):
                return f"{a} != CPU {e}"
        elif e != a:
            return f"{a!r} != CPU {e!r}"
    return None


# ATen op -> why its compiled path was refused the first time (the compiler's message).
REASONS: dict[str, str] = {}


def check(opinfo, dtype, samples: int) -> tuple[str, str] | None:
    """(status, detail) for one op and dtype, or None if no sample runs on CPU."""
    ran = 0
    fallback_ops: set[str] = set()
    try:
        sample_iter = opinfo.sample_inputs("neuron", dtype, requires_grad=False)
        candidates = [s for _, s in zip(range(samples * 3), sample_iter)]
    except Exception:  # noqa: BLE001 - the OpInfo cannot make samples for this dtype
        return None
    for sample in candidates:
        if ran == samples:
            break
        try:
            expected = run_sample(opinfo.op, sample, "cpu")
        except Exception:  # noqa: BLE001 - not a valid call on CPU either: not counted
            continue
        ran += 1
        torch_neuronx.clear_op_tracking()
        try:
            actual = run_sample(opinfo.op, sample, "neuron")
            torch.neuron.synchronize()
            why = compare(expected, actual, dtype, values=opinfo.name not in UNINITIALIZED)
        except Timeout:
            raise
        except Exception as err:  # noqa: BLE001 - the failure is the finding
            text = str(err).strip().splitlines()[0] if str(err).strip() else ""
            return "failed", f"{type(err).__name__}: {text[:160]}"
        if why is not None:
            return "failed", why[:200]
        fallback_ops.update(torch_neuronx.get_fallback_ops())
        for op, reason in torch_neuronx.get_fallback_reasons().items():
            REASONS.setdefault(op.removeprefix("aten::"), reason.strip().splitlines()[0][:200])
    if ran == 0:
        return None
    if fallback_ops:
        return "fallback", ", ".join(sorted(op.removeprefix("aten::") for op in fallback_ops))
    return "device", ""


def render(results: dict, seconds: float, samples: int) -> str:
    counts = collections.Counter(status for per_dtype in results.values() for status, _ in per_dtype.values())
    total = sum(counts.values())
    passed = counts["device"] + counts["fallback"]
    lines = [
        "# ATen op coverage on `neuron` (PyTorch OpInfo conformance)",
        "",
        "Generated by `python tools/op_coverage.py` (torch " + torch.__version__ + f", {samples} sample inputs per op and dtype, "
        f"{seconds / 60:.0f} min). Each OpInfo's samples run on CPU and on `neuron` and are compared "
        "(float32: rtol 1e-4 / atol 1e-5; bfloat16: rtol / atol 2e-2). Only (op, dtype) pairs with a sample that runs on "
        "CPU count.",
        "",
        "| | (op, dtype) pairs | share |",
        "|---|---:|---:|",
        f"| pass on CPU (counted) | {total} | 100% |",
        f"| pass on `neuron` | {passed} | {100 * passed / max(total, 1):.1f}% |",
        f"| ... entirely on the NeuronCore (no fallback) | {counts['device']} | {100 * counts['device'] / max(total, 1):.1f}% |",
        f"| ... with some CPU fallback | {counts['fallback']} | {100 * counts['fallback'] / max(total, 1):.1f}% |",
        f"| failed | {counts['failed']} | {100 * counts['failed'] / max(total, 1):.1f}% |",
        "",
        "`device`: every ATen op the samples ran was compiled for the NeuronCore. `fallback`: results match, "
        "the listed ATen ops ran through CPU fallback. `failed`: an error or a mismatch (first one shown).",
        "",
        "| OpInfo | variant | float32 | bfloat16 |",
        "|---|---|---|---|",
    ]
    for (name, variant), per_dtype in sorted(results.items()):
        cells = []
        for dtype in DTYPES:
            if dtype not in per_dtype:
                cells.append("-")
                continue
            status, detail = per_dtype[dtype]
            detail = detail.replace("|", "\\|").replace("\n", " ")
            cells.append(f"{status}" + (f": {detail}" if detail else ""))
        lines.append(f"| `{name}` | {variant or ''} | {cells[0]} | {cells[1]} |")
    lines += _reasons_table(results)
    return "\n".join(lines) + "\n"


def _reasons_table(results: dict) -> list[str]:
    """The fallback ATen ops by how many (op, dtype) pairs they cost, with the compiler's reason
    (ops never offered to the compiler have none)."""
    cost = collections.Counter(op for per_dtype in results.values() for status, detail in per_dtype.values()
                               if status == "fallback" for op in detail.split(", "))
    lines = ["", "## Why ops fall back", "", "| ATen op | pairs | reason |", "|---|---:|---|"]
    for op, pairs in cost.most_common():
        reason = REASONS.get(op, "no compiled path: a random draw, a data-dependent or host result, hidden mutation, "
                                 "or an op with its own CPU-fallback kernel")
        lines.append(f"| `{op}` | {pairs} | {reason.replace('|', chr(92) + '|')} |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    parser.add_argument("--output", default=os.path.join(ROOT, "docs", "op_coverage.md"))
    args = parser.parse_args(argv)
    # Only here: importing PyTorch's OpInfo database takes seconds (tools/hf_sweep.py imports compare).
    from torch.testing._internal.common_methods_invocations import op_db

    wanted = set(filter(None, args.ops.split(",")))
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _on_alarm)
    results: dict = {}
    start = time.perf_counter()
    infos = [o for o in op_db if not wanted or o.name in wanted]
    for i, opinfo in enumerate(infos):
        key = (opinfo.name, opinfo.variant_test_name)
        for dtype_name, dtype in DTYPES.items():
            signal.alarm(OP_TIMEOUT_SECONDS)
            try:
                outcome = check(opinfo, dtype, args.samples)
            except Timeout as err:
                outcome = ("failed", str(err))
            finally:
                signal.alarm(0)
            if outcome is not None:
                results.setdefault(key, {})[dtype_name] = outcome
        done = results.get(key, {})
        print(f"[{i + 1}/{len(infos)}] {opinfo.name} {opinfo.variant_test_name}: "
              + ", ".join(f"{d}={s}" for d, (s, _) in done.items()), flush=True)
    text = render(results, time.perf_counter() - start, args.samples)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(text)
    print("\n".join(text.splitlines()[:14]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
