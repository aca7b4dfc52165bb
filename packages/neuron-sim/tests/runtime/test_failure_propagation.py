"""After a failure, memory the failed or skipped work should have written is invalid: later
reads of it - by launches, by host tasks that declare their memory, by a framework's host read -
raise the original error instead of returning garbage. A whole write makes it valid again;
freeing forgets it."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from neuron_sim import ExecutionError, InvalidMemoryError

NBYTES = 128 * 64 * 4


@pytest.fixture
def dev(runtime):
    return runtime.device(0)


def tensor(dev, fill=None):
    """A [128, 64] fp32 tensor in device memory (the allocation and its float view)."""
    block = dev.allocate(NBYTES, tag="t")
    view = block.view(np.float32, (128, 64))
    if fill is not None:
        view[...] = fill
    return block, view


def fail_into(q, h, out_block, context="aten::bad"):
    """A launch that fails and should have written ``out_block``."""
    return q.launch(h.failing_program(), {"x": np.ones((128, 64), np.float32), "y": out_block}, context=context)


def invalid_tensor(dev, h):
    """A device tensor a failed launch should have written, after its error was raised."""
    y, _ = tensor(dev)
    fail_into(dev.default_queue, h, y)
    with pytest.raises(ExecutionError):
        dev.default_queue.synchronize()
    return y


def copy(q, h, src, dst, name="copy"):
    return q.launch(h.copy_program(internal=False, name=name), {"x": src, "y": dst})


def test_memory_a_failed_launch_should_have_written_raises_the_original_error(dev, h):
    q = dev.default_queue
    y, _ = tensor(dev)
    sub = fail_into(q, h, y)
    with pytest.raises(ExecutionError) as first:
        q.synchronize()
    with pytest.raises(InvalidMemoryError) as info:
        dev.check_valid(y.address + 256, 64)
    err = info.value
    assert isinstance(err, ExecutionError)
    assert "holds no valid data" in str(err) and "reads_unset_register" in str(err) and "r_unset" in str(err)
    assert "context: aten::bad" in str(err)
    assert err.original is first.value.original and err.launch_id == sub.launch_id
    other, _ = tensor(dev)
    dev.check_valid(other.address, NBYTES)  # untouched memory is fine


def test_later_tasks_skipped_after_the_failure_leave_their_outputs_invalid_too(dev, h):
    q = dev.default_queue
    y, _ = tensor(dev)
    z, z_view = tensor(dev, fill=0.0)
    fail_into(q, h, y)
    copy(q, h, np.full((128, 64), 5.0, np.float32), z)  # skipped: the queue failed
    with pytest.raises(ExecutionError, match="1 later task"):
        q.synchronize()
    assert not z_view.any()  # never written...
    with pytest.raises(InvalidMemoryError, match="reads_unset_register") as info:
        dev.check_valid(z.address, NBYTES)  # ...and says why, with the original error
    assert "r_unset" in str(info.value.original)


def test_a_launch_reading_invalid_memory_after_the_error_was_raised_is_skipped_with_the_original_error(dev, h):
    q = dev.default_queue
    y = invalid_tensor(dev, h)  # its error raised and cleared: the queue runs again
    out, out_view = tensor(dev, fill=-1.0)
    sub = copy(q, h, y, out, name="reads_y")
    with pytest.raises(ExecutionError) as info:
        q.synchronize()
    err = info.value
    assert f"'reads_y' (#{sub.launch_id})" in str(err) and "was skipped: it reads bytes" in str(err)
    assert "'reads_unset_register'" in str(err) and "should have written" in str(err)
    assert "r_unset" in str(err.original) and err.origin_name == "reads_unset_register"
    assert (out_view == -1.0).all()  # did not run
    with pytest.raises(InvalidMemoryError):
        dev.check_valid(out.address, 4)  # and what it should have written is invalid in turn
    q.synchronize()  # the propagated failure was raised once


def test_propagation_crosses_queues_through_events(runtime, h):
    dev = runtime.device(0)
    producer, consumer = dev.new_queue("producer"), dev.new_queue("consumer")
    y, _ = tensor(dev)
    out, _ = tensor(dev)
    fail_into(producer, h, y)
    consumer.wait_event(producer.record_event())
    copy(consumer, h, y, out, name="consumer_reads_y")
    with pytest.raises(ExecutionError) as info:
        consumer.synchronize()
    assert "'consumer_reads_y'" in str(info.value) and "queue 'producer'" in str(info.value)
    assert "r_unset" in str(info.value.original)
    with pytest.raises(ExecutionError, match="reads_unset_register"):
        producer.synchronize()


def test_a_whole_write_makes_memory_valid_again_and_a_partial_one_only_that_part(dev, h):
    q = dev.default_queue
    y = invalid_tensor(dev, h)
    half = y.array[: NBYTES // 2]
    q.submit(lambda: half.fill(0), writes=[half], name="zero_first_half")
    q.synchronize()
    dev.check_valid(y.address, NBYTES // 2)
    with pytest.raises(InvalidMemoryError):
        dev.check_valid(y.address + NBYTES // 2, 4)
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    copy(q, h, x, y)  # the whole tensor, written by a launch
    q.synchronize()
    dev.check_valid(y.address, NBYTES)
    out, out_view = tensor(dev)
    copy(q, h, y, out)
    q.synchronize()
    np.testing.assert_array_equal(out_view, x)


def test_freeing_forgets_invalid_memory(dev, h):
    y = invalid_tensor(dev, h)
    assert dev.hbm.invalid.ranges(y.address) == [(y.address, y.address + NBYTES)]
    dev.free(y)
    assert dev.hbm.invalid.ranges(y.address) == []
    again = dev.allocate(NBYTES)  # the host allocator may hand the same bytes back: they are fresh
    dev.check_valid(again.address, NBYTES)


def test_host_tasks_that_declare_their_memory_take_part(dev, h):
    q = dev.default_queue
    y = invalid_tensor(dev, h)
    dst, dst_view = tensor(dev, fill=3.0)
    ran = []
    src_view = y.view(np.float32, (128, 64))[10:20]  # a numpy view of a slice: found back to its allocation

    def host_copy():
        ran.append(1)
        dst_view[10:20] = src_view

    q.submit(host_copy, reads=[src_view], writes=[dst_view[10:20]], kind="cpu_fallback", name="aten::slice_copy")
    with pytest.raises(ExecutionError, match=r"cpu_fallback task 'aten::slice_copy'.*was skipped") as info:
        q.synchronize()
    assert ran == [] and "r_unset" in str(info.value.original)
    with pytest.raises(InvalidMemoryError):
        dev.check_valid(dst.address + 10 * 64 * 4, 4)  # the rows it should have written
    dev.check_valid(dst.address, 10 * 64 * 4)  # rows it does not write stay valid
    with pytest.raises(TypeError, match="numpy views of device memory or HbmAllocations"):
        q.submit(lambda: None, reads=[(y.address, 16)])


def test_a_failing_host_task_leaves_what_it_declared_invalid(dev):
    q = dev.default_queue
    block, _ = tensor(dev)

    def fallback():
        raise ValueError("fallback op failed")

    q.submit(fallback, writes=[block], name="aten::weird")
    with pytest.raises(ExecutionError):
        q.synchronize()
    with pytest.raises(InvalidMemoryError, match="fallback op failed") as info:
        dev.check_valid(block.address, 8)
    assert isinstance(info.value.original, ValueError)


def test_plain_host_arrays_are_not_tracked(dev, h):
    q = dev.default_queue
    out = np.zeros((128, 64), np.float32)
    q.launch(h.failing_program(), {"x": np.ones((128, 64), np.float32), "y": out})
    with pytest.raises(ExecutionError):
        q.synchronize()
    copy(q, h, out, np.zeros((128, 64), np.float32))  # host memory: runs
    q.synchronize()


def test_blocking_mode_raises_at_once_and_marks_memory_too(blocking_runtime, h):
    dev = blocking_runtime.device(0)
    y, _ = tensor(dev)
    with pytest.raises(ExecutionError, match="r_unset"):
        fail_into(dev.default_queue, h, y)
    with pytest.raises(ExecutionError, match="was skipped"):
        copy(dev.default_queue, h, y, np.zeros((128, 64), np.float32))
    with pytest.raises(InvalidMemoryError):
        dev.check_valid(y.address, NBYTES)


def test_memory_marked_unwritten_is_invalid_from_its_place_in_the_queue_and_the_queue_does_not_fail(dev, h):
    # Work that failed before it reached the queue (its caller raised the error): marked in stream
    # order - a write queued before the mark does not make it valid - and raised by nothing but its uses.
    q = dev.default_queue
    y, _ = tensor(dev)
    z, _ = tensor(dev)
    gate = threading.Event()
    q.submit(lambda: gate.wait(30), name="gate")
    copy(q, h, np.ones((128, 64), np.float32), y)  # queued before the mark: runs first
    q.mark_unwritten([y.view(np.uint8, (NBYTES,))], KeyError("the fused compile failed"), name="run", context="3 fused ops")
    dev.check_valid(y.address, NBYTES)  # not yet: the mark has not been reached
    gate.set()
    q.synchronize()  # the error was the caller's: not raised again
    with pytest.raises(InvalidMemoryError, match="the fused compile failed") as info:
        dev.check_valid(y.address, NBYTES)
    assert isinstance(info.value.original, KeyError) and "context: 3 fused ops" in str(info.value)
    copy(q, h, y, z)  # reads it: skipped with that error
    with pytest.raises(ExecutionError, match="the fused compile failed"):
        q.synchronize()
    copy(q, h, np.zeros((128, 64), np.float32), y)  # written whole: valid again
    q.synchronize()
    dev.check_valid(y.address, NBYTES)


def test_a_launch_reports_the_error_its_errors_mapping_gives(dev, h):
    q = dev.default_queue
    y, _ = tensor(dev)
    q.launch(h.failing_program(), {"x": np.ones((128, 64), np.float32), "y": y},
             errors=lambda err: LookupError(f"the framework's words for: {type(err).__name__}"))
    with pytest.raises(ExecutionError, match="LookupError: the framework's words for: ExecutionError") as info:
        q.synchronize()
    original = info.value.original
    assert type(original) is LookupError and "r_unset" in str(original.__cause__)  # the simulator's, chained
    assert "(the device found ExecutionError" in str(info.value) and "r_unset" in str(info.value)  # and named
    with pytest.raises(InvalidMemoryError, match="LookupError") as read:
        dev.check_valid(y.address, NBYTES)
    assert read.value.original is original


@pytest.mark.parametrize(("mapping", "note"), [(lambda err: None, False), (lambda err: 1 / 0, True)], ids=["keeps it", "raises"])
def test_a_mapping_that_keeps_the_error_or_breaks_leaves_the_simulators(dev, h, mapping, note):
    q = dev.default_queue
    y, _ = tensor(dev)
    q.launch(h.failing_program(), {"x": np.ones((128, 64), np.float32), "y": y}, errors=mapping)
    with pytest.raises(ExecutionError, match="reads_unset_register") as info:
        q.synchronize()
    notes = " ".join(getattr(info.value.original, "__notes__", []))
    assert ("errors= mapping failed on it: ZeroDivisionError" in notes) == note, notes
