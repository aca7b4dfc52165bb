"""tools/upstream_tests: the runner on a tiny device-generic test file of our own (instantiated for
`neuron` through PyTorch's PrivateUse1 test base, as PyTorch's files are), and its aggregation."""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("upstream_tests_run", os.path.join(ROOT, "tools", "upstream_tests", "run.py"))
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)  # puts tools/upstream_tests on sys.path for the two below

import upstream_page  # noqa: E402
import upstream_results as results  # noqa: E402
from upstream_report import RunInfo, render  # noqa: E402

SYNTHETIC = textwrap.dedent('''
    import os
    import signal
    import time
    import unittest

    import torch
    from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
    from torch.testing._internal.common_utils import TestCase, run_tests


    class TestSynthetic(TestCase):
        def test_a_add(self, device):
            self.assertEqual(self.device_type, "neuron")
            x = torch.ones(3, device=device)
            self.assertEqual((x + x).cpu(), torch.full((3,), 2.0))

        @dtypes(torch.float32, torch.int32)
        def test_b_wrong_sum(self, device, dtype):
            self.assertEqual(torch.zeros(2, dtype=dtype, device=device).sum().item(), 7)

        def test_c_skipped(self, device):
            self.skipTest("not for this device")

        @unittest.expectedFailure
        def test_d_expected_failure(self, device):
            raise RuntimeError("known")

        def test_e_sleeps(self, device):
            time.sleep(600)

        def test_f_ignores_the_alarm(self, device):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(600)

        def test_g_aborts(self, device):
            os.abort()

        def test_h_after_the_crashes(self, device):
            self.assertEqual(torch.arange(4).sum().item(), 6)


    instantiate_device_type_tests(TestSynthetic, globals())

    if __name__ == "__main__":
        run_tests()
''')


def test_runner_counts_every_outcome_and_survives_hangs_and_crashes(tmp_path):
    test_dir = tmp_path / "test"
    test_dir.mkdir()
    (test_dir / "test_synthetic.py").write_text(SYNTHETIC)
    work = tmp_path / "work"
    work.mkdir()
    logs = []
    run.run_file(str(test_dir), "test_synthetic", str(work), test_timeout=10.0, file_timeout=600.0,
                 neff_cache=str(tmp_path / "neff"), grace=2.0, log=logs.append)
    events = results.read_events(str(work / "test_synthetic.jsonl"))
    f = results.file_result("test_synthetic", events)
    # A new process after the timeout (its state is not trusted), the hard timeout and the abort.
    assert [e["count"] for e in events if e["event"] == "collected"] == [9, 3, 2, 1]
    outcomes = {nodeid.split("::")[-1]: r.outcome for nodeid, r in f.results.items()}
    assert outcomes == {
        "test_a_add_neuron": "passed",
        "test_b_wrong_sum_neuron_float32": "failed",
        "test_b_wrong_sum_neuron_int32": "failed",
        "test_c_skipped_neuron": "skipped",
        "test_d_expected_failure_neuron": "xfailed",
        "test_e_sleeps_neuron": "timeout",
        "test_f_ignores_the_alarm_neuron": "timeout",
        "test_g_aborts_neuron": "crashed",
        "test_h_after_the_crashes_neuron": "passed",
    }, logs
    assert f.collected == 9 and f.running is None
    assert f.enabled() == 8 and f.passing() == 3
    by_name = {nodeid.split("::")[-1]: r for nodeid, r in f.results.items()}
    assert "SIGABRT" in by_name["test_g_aborts_neuron"].message
    assert "faulthandler" in by_name["test_f_ignores_the_alarm_neuron"].message
    assert "per-test bound of 10 s" in by_name["test_e_sleeps_neuron"].message
    # The ops of a test that ran on neuron tensors are recorded with it.
    assert by_name["test_a_add_neuron"].ops["executed"]
    assert {(r.key, r.count) for r in results.failure_reasons([f])} == {
        ("failed: AssertionError: Scalars are not close!", 1), ("failed: AssertionError: Scalars are not equal!", 1),
        ("timeout: neuron_upstream_plugin.UpstreamTestTimeout: test ran past the per-test bound of N s", 1),
        ("timeout: stuck past the per-test bound where Python could not interrupt it; ended by faulthandler", 1),
        ("crashed: process killed by SIGABRT", 1)}


def test_later_attempts_fill_in_and_a_torn_line_is_ignored(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [{"event": "collected", "count": 3},
             {"event": "start", "nodeid": "f::a"},
             {"event": "result", "nodeid": "f::a", "outcome": "passed", "message": "", "ops": None},
             {"event": "start", "nodeid": "f::b"},
             {"event": "result", "nodeid": "f::b", "outcome": "crashed", "message": "process killed by SIGSEGV"},
             {"event": "collected", "count": 1},  # the restart collects only what is left
             {"event": "start", "nodeid": "f::c"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"event": "resu')
    f = results.file_result("f", results.read_events(str(path)))
    assert f.collected == 3 and f.running == "f::c"
    assert f.counts()["not_run"] == 1 and f.counts()["crashed"] == 1
    assert f.pass_rate() == 1 / 3


def test_failure_classes_ignore_numbers_and_order_by_count():
    f = results.FileResult("t", collected=4)
    for i, message in enumerate(["RuntimeError: size 3 != 4 at 0x7f00", "RuntimeError: size 12 != 1 at 0xdead",
                                 "TypeError: bad", "AssertionError: x\nlong detail"]):
        f.results[f"t::{i}"] = results.TestResult(f"t::{i}", "failed", message)
    keys = [(r.key, r.count) for r in results.failure_reasons([f])]
    assert keys == [("failed: RuntimeError: size N != N at 0x?", 2), ("failed: AssertionError: x", 1),
                    ("failed: TypeError: bad", 1)]


def test_ops_are_counted_per_test_and_classified():
    f = results.FileResult("t", collected=3)
    ops = [{"executed": ["aten::add", "aten::nonzero"], "fallback": ["aten::nonzero"], "reasons": {}},
           {"executed": ["aten::add", "aten::sort"], "fallback": ["aten::sort"], "reasons": {"aten::sort": "too long"}},
           {"executed": ["aten::sort"], "fallback": [], "reasons": {}}]
    for i, o in enumerate(ops):
        f.results[f"t::{i}"] = results.TestResult(f"t::{i}", "passed", "", o)
    uses = {u.op: (u.tests, u.fallback_tests, u.where, u.reason) for u in results.op_uses(f)}
    assert uses == {"aten::add": (2, 0, "device", ""), "aten::nonzero": (1, 1, "CPU fallback", ""),
                    "aten::sort": (2, 1, "mixed", "too long")}
    text = render([f], RunInfo("python tools/upstream_tests/run.py x", "abc1234", "2.13.0", 120, 3600,
                               {"t": "pytorch/pytorch@1234"}, {"t": ["torch.testing._internal.common_utils.NEW"]}))
    assert "| t | 3 | 3 | 3 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 100.0% | 100.0% |" in text
    assert "| aten::sort | 1 / 2 | too long |" in text
    assert "t: torch.testing._internal.common_utils.NEW" in text


def test_resume_runs_only_what_an_earlier_run_left(tmp_path):
    test_dir = tmp_path / "test"
    test_dir.mkdir()
    (test_dir / "test_two.py").write_text(textwrap.dedent('''
        from torch.testing._internal.common_device_type import instantiate_device_type_tests
        from torch.testing._internal.common_utils import TestCase


        class TestTwo(TestCase):
            def test_a(self, device):
                pass

            def test_b(self, device):
                pass


        instantiate_device_type_tests(TestTwo, globals())
    '''))
    work = tmp_path / "work"
    work.mkdir()
    earlier = "test_two.py::TestTwoPRIVATEUSE1::test_a_neuron"
    (work / "test_two.jsonl").write_text(
        json.dumps({"event": "collected", "count": 2}) + "\n"
        + json.dumps({"event": "result", "nodeid": earlier, "outcome": "failed", "message": "earlier run"}) + "\n")
    run.run_file(str(test_dir), "test_two", str(work), test_timeout=60.0, file_timeout=600.0,
                 neff_cache=str(tmp_path / "neff"), resume=True, log=lambda line: None)
    f = results.file_result("test_two", results.read_events(str(work / "test_two.jsonl")))
    assert f.collected == 2
    assert {n.split("::")[-1]: r.outcome for n, r in f.results.items()} == {"test_a_neuron": "failed",
                                                                          "test_b_neuron": "passed"}


def test_keep_rows_from_an_earlier_page_merges_its_other_files():
    def page(name, collected, outcomes, message, op):
        f = results.FileResult(name, collected=collected)
        for i, outcome in enumerate(outcomes):
            ops = {"executed": [op], "fallback": [op], "reasons": {op: "why"}}
            f.results[f"{name}.py::T::t{i}"] = results.TestResult(f"{name}.py::T::t{i}", outcome, message, ops)
        return f

    info = RunInfo("python tools/upstream_tests/run.py x", "abc1234", "2.13.0", 60, 600,
                   {"test_a": "pytorch/pytorch@aaaa", "test_b": "pytorch/pytorch@bbbb"}, {})
    old = render([page("test_a", 5, ["passed", "failed", "failed", "skipped"], "RuntimeError: old a", "aten::sort"),
                  page("test_b", 2, ["failed", "failed"], "RuntimeError: old b", "aten::cumprod")], info)
    # test_b runs again: its old rows go, test_a's stay and rejoin the totals
    new_b = page("test_b", 3, ["passed", "passed", "failed"], "TypeError: new b", "aten::add")
    kept = upstream_page.read_page(old, exclude={"test_b"})
    assert set(kept.files) == {"test_a"}
    text = render([new_b], info, kept)
    assert "| test_a | pytorch/pytorch@aaaa |" in text and "| test_b | pytorch/pytorch@bbbb |" in text
    assert "| test_a | 5 | 4 | 1 | 2 | 0 | 0 | 0 | 1 | 1 | 0 | 0 | 25.0% | 33.3% |" in text
    assert "| test_b | 3 | 3 | 2 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 66.7% | 66.7% |" in text
    assert "| **total** | 8 | 7 | 3 | 3 | 0 | 0 | 0 | 1 | 1 | 0 | 0 | 42.9% | 50.0% |" in text
    assert "| 2 | failed: RuntimeError: old a | test_a |" in text and "old b" not in text
    assert "| 1 | failed: TypeError: new b | test_b |" in text
    assert "### test_a: ops that fell back" in text and "aten::cumprod" not in text
    assert text.index("| 2 | failed: RuntimeError: old a") < text.index("| 1 | failed: TypeError: new b")
    assert "Rows of test_a are kept from the earlier page" in text
    # and the merged page can itself be the next earlier page
    assert set(upstream_page.read_page(text, exclude=set()).files) == {"test_a", "test_b"}
