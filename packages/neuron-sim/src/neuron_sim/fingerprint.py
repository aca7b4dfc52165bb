"""Fingerprints of source trees: what a cached artifact was made by.

A NEFF cache entry, or a timing summary stored in a NEFF, is only as good as the code that made
it. Version numbers miss every change made between releases (and this package's never moves), so
each package hashes the files of the code that shapes what it produces - ``code_fingerprint()``
here for neuron-sim, ``neuronxcc.compiler.code_fingerprint()`` for the compiler,
``torch_neuronx.compiled.cache.code_fingerprint()`` for the PyTorch backend - and caches key on
all of them. Hashing every byte of a few hundred small files takes milliseconds, once per process.
"""

from __future__ import annotations

import functools
import hashlib
import os

# Build artifacts and bytecode: made from the sources (or, for the C++ shim, unrelated to what a
# NEFF holds), and large enough to make hashing slow.
_SKIPPED_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".dylib", ".dll")

# neuron-sim code that runs programs rather than defining them: the runtime (devices, queues,
# launches), trace delivery and the executors, including the fast executor's host-speed machinery.
# Everything else - the ISA and its validation, the program builder, programs, the graph IR and
# op registry, dtypes, memories, the timing model, the architecture tables, the NEFF format -
# shapes a NEFF or its timing, and is hashed. A new module is hashed unless it is listed here.
RUNS_PROGRAMS = ("runtime", "trace", "executor")


def tree_fingerprint(*roots: str | os.PathLike, exclude: tuple[str, ...] = ()) -> str:
    """SHA-256 (hex) over every file under ``roots``: each file's path relative to its root's
    parent, its length and its bytes, in a fixed order. ``exclude`` lists paths relative to a
    root ("runtime", "graph/plan.py") to leave out. Bytecode, native libraries, ``__pycache__``
    and hidden files (editor swap files) are skipped."""
    digest = hashlib.sha256()
    for root in roots:
        root = os.path.abspath(root)
        base = os.path.dirname(root)
        for folder, dirs, files in os.walk(root):
            here = os.path.relpath(folder, root).replace(os.sep, "/")
            prefix = "" if here == "." else here + "/"
            dirs[:] = sorted(d for d in dirs if not _skipped(d) and prefix + d not in exclude)
            for name in sorted(files):
                if _skipped(name) or name.endswith(_SKIPPED_SUFFIXES) or prefix + name in exclude:
                    continue
                path = os.path.join(folder, name)
                with open(path, "rb") as f:
                    data = f.read()
                label = os.path.relpath(path, base).replace(os.sep, "/").encode()
                digest.update(b"%d:%s:%d:" % (len(label), label, len(data)))
                digest.update(data)
    return digest.hexdigest()


def _skipped(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


@functools.cache
def code_fingerprint() -> str:
    """The fingerprint of the neuron-sim code that shapes a NEFF or its timing (see
    ``RUNS_PROGRAMS`` for what is left out). Computed once per process."""
    return tree_fingerprint(os.path.dirname(os.path.abspath(__file__)), exclude=RUNS_PROGRAMS)
