"""torch-mlir's pass pipeline (Torch dialect -> StableHLO), run in a worker process with a memory
and a time bound.

    stablehlo = pipeline.lower(torch_bytecode, graph="graph0_backward")   # MLIR bytecode both ways

torch-mlir's passes are C++ that, on a graph they do not expect, can allocate without bound (a
``slice_scatter`` to ``end = 2**63 - 1`` pushed 2^63 indices: 22 GB and an out-of-memory kill),
loop, abort (``LLVM ERROR``) or segfault. In the compiling process any of these kills the user's
program, and eager mode lowers every ATen call through here. In the worker they become a
``LoweringStopped`` error naming the graph and the bound (eager mode then runs the op on CPU).

The worker is started at the first lowering of a process (it imports only the MLIR bindings, no
torch: ~0.3 s, overlapping the caller's FX import), serves one graph at a time and is restarted
after a crash, a bound or a fork. Bounds (docs/environment.md):

* ``NEURONX_CC_LOWERING_MEMORY_MB`` (default 4096): the worker's address space; 0 for none.
* ``NEURONX_CC_LOWERING_TIMEOUT`` (default 300): seconds per graph; 0 for none.
* ``NEURONX_CC_LOWERING_ISOLATION=0`` runs the passes in the compiling process instead: no
  bounds, and a crash kills the process (for debuggers).
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import NamedTuple

from .errors import FrontendError
from .pipeline_worker import PipelineError, encode_message, read_message, run_pipelines

MEMORY_ENV = "NEURONX_CC_LOWERING_MEMORY_MB"
TIMEOUT_ENV = "NEURONX_CC_LOWERING_TIMEOUT"
ISOLATION_ENV = "NEURONX_CC_LOWERING_ISOLATION"
DEFAULT_MEMORY_MB = 4096
DEFAULT_TIMEOUT_S = 300.0
_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline_worker.py")
_STDERR_TAIL = 2000  # bytes of the worker's stderr quoted when it dies (LLVM ERROR lines)
_STARTUP_S = 120.0  # the most a worker may take to start (~0.3 s on an idle machine)

__all__ = ["lower", "start", "bounds", "Bounds", "LoweringStopped", "PipelineError"]


class LoweringStopped(FrontendError):
    """torch-mlir's lowering of ``graph`` was stopped: it crashed, or went past its memory or time
    bound. ``reason`` says which, naming the bound, followed by torch-mlir's diagnostics when it
    left some (also in ``diagnostics``: (location, message) pairs)."""

    def __init__(self, graph: str, why: str, diagnostics=()):
        self.graph, self.diagnostics = graph, list(diagnostics)
        self.op = "torch-mlir"
        detail = "".join(f"\n  {loc}: {msg}" for loc, msg in self.diagnostics[:5])
        self.reason = f"torch-mlir's lowering was stopped: {why}{detail}"
        super().__init__(f"{graph}: {self.reason}")


class Bounds(NamedTuple):
    memory_mb: int
    timeout_s: float
    isolated: bool


def bounds() -> Bounds:
    """The bounds the environment sets now (read at every lowering, so tests and users can change them)."""
    return Bounds(_number(MEMORY_ENV, DEFAULT_MEMORY_MB, int), _number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, float),
                  os.environ.get(ISOLATION_ENV, "1").strip() not in ("0", "false", "no", "off"))


def _number(name: str, default, kind):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{name}={text!r}: expected a non-negative {'integer' if kind is int else 'number'} "
                         f"(0 turns the bound off)")
    return value


def start() -> None:
    """Start the worker without waiting for it (a caller about to lower overlaps its startup)."""
    b = bounds()
    if b.isolated:
        with _lock:
            try:
                _worker_for(b)
            except OSError:
                pass  # ``lower`` reports it


def lower(bytecode: bytes, graph: str) -> bytes:
    """The StableHLO module (bytecode) of a Torch-dialect module (bytecode) from torch-mlir's FX
    importer. Raises ``PipelineError`` when torch-mlir refuses the graph (its diagnostics say
    why), ``LoweringStopped`` when it crashed or went past a bound."""
    b = bounds()
    if not b.isolated:
        try:
            return run_pipelines(bytecode)
        except MemoryError as err:
            raise LoweringStopped(graph, f"out of memory ({err})", getattr(err, "diagnostics", ())) from None
    with _lock:
        try:
            worker = _worker_for(b)
        except OSError as err:
            raise LoweringStopped(graph, f"the lowering worker could not start ({err}); {ISOLATION_ENV}=0 lowers "
                                         "in the compiling process, without bounds") from None
        try:
            meta, payload = worker.request(bytecode, b.timeout_s)
        except TimeoutError:
            _retire(kill=True)
            raise LoweringStopped(graph, f"it ran longer than its time bound of {b.timeout_s:g} s ({TIMEOUT_ENV}; "
                                         "0 turns the bound off)") from None
        except (EOFError, OSError):  # it died: reaped as it exits, so its own signal is reported
            reason = _retire(kill=False).death(b.memory_mb)
            raise LoweringStopped(graph, reason) from None
        if not meta["ok"] and meta.get("memory"):
            _retire(kill=False)  # it exits by itself: its heap may be half-built
    if meta["ok"]:
        return payload
    diagnostics = [tuple(d) for d in meta.get("diagnostics", ())]
    if meta.get("memory"):
        raise LoweringStopped(graph, _memory_reason(b.memory_mb, meta["message"]), diagnostics)
    raise PipelineError(meta["stage"], meta["message"], diagnostics)


def _memory_reason(memory_mb: int, what: str) -> str:
    return (f"it needed more than its memory bound of {memory_mb} MB ({MEMORY_ENV}; 0 turns the bound off), "
            f"and the allocation failed ({what})")


class _Worker:
    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb
        self.owner = os.getpid()
        self.stderr = tempfile.TemporaryFile()  # shared offset with the child: rewound per request
        from torch_mlir import ir  # a namespace package: its ir module says where it lies

        # torch-mlir where this process found it; fewer malloc arenas, whose address space the
        # memory bound would count.
        site = os.path.dirname(os.path.dirname(os.path.abspath(ir.__file__)))
        env = dict(os.environ, MALLOC_ARENA_MAX="2",
                   PYTHONPATH=os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen([sys.executable, "-P", _WORKER_SCRIPT, str(memory_mb)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env, close_fds=True)
        self.to_worker, self.from_worker = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.ready = False
        os.set_blocking(self.to_worker, False)
        os.set_blocking(self.from_worker, False)

    def request(self, payload: bytes, timeout_s: float) -> tuple[dict, bytes]:
        if not self.ready:  # its startup (imports, pipelines parsed) is not the graph's time
            started = time.monotonic() + max(_STARTUP_S, timeout_s)
            try:
                message = read_message(lambda n: self._read(n, started))
            except TimeoutError:
                raise EOFError(f"the worker did not start within {max(_STARTUP_S, timeout_s):g} s") from None
            if message is None or not message[0].get("ready"):
                raise EOFError("the worker did not start")
            self.ready = True
        deadline = time.monotonic() + timeout_s if timeout_s else None
        os.ftruncate(self.stderr.fileno(), 0)
        os.lseek(self.stderr.fileno(), 0, os.SEEK_SET)
        data = memoryview(encode_message({}, payload))
        while data:
            self._wait(self.to_worker, deadline, write=True)
            try:
                data = data[os.write(self.to_worker, data):]
            except BlockingIOError:
                continue
        message = read_message(lambda n: self._read(n, deadline))
        if message is None:
            raise EOFError("the worker closed its output")
        return message

    def _read(self, n: int, deadline) -> bytes:
        while True:
            self._wait(self.from_worker, deadline, write=False)
            try:
                return os.read(self.from_worker, n)
            except BlockingIOError:
                continue

    @staticmethod
    def _wait(fd: int, deadline, write: bool) -> None:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError
        ready = select.select([], [fd], [], remaining)[1] if write else select.select([fd], [], [], remaining)[0]
        if not ready:
            raise TimeoutError

    def stop(self, kill: bool) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        if kill:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def death(self, memory_mb: int) -> str:
        """Why the (stopped) worker died, with the end of what it printed."""
        size = os.fstat(self.stderr.fileno()).st_size
        tail = os.pread(self.stderr.fileno(), _STDERR_TAIL, max(0, size - _STDERR_TAIL)).decode(errors="replace")
        self.stderr.close()
        tail = " | ".join(line.strip() for line in tail.strip().splitlines()[-8:] if line.strip())
        rc = self.proc.returncode
        if memory_mb and any(s in tail for s in ("bad_alloc", "MemoryError", "out of memory", "Cannot allocate")):
            return _memory_reason(memory_mb, tail)
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            what = f"torch-mlir crashed ({name})"
            if -rc == signal.SIGKILL:
                what += " - killed from outside, e.g. by the kernel when the machine ran out of memory"
        else:
            what = f"the lowering worker exited with code {rc}"
        return what + (f": {tail}" if tail else "")


_lock = threading.Lock()
_worker: _Worker | None = None


def _worker_for(b: Bounds) -> _Worker:
    global _worker
    if _worker is not None and (_worker.owner != os.getpid() or _worker.memory_mb != b.memory_mb
                                or _worker.proc.poll() is not None):
        _retire(kill=True)
    if _worker is None:
        _worker = _Worker(b.memory_mb)
    return _worker


def _retire(kill: bool) -> _Worker:
    global _worker
    worker, _worker = _worker, None
    if worker.owner == os.getpid():
        worker.stop(kill)
    return worker


def _forget_after_fork() -> None:
    """A forked child owns neither the parent's worker nor a lock another thread may have held."""
    global _worker, _lock
    _worker, _lock = None, threading.Lock()


def _shutdown() -> None:
    if _worker is not None and _worker.owner == os.getpid():
        _retire(kill=False)  # stdin closed: the worker returns from its loop


os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(_shutdown)
