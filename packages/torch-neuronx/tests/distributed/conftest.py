"""Multi-process runs for the distributed tests: ``run_ranks(scenario)`` starts one process per
rank on ``ranks_worker.py`` (127.0.0.1 only, a free port, a hard timeout) and returns each rank's
exit code, ``RESULT`` and output. A rank still running at the timeout fails the test (a hang),
after every rank was killed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import pytest

WORKER = os.path.join(os.path.dirname(__file__), "ranks_worker.py")


@dataclass
class RankRun:
    rank: int
    returncode: int
    result: object  # the scenario's RESULT (None if the rank printed none)
    stdout: str
    stderr: str


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Runs(list):
    """Every rank's RankRun; ``describe()`` for assertion messages."""

    def describe(self) -> str:
        return "\n".join(f"--- rank {r.rank} rc {r.returncode} result {r.result!r}\n{r.stderr[-4000:]}" for r in self)


def run_ranks(scenario: str, world_size: int = 2, *, timeout: float = 400.0, env: dict | None = None) -> Runs:
    with tempfile.TemporaryDirectory(prefix=f"ranks-{scenario}-") as scratch:
        port = str(_free_port())
        procs, logs = [], []
        for rank in range(world_size):
            rank_env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                            LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                            GLOO_SOCKET_IFNAME="lo", **(env or {}))
            out = open(os.path.join(scratch, f"rank{rank}.out"), "w+")
            err = open(os.path.join(scratch, f"rank{rank}.err"), "w+")
            logs.append((out, err))
            procs.append(subprocess.Popen([sys.executable, WORKER, scenario, scratch], env=rank_env, stdout=out, stderr=err,
                                          text=True))
        hung = []
        for rank, p in enumerate(procs):
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                hung.append(rank)
                for q in procs:
                    q.kill()
                for q in procs:
                    q.wait()
                break
        runs = Runs()
        for rank, (p, (out, err)) in enumerate(zip(procs, logs)):
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
            out.close()
            err.close()
            results = [line[len("RESULT "):] for line in stdout.splitlines() if line.startswith("RESULT ")]
            runs.append(RankRun(rank, p.returncode, json.loads(results[-1]) if results else None, stdout, stderr))
        if hung:
            tails = "\n".join(f"--- rank {r.rank} (rc {r.returncode}) stderr:\n{r.stderr[-3000:]}" for r in runs)
            pytest.fail(f"scenario {scenario!r}: rank(s) {hung} still running after {timeout} s (a hang); all killed\n{tails}")
        return runs


@pytest.fixture
def ranks():
    """``ranks(scenario, world_size=2, timeout=..., env=...)`` -> Runs (one RankRun per rank)."""
    return run_ranks
