"""The fuzz harness itself: its checks fail on wrong results, its comparison notices every kind
of difference a device can make, and its programs reach the values, dtypes, layouts and ops
they are meant to (a fuzz that cannot fail, or never tries the hard cases, proves nothing)."""

from __future__ import annotations

import contextlib
import io
import math
import re
import warnings

import pytest
import tnx_fuzz_runner
import torch
from hypothesis import Phase, given, settings
from tnx_fuzz_checks import CHECKS, differences, layout
from tnx_fuzz_ops import OPS
from tnx_fuzz_profiles import DTYPES_ENV, INTEGER_DTYPES
from tnx_fuzz_programs import materialize_inputs, programs, run_step, source, step_name, undefined_cast
from tnx_fuzz_runner import compare

EPS32 = torch.finfo(torch.float32).eps


# --- checks ------------------------------------------------------------------------------------------


def test_exact_check_sees_one_unit_in_the_last_place_of_an_integer():
    assert differences(torch.tensor([16777217]), torch.tensor([16777217])) is None
    assert "neuron 16777216 vs cpu 16777217" in differences(torch.tensor([16777216]), torch.tensor([16777217]))
    assert differences(torch.tensor([True]), torch.tensor([False])) is not None


def test_exact_check_on_floats_wants_nan_where_cpu_has_nan():
    nan = math.nan
    assert differences(torch.tensor([nan, 1.0, -0.0]), torch.tensor([nan, 1.0, 0.0])) is None
    assert differences(torch.tensor([0.0]), torch.tensor([nan])) is not None
    assert differences(torch.tensor([nan]), torch.tensor([0.0])) is not None
    assert differences(torch.tensor([1.0 + EPS32]), torch.tensor([1.0])) is not None
    assert differences(torch.tensor([math.inf]), torch.tensor([-math.inf])) is not None


def test_nan_sign_check_takes_either_sign_of_a_nan_and_nothing_else():
    nan = math.nan
    assert differences(torch.tensor([True, False]), torch.tensor([False, False]), "nan_sign", [torch.tensor([nan, 1.0])]) is None
    assert differences(torch.tensor([False, True]), torch.tensor([False, False]), "nan_sign", [torch.tensor([nan, 1.0])]) is not None
    a, b = torch.tensor([2.0, 3.0]), torch.tensor([nan, -1.0])  # copysign(a, b): b's sign
    assert differences(torch.tensor([-2.0, -3.0]), torch.tensor([2.0, -3.0]), "nan_sign", [a, b]) is None
    assert differences(torch.tensor([-2.5, -3.0]), torch.tensor([2.0, -3.0]), "nan_sign", [a, b]) is not None
    assert differences(torch.tensor([-2.0, 3.0]), torch.tensor([2.0, -3.0]), "nan_sign", [a, b]) is not None


def test_ulp_check_allows_four_fp32_ulp_and_one_of_a_16_bit_output():
    x = torch.tensor([3.0])
    assert differences(x * (1 + 3 * EPS32), x, "ulp") is None
    assert differences(x * (1 + 8 * EPS32), x, "ulp") is not None
    bf = torch.tensor([3.0], dtype=torch.bfloat16)
    up_one = torch.tensor([3.015625], dtype=torch.bfloat16)  # the next bf16 above 3
    assert differences(up_one, bf, "ulp") is None
    assert differences(torch.tensor([3.03125], dtype=torch.bfloat16), bf, "ulp") is not None
    # at the overflow threshold, inf and the largest finite value are one rounding apart
    assert differences(torch.tensor([math.inf]), torch.tensor([torch.finfo(torch.float32).max]), "ulp") is None
    assert differences(torch.tensor([math.inf]), torch.tensor([1e38]), "ulp") is not None


def _sum_reval(*operands):
    return operands[0].sum()


def test_sum_check_bounds_by_the_magnitude_of_the_terms():
    x = torch.tensor([1e8, 1.0, -1e8])
    # fp32 may lose the 1 in any order of summation: allowed
    assert differences(torch.tensor(0.0), torch.tensor(1.0), "sum", [x], {}, _sum_reval) is None
    y = torch.tensor([1.0, 2.0, 3.0])
    assert differences(torch.tensor(6.0 + 8 * EPS32), torch.tensor(6.0), "sum", [y], {}, _sum_reval) is None
    assert differences(torch.tensor(6.01), torch.tensor(6.0), "sum", [y], {}, _sum_reval) is not None


def test_alpha_check_allows_the_rounding_of_the_product_only():
    a = torch.tensor([1096.6331787109375])
    fused, rounded_twice = torch.add(a, a, alpha=-1.5), a + (a * -1.5)  # CPU fuses: they differ by one ulp
    assert differences(rounded_twice, fused, "alpha", [a, a], {"alpha": -1.5}) is None
    assert differences(rounded_twice, fused) is not None
    assert differences(fused + 4 * 6.1e-5, fused, "alpha", [a, a], {"alpha": -1.5}) is not None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_alpha_check_allows_the_product_rounded_to_a_16_bit_dtype_as_cpu_rounds_it_when_strided(dtype):
    torch.manual_seed(0)
    a, b = (torch.randn(64) * 10).to(dtype), (torch.randn(64, 2) * 10).to(dtype)[:, 0]
    vectorized, strided = torch.add(a, b.contiguous(), alpha=3.3), torch.add(a, b, alpha=3.3)
    assert differences(strided, vectorized) is not None  # CPU's two loops: the same values, other answers
    assert differences(strided, vectorized, "alpha", [a, b], {"alpha": 3.3}) is None
    assert differences(vectorized, strided, "alpha", [a, b], {"alpha": 3.3}) is None
    off = strided.clone()
    off[5] += 4 * torch.finfo(dtype).eps * (3.3 * b[5].abs() + strided[5].abs() + 1)  # past both roundings
    assert differences(off, strided, "alpha", [a, b], {"alpha": 3.3}) is not None


def test_every_op_names_a_known_check():
    assert {op.check for op in OPS.values()} <= set(CHECKS)
    assert all(op.template.count("{a}") for op in OPS.values())


# --- the comparison notices what the device does wrong ----------------------------------------------

_ADD = {"inputs": [{"dtype": "int64", "shape": [3], "values": [1, 2, 16777217], "view": "{b}"}],
        "steps": [{"op": "add_s", "args": ["x0"], "params": {"s": 1}}, {"op": "neg", "args": ["v0"]}]}
_OUT_OF_RANGE = {"inputs": [{"dtype": "float32", "shape": [3], "values": [1.0, 2.0, 3.0], "view": "{b}"}],
                 "steps": [{"op": "index_select", "args": ["x0"], "params": {"dim": 0, "index": {"index": [5], "shape": [1]}}}]}


@pytest.fixture
def tamper(monkeypatch):
    """tamper(fn): the device run of the next compare goes through fn(run) first."""
    real = tnx_fuzz_runner.run_on_device

    def install(fn):
        def run_on_device(program, mode, snapshots):
            run = real(program, mode, snapshots)
            fn(run)
            return run
        monkeypatch.setattr(tnx_fuzz_runner, "run_on_device", run_on_device)
    return install


def test_the_untampered_programs_agree():
    assert compare(_ADD, "eager")[0] is None
    assert compare(_OUT_OF_RANGE, "eager")[0] is None


def test_a_wrong_value_is_reported_at_its_step(tamper):
    tamper(lambda run: run.values.__setitem__("v1", run.values["v1"] + 1))
    mismatch, _ = compare(_ADD, "eager")
    assert (mismatch.kind, mismatch.step) == ("value", 1)
    assert "v1 = -v0" in mismatch.report(_ADD, "eager")


def test_a_wrong_layout_is_reported(tamper):
    tamper(lambda run: run.layouts.__setitem__("v0", (torch.int64, (3,), (2,))))
    assert compare(_ADD, "eager")[0].kind == "layout"


def test_a_missing_error_is_reported(tamper):
    def forget(run):
        run.sync_error = run.call_error = None
    tamper(forget)
    mismatch, _ = compare(_OUT_OF_RANGE, "eager")
    assert (mismatch.kind, mismatch.step) == ("missing error", 0)


def test_an_error_of_another_type_is_reported(tamper):
    def replace(run):
        run.sync_error, run.call_error = RuntimeError("something else"), None
    tamper(replace)
    assert compare(_OUT_OF_RANGE, "eager")[0].kind == "error type"


def test_an_error_cpu_does_not_raise_is_reported(tamper):
    tamper(lambda run: setattr(run, "sync_error", RuntimeError("device only")))
    assert compare(_ADD, "adaptive")[0].kind == "neuron error"


def test_a_known_issue_is_excused_and_named(tamper):
    tamper(lambda run: run.values.__setitem__("v0", run.values["v0"] * 0))
    known = [("some-item - some-stream", lambda program, mode, m: m.kind == "value" and m.step == 0)]
    mismatch, excused = compare(_ADD, "eager", known)
    assert excused == ["some-item - some-stream"]
    # the check goes on from the device's (zeroed) v0, against which the device's -v0 is wrong
    assert (mismatch.kind, mismatch.step) == ("value", 1)


def test_an_excused_layout_is_not_reported_again_at_a_view_of_it(tamper):
    program = {"inputs": [{"dtype": "float32", "shape": [2, 3], "values": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "view": "{b}"}],
               "steps": [{"op": "neg", "args": ["x0"]}, {"op": "t", "args": ["v0"]}]}

    def transpose_the_layout(run):  # the device made v0 column-major (values right), so its view v1 follows
        run.values["v0"] = run.values["v0"].t().contiguous().t()
        run.values["v1"] = run.values["v0"].t()
        run.layouts.update(v0=layout(run.values["v0"]), v1=layout(run.values["v1"]))
    tamper(transpose_the_layout)
    assert compare(program, "eager")[0].kind == "layout"
    known = [("some-item - some-stream", lambda program, mode, m: m.kind == "layout" and m.step == 0)]
    assert compare(program, "eager", known) == (None, ["some-item - some-stream"])


# --- the programs reach the hard cases ----------------------------------------------------------------


def _draw(n: int) -> list[dict]:
    drawn = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate], deadline=None)
    @given(program=programs())
    def collect(program):
        drawn.append(program)

    collect()
    return drawn


@pytest.fixture(scope="module")
def drawn_programs():
    with pytest.MonkeyPatch.context() as patch:  # every dtype, whatever this run's TNX_FUZZ_DTYPES
        patch.delenv(DTYPES_ENV, raising=False)
        return _draw(400)  # 300 drew no NaN input once the op table grew (the draws shift with it)


def test_the_dtype_filter_draws_only_integer_inputs(monkeypatch):
    monkeypatch.setenv(DTYPES_ENV, "integer")
    assert {spec["dtype"] for p in _draw(30) for spec in p["inputs"]} <= set(INTEGER_DTYPES)
    monkeypatch.setenv(DTYPES_ENV, "int64,float64")
    with pytest.raises(ValueError, match="TNX_FUZZ_DTYPES='int64,float64'"):
        _draw(1)


def _flat_values(spec):
    return spec["values"]["pool"] if isinstance(spec["values"], dict) else spec["values"]


def test_programs_cover_dtypes_values_and_layouts(drawn_programs):
    inputs = [spec for p in drawn_programs for spec in p["inputs"]]
    assert {spec["dtype"] for spec in inputs} == {"float32", "bfloat16", "float16", "int64", "int32", "int16", "int8",
                                                "uint8", "bool"}
    ints = [v for s in inputs if s["dtype"] in ("int64", "int32") for v in _flat_values(s)]
    assert any(abs(v) > 2 ** 24 for v in ints) and any(abs(v) > 2 ** 53 for v in ints)
    floats = [v for s in inputs if s["dtype"] in ("float32", "bfloat16", "float16") for v in _flat_values(s)]
    assert any(math.isnan(v) for v in floats) and any(math.isinf(v) for v in floats)
    assert any(v == 0 and math.copysign(1, v) < 0 for v in floats)
    views = " ".join(spec["view"] for spec in inputs)
    for kind in (".transpose(", ".expand(", ".as_strided(", ".narrow("):
        assert kind in views
    assert re.search(r"\[[^\]]*:\d+:[23]\]", views)  # a slice with a step
    shapes = [spec["shape"] for spec in inputs]
    assert any(0 in s for s in shapes) and any(1 in s for s in shapes) and any(s == [] for s in shapes)


def test_programs_use_the_whole_op_table(drawn_programs):
    used = {step["op"] for p in drawn_programs for step in p["steps"]}
    assert len(used) > 0.85 * len(OPS), sorted(set(OPS) - used)
    assert len({OPS[name].check for name in used}) >= len(CHECKS) - 2
    assert any(OPS[name].writes for name in used) and any(name.endswith("_out") for name in used)


def test_most_programs_run_to_their_end_and_print_as_scripts(drawn_programs):
    finished = 0
    for program in drawn_programs[:100]:
        env = materialize_inputs(program, torch.device("cpu"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                for i, step in enumerate(program["steps"]):
                    env[step_name(i)] = run_step(step, env)
                finished += 1
            except Exception:  # noqa: BLE001 - programs may end in an error
                continue
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                exec(source(program, device="cpu"), {})  # noqa: S102 - the printed reproducer runs
        names = [n for n in env if n != "dev"]
        assert all(f"{name} tensor(" in printed.getvalue() for name in names), printed.getvalue()
    assert finished >= 40  # the rest end in an error drawn on purpose (a dim, an index, an operand of a kind the op refuses)


def test_programs_make_no_undefined_casts_through_out_tensors():
    # a float reduction written into an integer out= tensor casts: NaN, inf or a value out of the
    # integer's range give values C++ leaves undefined (CPU: -2**31 for NaN into int32)
    x = torch.tensor([math.nan, 1.0], dtype=torch.bfloat16)
    into_int32 = {"dim": 0, "n": 3, "out_dtype": {"dtype": "int32"}}
    assert undefined_cast(OPS["sum_out"], into_int32, [x])
    assert undefined_cast(OPS["cumsum_out_into"], {"dim": 0}, [x, torch.zeros(2, dtype=torch.int64)])
    assert not undefined_cast(OPS["sum_out"], into_int32, [torch.tensor([2.5, 1.0])])
    assert not undefined_cast(OPS["sum_out"], {**into_int32, "out_dtype": {"dtype": "float16"}}, [x])
    assert not undefined_cast(OPS["cumsum_out_into"], {"dim": 0}, [torch.tensor([-3, 7]), torch.zeros(2, dtype=torch.int8)])


def test_logsumexp_check_of_an_empty_operand():
    x = torch.empty(4, 0, 7)
    for d in (0, 1):
        want = x.logsumexp(d)
        assert differences(want.clone(), want, "logsumexp", [x], {"dim": d}, lambda r, d=d: r.logsumexp(d)) is None


# --- the tally of a run -------------------------------------------------------------------------------


def test_each_program_ends_as_one_outcome_named_by_its_rows():
    from tnx_fuzz_tally import outcome_of

    limitation = "no lowering"
    assert outcome_of([], {limitation}, None, False) == ("clean", [])
    assert outcome_of(["fuzz-14", "fuzz-14"], {limitation}, None, False) == ("excused", ["fuzz-14"])
    assert outcome_of(["fuzz-14", limitation], {limitation}, None, False) == ("neuron_only", ["fuzz-14", limitation])
    assert outcome_of(["fuzz-14"], {limitation}, None, True) == ("finding", ["fuzz-14"])
    assert outcome_of([], {limitation}, "segfaults", False) == ("not_run", ["segfaults"])


def test_the_tally_counts_programs_per_mode_and_row_until_the_finding(tmp_path):
    import json

    from tnx_fuzz_tally import Tally

    path = tmp_path / "tally.json"
    tally = Tally(path=str(path), meta={"seed": 7})
    tally.record("eager", "clean")
    tally.record("eager", "excused", ["fuzz-14"])
    tally.record("eager", "neuron_only", ["no lowering", "fuzz-14"])
    tally.record("compile", "clean")
    tally.record("eager", "finding", program={"inputs": [], "steps": []}, report="neuron differs")
    tally.record("eager", "clean")  # hypothesis shrinking the finding: no new program
    saved = json.loads(path.read_text())
    assert saved["meta"] == {"seed": 7}
    eager = saved["modes"]["eager"]
    assert (eager["programs"], eager["clean"], eager["excused"], eager["neuron_only"]) == (4, 1, 1, 1)
    assert eager["rows"] == {"fuzz-14": 2, "no lowering": 1}
    assert eager["finding"] == {"program": {"inputs": [], "steps": []}, "report": "neuron differs"}
    assert saved["modes"]["compile"]["programs"] == 1
    assert tally.summary()[0].startswith("eager: 4 programs, 1 clean, 1 excused (known issues), 1 neuron-only errors")
    with pytest.raises(ValueError, match="outcome 'passed'"):
        tally.record("eager", "passed")


def test_nan_bits_row_excuses_only_differences_inside_nans():
    from types import SimpleNamespace

    from tnx_fuzz_known import KNOWN_ISSUES

    applies = dict(KNOWN_ISSUES)[next(reason for reason, _ in KNOWN_ISSUES if reason.startswith("nan-bits"))]
    program = {"inputs": [{"dtype": "int64"}], "steps": [{"op": "view_dtype", "params": {"dtype": {"dtype": "bfloat16"}}}]}
    cpu_nan = torch.tensor([0x7FC07FC07FC07FC0, 5])
    device_nan = torch.tensor([-0x003F003F003F0040, 5])  # 0xffc0ffc0ffc0ffc0: four -NaN bfloat16
    assert applies(program, "eager", SimpleNamespace(kind="value", got=device_nan, expected=cpu_nan))
    assert not applies(program, "eager", SimpleNamespace(kind="value", got=torch.tensor([0x7FC07FC07FC07FC0, 6]), expected=cpu_nan))
    no_views = {"inputs": [{"dtype": "int64"}], "steps": [{"op": "neg"}]}
    assert not applies(no_views, "eager", SimpleNamespace(kind="value", got=device_nan, expected=cpu_nan))
