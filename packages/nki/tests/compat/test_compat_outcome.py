"""nki.compat's classification of what a unit raised: a hardware rule behind a test harness's own
exception (``raise HarnessError(...) from err``) is still a rejection with its rule and line."""

from neuron_sim.errors import ValidationError
from nki.compat.outcome import CRASH, REJECTED, WRONG, classify


class HarnessError(Exception):
    pass


def _wrapped(err: BaseException) -> HarnessError:
    try:
        try:
            raise err
        except Exception as inner:
            raise HarnessError(str(inner)) from inner
    except HarnessError as outer:
        return outer


def test_a_rule_error_wrapped_by_a_harness_is_a_rejection():
    rule = ValidationError("partition.limit", "256 partitions", "/repo/kernels.py:12")
    status, detail = classify(_wrapped(rule), "/repo")
    assert status == REJECTED and detail == "[partition.limit] 256 partitions at kernels.py:12"


def test_other_errors_stay_crashes_and_failed_asserts_wrong():
    assert classify(_wrapped(KeyError("x")), "/repo")[0] == CRASH
    assert classify(AssertionError("mismatch"), "/repo")[0] == WRONG


def test_units_that_need_jax_or_torch_xla_are_counted_apart():
    from nki.compat.outcome import Outcome
    from nki.compat.report import summary

    outcomes = [Outcome("a.py", "<script>", "ok"), Outcome("b.py", "<script>", "crash", "ModuleNotFoundError: No module "
                                                           "named 'torch_xla' at b.py:3"),
                Outcome("c.py", "<script>", "crash", "ModuleNotFoundError: No module named 'jaxtyping' at c.py:1")]
    s = summary(outcomes)
    assert (s["other_framework"], s["ok_percent"], s["ok_percent_nki"]) == (1, 33.3, 50.0)


def test_a_unit_timeout_inside_a_failed_launch_is_a_timeout():
    from neuron_sim.errors import ExecutionError
    from nki.compat.outcome import TIMEOUT, UnitTimeout

    launch_failure = ExecutionError("launch 'matmul' (#1) failed")
    launch_failure.original = UnitTimeout("ran past the 60 s limit")
    assert classify(launch_failure, "/repo") == (TIMEOUT, "ran past the 60 s limit")
