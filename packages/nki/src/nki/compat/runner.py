"""Run every unit file under some paths: batches of files per worker process, a few at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from .outcome import CRASH, TIMEOUT, Outcome
from .paths import find_units

BATCH = 16  # files per worker process
STARTUP_SECONDS = 120.0  # a worker's allowance for starting (imports) on top of its units' limits


def run_batch(files: list[str], root: str, unit_timeout: float, file_timeout: float) -> list[Outcome]:
    """Outcomes of ``files`` (all under ``root``); a file the worker did not finish is run alone,
    and reported as crashed or timed out if it takes its worker down again."""
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as out:
        path = out.name
    command = [sys.executable, "-m", "nki.compat.worker", *files, "--root", root, "--out", path,
               "--timeout", str(unit_timeout)]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    limit = STARTUP_SECONDS + file_timeout * len(files)
    error = ""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=limit, env=env, stdin=subprocess.DEVNULL)
        if proc.returncode:
            error = f"worker exited with status {proc.returncode}: " + " ".join((proc.stderr or proc.stdout).split()[-40:])
    except subprocess.TimeoutExpired:
        error = f"ran past {file_timeout:.0f} s"
    outcomes, done = [], set()
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "done" in record:
                done.add(record["done"])
            else:
                outcomes.append(Outcome(**record))
    os.unlink(path)
    unfinished = [f for f in files if os.path.relpath(f, root) not in done]
    if not unfinished:
        return outcomes
    outcomes = [o for o in outcomes if o.file not in {os.path.relpath(f, root) for f in unfinished}]
    if len(files) == 1:
        status = TIMEOUT if error.startswith("ran past") else CRASH
        return outcomes + [Outcome(os.path.relpath(files[0], root), "<file>", status, error or "the worker stopped")]
    for file in unfinished:
        outcomes += run_batch([file], root, unit_timeout, file_timeout)
    return outcomes


def run_paths(paths, unit_timeout: float = 300.0, file_timeout: float = 1800.0, jobs: int = 1,
              progress=None) -> list[Outcome]:
    units = find_units(paths)
    batches: list[tuple[list[str], str]] = []
    for file, root, _ in units:
        if batches and batches[-1][1] == root and len(batches[-1][0]) < BATCH:
            batches[-1][0].append(file)
        else:
            batches.append(([file], root))

    def one(batch):
        files, root = batch
        outcomes = run_batch(files, root, unit_timeout, file_timeout)
        if progress is not None:
            progress(outcomes)
        return outcomes

    results: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for outcomes in pool.map(one, batches):
            results.extend(outcomes)
    order = {os.path.relpath(f, r): i for i, (f, r, _) in enumerate(units)}
    return sorted(results, key=lambda o: order.get(o.file, len(order)))
