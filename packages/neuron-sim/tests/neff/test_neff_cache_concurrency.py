"""Concurrent writers of one key, in threads and in processes, leave a valid NEFF behind, and a
reader running meanwhile never sees a partial file."""

from __future__ import annotations

import multiprocessing
import os
import runpy
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

from neuron_sim.neff import Neff, NeffCache, NeffCacheWarning, cache_key
from neuron_sim.programs import tiled_matmul

KEY = cache_key("concurrency")
WRITER_SCRIPT = str(Path(__file__).with_name("cache_writer.py"))


def _check_final_entry(directory: Path, writers: int, rounds: int) -> None:
    path = NeffCache(directory).path_for(KEY)
    neff = Neff.load(path)
    writer, round_ = neff.metadata["writer"], neff.metadata["round"]
    assert 0 <= writer < writers and 0 <= round_ < rounds
    # The program must belong to the writer named in the metadata: no mixing of two files.
    assert neff.program.tensors[1].shape == (128, 512 * (writer + 1))
    assert os.listdir(path.parent) == [path.name]  # no temporary files left behind


def _read_until(directory: Path, done: Callable[[], bool]) -> None:
    """Read the key from disk over and over while writers run; a partial file would be reported
    as corrupt by a warning, which is turned into a failure here."""
    reader = NeffCache(directory, memory_entries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeffCacheWarning)
        while not done():
            reader.get(KEY)


def test_threads_writing_the_same_key(tmp_path):
    writers, rounds = 6, 15
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []
    finished = threading.Event()
    programs = [tiled_matmul(128, 128, 512 * (w + 1)) for w in range(writers)]

    def write(w: int) -> None:
        try:
            cache = NeffCache(tmp_path, memory_entries=0)
            barrier.wait()
            for i in range(rounds):
                cache.put(KEY, Neff(programs[w], metadata={"writer": w, "round": i}))
        except BaseException as err:  # noqa: BLE001 - collected and asserted on in the main thread
            errors.append(err)

    def read() -> None:
        try:
            _read_until(tmp_path, finished.is_set)
        except BaseException as err:  # noqa: BLE001 - collected and asserted on in the main thread
            errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    reader = threading.Thread(target=read)
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finished.set()
    reader.join()
    assert errors == []
    _check_final_entry(tmp_path, writers, rounds)


def test_two_processes_writing_the_same_key(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    rounds = 25
    processes = [
        ctx.Process(
            target=runpy.run_path,
            args=(WRITER_SCRIPT,),
            kwargs={
                "init_globals": {"DIRECTORY": str(tmp_path), "KEY": KEY, "WRITER": w, "ROUNDS": rounds},
                "run_name": "__main__",
            },
        )
        for w in range(2)
    ]
    for p in processes:
        p.start()
    _read_until(tmp_path, lambda: not any(p.is_alive() for p in processes))
    for p in processes:
        p.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0]
    _check_final_entry(tmp_path, 2, rounds)
