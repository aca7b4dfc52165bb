"""A runtime created before fork() refuses to work in the child and says to use 'spawn'."""

from __future__ import annotations

import multiprocessing
import sys

import pytest
from neuron_sim.runtime import ForkedProcessError, Runtime, get_runtime, reset_runtime
from neuron_sim.trace import TraceSink

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork() does not exist on Windows")

TIMEOUT = 60


def _report(conn, action):
    try:
        action()
        conn.send(("ok", ""))
    except ForkedProcessError as err:
        conn.send(("forked", str(err)))
    except Exception as err:  # anything else is a test failure, reported as such
        conn.send(("other", f"{type(err).__name__}: {err}"))
    finally:
        conn.close()


def run_in_fork(action):
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_report, args=(child_conn, action))
    proc.start()
    child_conn.close()
    assert parent_conn.poll(TIMEOUT), "the child did not report (hung?)"
    result = parent_conn.recv()
    proc.join(TIMEOUT)
    assert proc.exitcode == 0
    return result


def test_get_runtime_in_forked_child_names_spawn():
    rt = get_runtime()
    rt.device(0).submit(lambda: None)  # the parent has live worker threads
    status, message = run_in_fork(lambda: get_runtime())
    assert status == "forked", message
    assert "spawn" in message and "set_start_method" in message
    rt.synchronize()  # the parent is unaffected


def test_using_an_inherited_queue_in_the_child_fails_cleanly():
    rt = Runtime(trace=TraceSink())
    queue = rt.device(0).default_queue
    status, message = run_in_fork(lambda: queue.submit(lambda: None))
    assert status == "forked", message
    status, message = run_in_fork(lambda: rt.synchronize())
    assert status == "forked", message
    status, message = run_in_fork(lambda: rt.device(0).allocate(64))
    assert status == "forked", message


def test_child_may_create_its_own_runtime_if_the_parent_had_none():
    reset_runtime()

    def child():
        rt = get_runtime()
        rt.device(0).submit(lambda: None)
        rt.synchronize()

    status, message = run_in_fork(child)
    assert status == "ok", message
