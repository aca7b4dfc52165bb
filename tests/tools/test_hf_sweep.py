"""tools/hf_sweep.py: the config shrinking, the page, the per-architecture bounds, and a fast subset
of the sweep (llama, gpt2, bert) run end to end as CI's check of Transformers on neuron."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import hf_sweep  # noqa: E402

SUBSET = ["llama", "gpt2", "bert"]


def test_shrink_caps_sizes_cuts_layer_lists_and_keeps_token_ids_in_the_vocabulary():
    config = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 1,
        "num_hidden_layers": 5,
        "layer_types": ["sliding", "full", "sliding", "full", "sliding"],
        "vocab_size": 151936,
        "pad_token_id": 151643,
        "eos_token_id": 3,
        "image_token_id": 151655,
        "hidden_act": "silu",
        "vision_config": {"hidden_size": 1152, "image_size": 384, "depths": [2, 2, 18, 2], "hidden_sizes": [96, 192, 384, 768]},
        "id2label": {str(i): f"c{i}" for i in range(1000)},
        "tie_word_embeddings": True,
    }
    small = hf_sweep.shrink(config)
    assert small["hidden_size"] == 64 and small["num_attention_heads"] == 4 and small["num_hidden_layers"] == 2
    assert small["num_key_value_heads"] == 1  # capped, never raised: multi-query stays multi-query
    assert small["layer_types"] == ["sliding", "full"]
    assert small["vocab_size"] == 512 and small["eos_token_id"] == 3
    assert {small["pad_token_id"], small["image_token_id"]} <= set(range(512))
    assert small["pad_token_id"] != small["image_token_id"]
    assert small["vision_config"] == {
        "hidden_size": 64,
        "image_size": 32,
        "depths": [1, 1, 1, 1],
        "hidden_sizes": [32, 64, 128, 256],
    }
    assert len(small["id2label"]) == 2 and small["hidden_act"] == "silu" and small["tie_word_embeddings"] is True
    assert config["hidden_size"] == 4096  # the input is left alone
    seq2seq = hf_sweep.shrink({"is_encoder_decoder": True, "decoder_start_token_id": None, "pad_token_id": 1})
    assert seq2seq["decoder_start_token_id"] == 1


def test_every_kind_is_enumerated_once():
    archs = hf_sweep.architectures()
    names = [a[0] for a in archs]
    assert len(names) == len(set(names))
    kinds = {a[0]: a[1] for a in archs}
    assert (kinds["llama"], kinds["t5"], kinds["bert"], kinds["whisper"], kinds["wav2vec2"], kinds["vit"]) == (
        "decoder",
        "encoder-decoder",
        "encoder",
        "speech",
        "speech",
        "vision",
    )
    order = [a[1] for a in hf_sweep._interleaved(archs)][:5]
    assert order == hf_sweep.RUN_ORDER


def _row(arch, kind, **stages):
    return {
        "arch": arch,
        "kind": kind,
        "auto": "x",
        "fallback": ["aten::topk"] if kind == "decoder" else [],
        "reasons": {},
        "stages": {s: {"status": v[0], "message": v[1]} for s, v in stages.items()},
    }


def test_page_totals_causes_and_fallback_counts():
    ok = ("ok", "")
    rows = {
        "a": _row(
            "a",
            "decoder",
            build=ok,
            load=ok,
            forward=("error", "NotImplementedError: histc for 'Int' size 3"),
        ),
        "b": _row("b", "decoder", build=ok, load=ok, forward=("error", "NotImplementedError: histc for 'Int' size 7")),
        "c": _row(
            "c",
            "encoder",
            build=ok,
            load=ok,
            forward=ok,
            backward=("mismatch", "w: mismatch"),
            generate=("n/a", ""),
            compile_forward=ok,
            compile_backward=ok,
        ),
        "d": _row("d", "vision", build=("error", "TypeError: no config")),
    }
    page = hf_sweep.render(
        rows,
        dict(
            command="python tools/hf_sweep.py",
            commit="abc",
            transformers="5",
            torch="2",
            timeout=60,
            memory_gb=8,
            selected=["a", "b", "c", "d", "e"],
        ),
    )
    assert "| **all** | 4 | 3 / 4 | 3 / 3 | 1 / 3 | 0 / 1 | - | 1 / 1 | 1 / 1 |" in page
    assert "| 2 | forward: error: NotImplementedError: histc for 'Int' size N | a, b |" in page
    assert "| 1 | backward: mismatch: w: mismatch | c |" in page
    assert "| `aten::topk` | 2 |" in page
    assert "4 of the 5 architectures selected have rows; not run yet (the sweep resumes with them): e." in page
    assert "| c | encoder |" in page and "| d | vision |" in page


def test_an_architecture_past_its_bounds_is_ended_and_recorded(tmp_path):
    context = hf_sweep.process_context()
    row = hf_sweep.sweep_one("llama", "decoder", "AutoModelForCausalLM", str(tmp_path), timeout=0.5, memory_gb=8, context=context)
    stages = row["stages"]
    assert [s["status"] for s in stages.values()].count("timeout") == 1, stages
    assert all(s["status"] in ("ok", "timeout") for s in stages.values()), stages
    # 1.5 GiB of address space: less than torch alone maps, so the first allocations fail.
    row = hf_sweep.sweep_one(
        "llama", "decoder", "AutoModelForCausalLM", str(tmp_path), timeout=300, memory_gb=1.5, context=context
    )
    failed = hf_sweep.first_failure(row)
    assert failed is not None and failed[1]["status"] in ("error", "crashed"), row


def test_subset_matches_cpu_eager_and_compiled_and_resumes(tmp_path):
    rows_path, page = str(tmp_path / "rows.jsonl"), str(tmp_path / "hf.md")
    argv = ["--only", ",".join(SUBSET), "--rows", rows_path, "--output", page, "--timeout", "900"]
    assert hf_sweep.main(argv) == 0
    rows = hf_sweep.read_rows(rows_path)
    assert sorted(rows) == sorted(SUBSET)
    for arch in SUBSET:
        statuses = {s: r["status"] for s, r in rows[arch]["stages"].items()}
        expected = dict.fromkeys(hf_sweep.STAGES, "ok")
        if arch == "bert":
            expected["generate"] = "n/a"
        assert statuses == expected, (arch, rows[arch]["stages"])
    # Resumed: the rows file already holds every architecture, so nothing runs again.
    size = os.path.getsize(rows_path)
    assert hf_sweep.main(argv) == 0
    assert os.path.getsize(rows_path) == size
    text = open(page, encoding="utf-8").read()
    assert "| **all** | 3 | 3 / 3 | 3 / 3 | 3 / 3 | 3 / 3 | 2 / 2 | 3 / 3 | 3 / 3 |" in text
    assert "`python tools/hf_sweep.py --only llama,gpt2,bert" in text


def test_the_other_input_layout_a_task_takes():
    import torch

    features = torch.randn(2, 16, 32)
    assert hf_sweep._other_layout({"input_features": features})["input_features"].shape == (2, 32, 16)
    ids = torch.arange(16).reshape(2, 8)
    assert torch.equal(hf_sweep._other_layout({"input_ids": ids, "labels": ids[:, :6]})["labels"], ids)
    assert hf_sweep._other_layout({"input_ids": ids, "labels": ids}) is None
