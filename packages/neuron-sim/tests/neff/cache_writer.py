"""Run in child processes by test_neff_cache_concurrency: hammer one cache key with writes.

Executed with ``runpy.run_path`` so spawned children need not import the test module itself
(which depends on how pytest put the tests on sys.path).
"""

from __future__ import annotations


def write_many(directory: str, key: str, writer: int, rounds: int) -> None:
    from neuron_sim.neff import Neff, NeffCache
    from neuron_sim.programs import tiled_matmul

    program = tiled_matmul(128, 128, 512 * (writer + 1))
    for i in range(rounds):
        # memory_entries=0 and a fresh put each round: every round really writes the file.
        NeffCache(directory, memory_entries=0).put(key, Neff(program, metadata={"writer": writer, "round": i}))


if __name__ == "__main__":
    write_many(DIRECTORY, KEY, WRITER, ROUNDS)  # noqa: F821 - injected by runpy.run_path(init_globals=...)
