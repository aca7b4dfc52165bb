"""Run a fuzz program on the neuron device and say where it differs from CPU.

Modes: ``eager`` (op by op), ``adaptive`` (adaptive eager: ops deferred and fused into runs) and
``compile`` (the program as one function under ``torch.compile(backend="neuron")``). The device
runs the whole program without synchronizing in between (a launch's error surfaces at the final
``synchronize`` as neuron_sim's ExecutionError, whose ``original`` is what the op raised), then
every value is read back.

Errors first: when CPU raises at a step, the device must raise an exception of that type, at
that step's call or at the synchronize (``same_error`` has the rules for compiled programs);
the device raising where CPU does not, or not raising where CPU does, is a mismatch. Values
are not compared after an error (the device's later work ran on whatever it had).

Values: a CPU *shadow* run evaluates each step and compares it with the device's value of that
step under the step's check (``tnx_fuzz_checks``). Where a check allows rounding differences the
shadow goes on from the device's value, so every comparison is of one op on the device's own
operands and a tolerance only covers that op. A value a later step overwrites (in place,
``out=``, item assignment, also through a view) is compared once the program has ended (exactly:
the shadow has the device's rounded values), and a rounded one is also snapshotted (cloned on
the device) right after its step, for its own check.
"""

from __future__ import annotations

import linecache
import warnings
from dataclasses import dataclass, field

import torch
import torch_neuronx
from neuron_sim.errors import ExecutionError
from tnx_fuzz_checks import differences, layout
from tnx_fuzz_ops import OPS
from tnx_fuzz_programs import NAMESPACE, input_name, materialize_inputs, run_step, source, step_name, step_source, to_json

MODES = ("eager", "adaptive", "compile")


@dataclass
class Mismatch:
    kind: str  # value | layout | missing error | neuron error | error type
    step: int | None
    message: str
    operands: list = field(default_factory=list)
    expected: torch.Tensor | None = None
    got: torch.Tensor | None = None

    def report(self, program: dict, mode: str) -> str:
        where = f"step {self.step}: {step_name(self.step)} = {step_source(program['steps'][self.step])}" \
            if self.step is not None and self.step < len(program["steps"]) else "the program"
        lines = [f"neuron ({mode}) differs from CPU [{self.kind}] at {where}", f"  {self.message}"]
        for name, t in zip(program["steps"][self.step]["args"] if self.step is not None and self.step < len(program["steps"]) else [],
                           self.operands):
            lines.append(f"  {name} = {_short(t)}")
        lines += ["regression entry (tests/fuzz/regressions.json):", "  " + to_json(program), "script:", source(program)]
        return "\n".join(lines)


def _short(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    text = repr(t.tolist()) if t.numel() <= 24 else f"<{t.numel()} elements>"
    return f"{text} ({t.dtype}, shape {tuple(t.shape)}, stride {t.stride()})"


# --- the device run -------------------------------------------------------------------------------


@dataclass
class DeviceRun:
    values: dict  # name -> CPU copy, or the exception reading it raised
    layouts: dict  # name -> checks.layout of the device tensor
    call_error: tuple[int | None, BaseException] | None = None  # (step, error) raised at a call
    sync_error: BaseException | None = None  # raised by the final synchronize


def _settle() -> None:
    try:
        torch.neuron.synchronize()
    except Exception:  # noqa: BLE001 - an error an earlier program left queued is not this one's
        pass


def _compiled_function(program: dict, snapshots: set[int], device: torch.device):
    """The program as one Python function returning every value (and the snapshots)."""
    n_in = len(program["inputs"])
    params = [input_name(i) for i in range(n_in)]
    body, outs = [], list(params)
    for i, step in enumerate(program["steps"]):
        body.append(f"    {step_name(i)} = {step_source(step)}")
        outs.append(step_name(i))
        if i in snapshots:
            body.append(f"    s{i} = {step_name(i)}.clone()")
            outs.append(f"s{i}")
    text = f"def fuzz_program({', '.join(params)}):\n" + "\n".join(body or ["    pass"]) + f"\n    return ({', '.join(outs)},)\n"
    filename = f"<fuzz program {abs(hash(text))}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # tracebacks show the program
    scope = dict(NAMESPACE, dev=device)
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 - our own program
    return scope["fuzz_program"], outs


def _leave_adaptive_eager(run: DeviceRun) -> None:
    """Back to the environment's mode, launching what adaptive eager still holds: an error of
    those launches is the program's, as one at the final synchronize."""
    try:
        torch_neuronx.set_adaptive_eager(None)
    except Exception as err:  # noqa: BLE001 - compared with CPU's
        run.sync_error = err
        try:  # the failed flush left the mode set: the next program must not inherit it
            torch_neuronx.set_adaptive_eager(None)
        except Exception:  # noqa: BLE001 - already reported
            pass


def run_on_device(program: dict, mode: str, snapshots: set[int]) -> DeviceRun:
    """Run ``program`` on neuron:0 in ``mode``, cloning the results of ``snapshots`` steps."""
    device = torch.device("neuron", 0)
    _settle()
    env = materialize_inputs(program, device)
    run = DeviceRun({}, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "compile":
            fn, outs = _compiled_function(program, snapshots, device)
            inputs = [env[input_name(i)] for i in range(len(program["inputs"]))]
            try:
                env.update(zip(outs, torch.compile(fn, backend="neuron", dynamic=False)(*inputs)))
            except Exception as err:  # noqa: BLE001 - compared with CPU's
                run.call_error = (None, err)
            finally:
                torch._dynamo.reset()  # every program is a new function: keep dynamo's caches small
        else:
            torch_neuronx.set_adaptive_eager(mode == "adaptive")
            try:
                for i, step in enumerate(program["steps"]):
                    try:
                        env[step_name(i)] = run_step(step, env)
                    except Exception as err:  # noqa: BLE001 - compared with CPU's
                        run.call_error = (i, err)
                        break
                    if i in snapshots:
                        env[f"s{i}"] = env[step_name(i)].clone()
            finally:
                _leave_adaptive_eager(run)
        try:
            torch.neuron.synchronize()
        except Exception as err:  # noqa: BLE001 - compared with CPU's
            run.sync_error = run.sync_error or err
        for name, value in env.items():
            if isinstance(value, torch.Tensor):
                run.layouts[name] = layout(value)
                try:
                    run.values[name] = value.cpu()
                except Exception as err:  # noqa: BLE001
                    run.values[name] = err
    _settle()
    return run


# --- errors ---------------------------------------------------------------------------------------


def reported_error(err: BaseException) -> BaseException:
    """The error an op raised, out of the wrappers that carry it to the caller."""
    from torch._dynamo.exc import BackendCompilerFailed

    for _ in range(8):
        if isinstance(err, ExecutionError) and getattr(err, "original", None) is not None:
            err = err.original
        elif isinstance(err, BackendCompilerFailed) and getattr(err, "inner_exception", None) is not None:
            err = err.inner_exception
        else:
            return err
    return err


_OUR_PACKAGES = ("torch_neuronx", "neuron_sim", "neuronxcc", "nki")


def _from_the_backend(err: BaseException) -> bool:
    """Did the neuron backend or device raise ``err`` (rather than dynamo's tracing)?"""
    from torch._dynamo.exc import BackendCompilerFailed

    return isinstance(err, (BackendCompilerFailed, ExecutionError)) or type(err).__module__.split(".")[0] in _OUR_PACKAGES


def same_error(got: BaseException, want: BaseException, mode: str) -> bool:
    """Is the device's error ``got`` the one CPU raised (``want``)?"""
    if mode == "compile" and not _from_the_backend(got):
        # Dynamo traces with meta kernels, which check arguments in another order than CPU's
        # kernels and raise under dynamo's types: what it raises while tracing is PyTorch's.
        return True
    got = reported_error(got)
    if isinstance(got, (MemoryError, torch.OutOfMemoryError)) and not isinstance(want, (MemoryError, torch.OutOfMemoryError)):
        return False  # running out of memory is no answer to an error CPU reports
    if isinstance(got, NotImplementedError) and not isinstance(want, NotImplementedError):
        return False  # "not implemented" is no answer to an error CPU reports (a RuntimeError)
    return isinstance(got, type(want))


def _describe(err: BaseException) -> str:
    inner = reported_error(err)
    text = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {text[0] if text else ''}" + (f" (via {type(err).__name__})" if inner is not err else "")


# --- the comparison -------------------------------------------------------------------------------


def _storage(t: torch.Tensor):
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


@dataclass
class CpuRun:
    snapshots: set[int]  # rounded results a later step overwrites: cloned right after their step
    overwritten: set[str]  # values a later step writes (also through a view)
    error: tuple[int, BaseException] | None  # (step, what CPU raised there)
    operands: dict[int, list]  # step -> its operands, as they were before it ran


def analyse(program: dict) -> CpuRun:
    """The program on CPU: where it fails, and what the comparison must snapshot."""
    env = materialize_inputs(program, torch.device("cpu"))
    made: dict[str, int] = {input_name(i): -1 for i in range(len(program["inputs"]))}
    writes: list[tuple[int, object, torch.Tensor]] = []
    run = CpuRun(set(), set(), None, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, step in enumerate(program["steps"]):
            run.operands[i] = [env[n].clone() for n in step["args"]]
            try:
                result = run_step(step, env)
            except Exception as err:  # noqa: BLE001 - the program ends here on CPU
                run.error = (i, err)
                break
            env[step_name(i)] = result
            made[step_name(i)] = i
            if OPS[step["op"]].writes:  # the bytes of the result's storage; an empty one may be resized
                writes.append((i, _storage(result), result))
    run.overwritten = {name for name, at in made.items()
                       if any(i > at and (env[name] is t or ptr is not None and ptr == _storage(env[name])) for i, ptr, t in writes)}
    run.snapshots = {i for i, step in enumerate(program["steps"])
                     if step_name(i) in run.overwritten and OPS[step["op"]].check != "exact"}
    return run


def operand_shapes(program: dict) -> list[list[tuple[int, ...]]]:
    """The shapes of each step's operands on CPU (none for steps after the one CPU refuses)."""
    env = materialize_inputs(program, torch.device("cpu"))
    shapes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, step in enumerate(program["steps"]):
            shapes.append([tuple(env[n].shape) for n in step["args"]])
            try:
                env[step_name(i)] = run_step(step, env)
            except Exception:  # noqa: BLE001 - the program ends here on CPU
                break
    return shapes + [[] for _ in program["steps"][len(shapes):]]


def _reval(op, step):
    def reval(*operands):
        names = [f"r{i}" for i in range(len(operands))]
        return eval(op.reval_source(names, step.get("params", {})), NAMESPACE,  # noqa: S307
                    dict(zip(names, operands), dev=torch.device("cpu")))
    return reval


def compare(program: dict, mode: str, known=()) -> tuple[Mismatch | None, list[str]]:
    """Run ``program`` on the device in ``mode`` and against CPU. Returns the first mismatch no
    entry of ``known`` excuses (None: the device agrees) and the reasons of those excused."""
    cpu = analyse(program)
    dev = run_on_device(program, mode, cpu.snapshots)
    excused: list[str] = []

    def excuse(m: Mismatch) -> Mismatch | None:
        """``m``, unless an entry of ``known`` excuses it."""
        for reason, applies in known:
            if applies(program, mode, m):
                excused.append(reason)
                return None
        return m

    if cpu.error or dev.call_error or dev.sync_error:
        # Errors only: after one, the device's later work ran on what it had (or not at all).
        failure = _error_mismatch(program, mode, dev, cpu)
        if failure is not None:
            failure.operands = cpu.operands.get(failure.step, [])
            failure = excuse(failure)
        return failure, excused
    return _values_mismatch(program, dev, cpu, excuse), excused


def _values_mismatch(program: dict, dev: DeviceRun, cpu: CpuRun, excuse) -> Mismatch | None:
    """The first value the device got wrong, from a shadow run of the program on CPU."""
    shadow = materialize_inputs(program, torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, step in enumerate(program["steps"]):
            op = OPS[step["op"]]
            before = [shadow[n].clone() for n in step["args"]]
            try:
                want = run_step(step, shadow)
            except Exception:  # noqa: BLE001 - only with the device's rounded values: nothing to compare after it
                return None
            name = step_name(i)
            shadow[name] = want
            if name in cpu.overwritten and i not in cpu.snapshots:
                continue  # compared after the program, below
            got = dev.values.get(f"s{i}", dev.values.get(name))
            if isinstance(got, BaseException):
                return Mismatch("neuron error", i, f"reading the result raised {_describe(got)}")
            problem = _layout_problem(dev.layouts.get(name), want) if name not in cpu.overwritten else None
            kind = "layout" if problem else "value"
            problem = problem or differences(got, want, op.check, before, step.get("params", {}), _reval(op, step))
            if problem and excuse(mismatch := Mismatch(kind, i, problem, before, want, got)):
                return mismatch
            if kind == "layout" and want._base is None:
                shadow[name] = got.clone()  # an excused layout: go on from the device's strides too, or each view of it differs again
                continue
            if problem or op.check != "exact":
                try:
                    want.copy_(got)  # continue from the device's value
                except RuntimeError:
                    return None  # cannot take the device's value over (an overlapping view)
    for name, want in shadow.items():  # what the program left in the inputs and in overwritten values
        if not isinstance(want, torch.Tensor) or not (name in cpu.overwritten or name.startswith("x")):
            continue
        got = dev.values.get(name)
        if isinstance(got, BaseException):
            return Mismatch("neuron error", None, f"reading {name} raised {_describe(got)}")
        problem = _layout_problem(dev.layouts.get(name), want) or differences(got, want)
        if problem and excuse(mismatch := Mismatch("value", None, f"{name} after the program: {problem}", [], want, got)):
            return mismatch
    return None


def _check_only_cpu_kernels_make(program: dict, step: int, operands: list[torch.Tensor]) -> bool:
    """Is CPU's error at ``step`` one PyTorch's compile does not raise either: a check of dtypes
    or shapes (the op fails whatever the values: with operands, scalars and indices of ones and
    zeros too) that the meta kernels dynamo traces with do not make (the op passes on fake
    tensors)? Errors that depend on the values (a zero divisor, an index out of range, a
    negative power) must be raised by a compiled program too."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    names = program["steps"][step]["args"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run_step(_with_plain_values(program["steps"][step]),
                     dict(zip(names, [torch.ones_like(t) for t in operands]), dev=torch.device("cpu")))
            return False  # other values pass: the error depends on the values
        except Exception:  # noqa: BLE001
            pass
        try:
            with FakeTensorMode() as mode:
                fakes = [mode.from_tensor(t) for t in operands]
                run_step(program["steps"][step], dict(zip(names, fakes), dev=torch.device("cpu")))
            return True
        except Exception:  # noqa: BLE001 - the meta kernel makes the check too: compiled code must fail
            return False


_VALUE_PARAMS = ("s", "v", "lo", "hi", "p", "alpha")


def _with_plain_values(step: dict) -> dict:
    """``step`` with its scalar parameters 1 (of their type) and its index literals 0."""
    params = {}
    for name, value in step.get("params", {}).items():
        if name in _VALUE_PARAMS and isinstance(value, (bool, int, float)):
            value = type(value)(1)
        elif isinstance(value, dict) and "index" in value:
            value = {**value, "index": [0] * len(value["index"])}
        params[name] = value
    return {**step, "params": params}


def _refused_to_compile(err: BaseException) -> bool:
    from torch_neuronx.dynamo.errors import NeuronCompileError

    return isinstance(reported_error(err), NeuronCompileError)


def _layout_problem(got_layout, want: torch.Tensor) -> str | None:
    if got_layout is None or got_layout == layout(want):
        return None
    return f"dtype/shape/strides {got_layout} vs cpu {layout(want)}"


def _error_mismatch(program: dict, mode: str, dev: DeviceRun, cpu: CpuRun) -> Mismatch | None:
    device_error = dev.sync_error or (dev.call_error[1] if dev.call_error else None)
    cpu_error = cpu.error
    if cpu_error is None:
        if device_error is None:
            return None
        step = dev.call_error[0] if dev.call_error and dev.sync_error is None else None
        return Mismatch("neuron error", step, f"CPU ran the program; neuron raised {_describe(device_error)}")
    step, want = cpu_error
    if device_error is None:
        if mode == "compile" and _check_only_cpu_kernels_make(program, step, cpu.operands[step]):
            return None
        return Mismatch("missing error", step, f"CPU raised {type(want).__name__}: {want}; neuron raised nothing")
    if not same_error(device_error, want, mode):
        if mode == "compile" and _refused_to_compile(device_error) and _check_only_cpu_kernels_make(program, step, cpu.operands[step]):
            return None  # the backend refusing what only CPU's kernel refuses is a compiled answer, as raising nothing is
        return Mismatch("error type", step, f"CPU raised {type(want).__name__}: {str(want)[:200]}; neuron raised {_describe(device_error)}")
    if dev.sync_error is None and dev.call_error and dev.call_error[0] not in (None, step):
        return Mismatch("neuron error", dev.call_error[0],
                        f"neuron raised {_describe(device_error)} at step {dev.call_error[0]}; CPU raised it at step {step}")
    return None
