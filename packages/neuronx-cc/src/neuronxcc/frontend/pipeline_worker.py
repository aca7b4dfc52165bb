"""torch-mlir's pass pipelines, Torch dialect -> StableHLO, and the worker process that runs them.

``run_pipelines`` is the lowering itself (over the MLIR bindings in the torch-mlir wheel only:
no torch, no neuronxcc). Run as a script (``python -P pipeline_worker.py MEMORY_MB``), this file
is the worker ``pipeline`` starts: it caps its own address space, says it is ready, then answers
requests on stdin/stdout until stdin closes. A message is a ``>IQ`` header (JSON length, payload
length), the JSON, then the payload (MLIR bytecode); no pickle.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import threading

# torch-mlir's StableHLO pipeline legalizes chlo.erf into a ~40-op rational polynomial (116
# instructions and 250 us for a 1M-element erf, the bulk of gelu), where the NeuronCore has erf as
# one ScalarE activation. So the torch ops are converted first, each chlo.erf is swapped for a
# custom call the legalization leaves alone (read back as erf by our StableHLO importer), and the
# whole pipeline then runs as torch-mlir defines it (its first pass finds nothing left to convert).
ERF_CALL_TARGET = "neuron.erf"

# (what the stage does, its pass pipeline): torch-mlir's own FX -> Torch backend pipeline (as
# ``torch_mlir.fx.stateless_fx_import`` runs it), then its Torch backend -> StableHLO pipeline.
STAGES = [
    ("lowering the FX import to the Torch backend",
     "builtin.module(func.func(torch-match-quantized-custom-ops), torchdynamo-export-to-torch-backend-pipeline{extra-library=})"),
    ("converting Torch ops to StableHLO", "builtin.module(func.func(convert-torch-to-stablehlo{allow-non-finites=true}))"),
    ("lowering the Torch backend to StableHLO",
     "builtin.module(torch-backend-to-stablehlo-backend-pipeline{allow-non-finites=true})"),
]

HEADER = struct.Struct(">IQ")


class PipelineError(Exception):
    """A stage of the pipeline failed the ordinary way: torch-mlir reported why (``diagnostics``:
    (location, message) pairs)."""

    def __init__(self, stage: str, message: str, diagnostics: list):
        super().__init__(f"{stage} failed: {message}")
        self.stage, self.message, self.diagnostics = stage, message, diagnostics


class _Pipelines:
    """torch-mlir's pipelines parsed once into a context that lowers module after module: a
    fresh context and pass managers per module (patterns built anew for every pass) cost two
    thirds of a small graph's lowering. The context's uniqued types and attributes grow with each
    module, so it is rebuilt every ``REUSES`` modules, and after any failure."""

    REUSES = 256

    def __init__(self):
        from torch_mlir import ir
        from torch_mlir.dialects import torch as torch_dialect
        from torch_mlir.passmanager import PassManager

        self.ir = ir
        self.ctx = ir.Context()
        torch_dialect.register_dialect(self.ctx)
        # One function per module: threads would only add address space (each its stack and
        # malloc arena) to what the memory bound counts.
        self.ctx.enable_multithreading(False)
        self.ctx.emit_error_diagnostics = True  # passes that emit errors without failing would assert
        self.diagnostics: list = []
        # torch-mlir's errors go into our message instead of onto stderr.
        self.handler = self.ctx.attach_diagnostic_handler(self._on_diagnostic)
        with self.ctx:
            self.managers = [PassManager.parse(pipeline) for _stage, pipeline in STAGES]
        self.uses = 0

    def _on_diagnostic(self, d) -> bool:
        self.diagnostics.append((str(d.location), str(d.message)))
        return True

    def run(self, bytecode: bytes) -> bytes:
        self.uses += 1
        self.diagnostics = []
        stage = "parsing the Torch module"
        try:
            with self.ctx:
                module = self.ir.Module.parse(bytecode)
                unconverted = []
                for i, manager in enumerate(self.managers):
                    stage = STAGES[i][0]  # named in the error if this stage fails
                    manager.run(module.operation)
                    if i == 1:  # erf converted to chlo.erf, not yet legalized
                        _keep_unsigned_constants(module, self.ir)
                        unconverted = _keep_erf_whole(module, self.ir)
                out = io.BytesIO()
                module.operation.write_bytecode(out)
                return out.getvalue()
        except Exception as err:
            if isinstance(err, MemoryError) or "bad_alloc" in str(err):  # std::bad_alloc from the bindings
                failure = MemoryError(f"{stage}: {str(err) or 'MemoryError'}")
                failure.diagnostics = self.diagnostics
                raise failure from None
            raise PipelineError(stage, str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__,
                                _naming_unconverted(self.diagnostics, unconverted if stage == STAGES[2][0] else []),
                                ) from None


_pipelines: _Pipelines | None = None
_pipelines_lock = threading.Lock()  # lowering in the compiling process may come from several threads


def run_pipelines(bytecode: bytes) -> bytes:
    """The StableHLO module (bytecode) of a Torch-dialect module from the FX importer (bytecode)."""
    global _pipelines
    with _pipelines_lock:
        if _pipelines is None or _pipelines.uses >= _Pipelines.REUSES:
            _pipelines = _Pipelines()
        try:
            return _pipelines.run(bytecode)
        except BaseException:
            _pipelines = None
            raise


def _keep_erf_whole(module, ir) -> list:
    """Each chlo.erf swapped for our erf call; returns the Torch ops the conversion left
    (``_naming_unconverted``)."""
    erfs, unconverted = [], []

    def visit(op):
        if op.name == "chlo.erf":
            erfs.append(op)
        elif op.name.startswith(("torch.aten.", "torch.prims.", "torch.operator")):
            unconverted.append((str(op.location), op.name if op.name != "torch.operator" else
                                str(ir.StringAttr(op.attributes["name"]).value)))

    _walk(module.operation, visit)
    for erf in erfs:
        with ir.InsertionPoint(erf), erf.location:
            call = ir.Operation.create("stablehlo.custom_call", results=[erf.results[0].type], operands=list(erf.operands),
                                       attributes={"call_target_name": ir.StringAttr.get(ERF_CALL_TARGET)})
        erf.results[0].replace_all_uses_with(call.results[0])
        erf.erase()
    return unconverted


def _keep_unsigned_constants(module, ir) -> None:
    """An optimization barrier between each unsigned ``stablehlo.constant`` and the Torch value
    made of it. The backend pipeline's canonicalizer folds ``torch_c.from_builtin_tensor`` of a
    constant back into a ``torch.vtensor.literal``, which it cannot legalize for unsigned types
    ("failed to legalize operation 'torch.vtensor.literal'" for a compiled uint8 ``zero_`` or
    ``fill_``); the barrier is an identity our importer reads through."""
    casts = []

    def visit(op):
        if op.name == "torch_c.from_builtin_tensor" and _is_unsigned_constant(op.operands[0], ir):
            casts.append(op)

    _walk(module.operation, visit)
    for cast in casts:
        constant = cast.operands[0]
        with ir.InsertionPoint(cast), cast.location:
            barrier = ir.Operation.create("stablehlo.optimization_barrier", results=[constant.type], operands=[constant])
        cast.operands[0] = barrier.results[0]


def _is_unsigned_constant(value, ir) -> bool:
    owner = value.owner
    if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
        owner = owner.operation
    if getattr(owner, "name", None) != "stablehlo.constant":
        return False
    try:
        integer = ir.IntegerType(ir.ShapedType(value.type).element_type)
    except ValueError:  # a float constant
        return False
    return integer.is_unsigned


def _naming_unconverted(diagnostics: list, unconverted: list) -> list:
    """torch-mlir's diagnostics, led by one per Torch op its conversion to StableHLO left. An op
    with no lowering that is not explicitly marked illegal (``aten.diagonal``, ``aten.kthvalue``)
    fails the backend contract on its first operand instead - "failed to legalize operation
    'torch.constant.int'" (or a constant tensor's 'torch.vtensor.literal') - which names a number,
    not the op."""
    operands = ("failed to legalize operation 'torch.constant.", "failed to legalize operation 'torch.prim.",
                "failed to legalize operation 'torch.vtensor.literal'")
    if not any(operand in m for _loc, m in diagnostics for operand in operands):
        return list(diagnostics)
    named = [(loc, f"failed to legalize operation '{name}': torch-mlir has no StableHLO lowering of it")
             for loc, name in dict.fromkeys(unconverted)]
    return named + list(diagnostics)


def _walk(op, visit) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                visit(inner.operation)
                _walk(inner.operation, visit)


# --- the worker process --------------------------------------------------------------------------


def read_message(read) -> tuple[dict, bytes] | None:
    """One message through ``read(n)`` (which returns at most n bytes, b"" at the end); None at
    a clean end of input."""
    head = _read_exactly(read, HEADER.size)
    if head is None:
        return None
    n_json, n_payload = HEADER.unpack(head)
    meta = _read_exactly(read, n_json)
    payload = _read_exactly(read, n_payload) if n_payload else b""
    if meta is None or payload is None:
        raise EOFError("the message ended early")
    return json.loads(meta), payload


def _read_exactly(read, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = read(n - got)
        if not chunk:
            if got == 0:
                return None
            raise EOFError(f"the message ended after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def encode_message(meta: dict, payload: bytes = b"") -> bytes:
    data = json.dumps(meta).encode()
    return HEADER.pack(len(data), len(payload)) + data + payload


def _die_with_parent() -> None:
    """Linux: the kernel kills this worker when the compiling process dies (even by SIGKILL), so
    a pass still running cannot outlive it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve(memory_mb: int) -> None:
    _die_with_parent()
    if memory_mb > 0:
        import resource

        limit = memory_mb << 20
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    # The protocol owns fd 1: anything else printing (a library, a stray print) goes to stderr.
    channel = os.dup(1)
    os.dup2(2, 1)
    requests = sys.stdin.buffer.raw
    global _pipelines
    _pipelines = _Pipelines()  # before the first request: its time bound is the graph's alone
    _write_all(channel, encode_message({"ready": True}))
    while True:
        message = read_message(requests.read)
        if message is None:
            return
        _meta, payload = message
        try:
            reply = encode_message({"ok": True}, run_pipelines(payload))
        except PipelineError as err:
            reply = encode_message({"ok": False, "stage": err.stage, "message": err.message,
                                    "diagnostics": err.diagnostics})
        except MemoryError as err:
            # The heap may be half-built: answer, then exit so the next request gets a fresh worker.
            _write_all(channel, encode_message({"ok": False, "memory": True, "message": str(err) or "MemoryError",
                                                "diagnostics": getattr(err, "diagnostics", [])}))
            os._exit(3)
        _write_all(channel, reply)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":
    serve(int(sys.argv[1]))
