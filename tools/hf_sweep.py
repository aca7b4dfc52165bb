"""Every architecture of the installed transformers on `neuron`, as a new user would try it; writes
docs/hf_coverage.md.

    nice -n 10 python tools/hf_sweep.py [--only llama,gpt2,bert] [--jobs 1] [--rows ROWS.jsonl]
        [--timeout 600] [--memory-gb 8] [--output docs/hf_coverage.md]
    python tools/hf_sweep.py --render-only --rows ROWS.jsonl      # the page from earlier rows

The architectures are the model types of transformers' auto mappings, one task each (the first
that applies): speech sequence-to-sequence, encoder-decoder (seq2seq LM), encoder (masked LM),
decoder (causal LM), speech CTC, vision (image classification). Each one, in its own process
(bounded in wall time and in address space, RLIMIT_AS):

1. **build**: its default config shrunk generically (``shrink``: widths, heads, layers, vocab,
   experts, image and audio sizes), the model made from it with random weights and saved
   (``save_pretrained``, safetensors);
2. **load**: ``from_pretrained(dir)`` on CPU and ``from_pretrained(dir, device_map="neuron")``;
3. **forward** / **backward**: the same batch through both, outputs and every parameter's
   gradient compared (``FORWARD_TOL`` / ``GRAD_TOL``, relative to the largest CPU value);
4. **generate**: greedy ``generate`` on both (generative tasks), the tokens compared exactly;
5. **compile**: ``torch.compile(model, backend="neuron")`` forward and backward against eager
   neuron.

Fallback ops are the names of the ``NeuronFallbackWarning``s the process saw. Rows are appended to
a JSON-lines file as each architecture ends (a later row replaces an earlier one), so an
interrupted sweep resumes where it stopped; ``--rerun`` runs the listed ones again.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import multiprocessing
import os
import re
import shlex
import signal
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "upstream_tests"))
sys.path.insert(0, HERE)

from run import _read, _record, repo_commit  # noqa: E402
from upstream_report import _cell  # noqa: E402
from upstream_results import read_events, reason_key  # noqa: E402

# (kind, auto mapping, auto class): the first mapping an architecture is in decides its task.
TASKS = [
    ("speech", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "AutoModelForSpeechSeq2Seq"),
    ("encoder-decoder", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM"),
    ("encoder", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM"),
    ("decoder", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM"),
    ("speech", "MODEL_FOR_CTC_MAPPING_NAMES", "AutoModelForCTC"),
    ("vision", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "AutoModelForImageClassification"),
]
# The run order takes one architecture of each kind in turn (decoders first), so an interrupted
# sweep still covers every kind.
RUN_ORDER = ["decoder", "encoder-decoder", "encoder", "speech", "vision"]
GENERATIVE = {"AutoModelForSpeechSeq2Seq", "AutoModelForSeq2SeqLM", "AutoModelForCausalLM"}
STAGES = ["build", "load", "forward", "backward", "generate", "compile_forward", "compile_backward"]
# Outputs (and gradients) match when max|neuron - cpu| <= TOL * max|cpu| (+ a floor for all-zero
# tensors): the NeuronCore rounds reductions in its own order and uses its engines' activation
# functions, and a whole model compounds that over its layers.
FORWARD_TOL = 1e-3
GRAD_TOL = 1e-2
COMPILE_TOL = 1e-3
BATCH, SEQ, NEW_TOKENS = 2, 8, 4
SAMPLES = 1600  # raw audio samples (CTC models)
FALLBACK = re.compile(r"Operator '([^']+)' executed via CPU fallback")

# -- the small config ------------------------------------------------------------------------

# config key -> small value; ints only (None and lists are handled below).
SMALL = {
    **dict.fromkeys(
        (
            "hidden_size",
            "d_model",
            "n_embd",
            "embed_dim",
            "dim",
            "word_embed_proj_dim",
            "embedding_size",
            "projection_dim",
            "d_embed",
            "encoder_hidden_size",
        ),
        64,
    ),
    **dict.fromkeys(
        (
            "num_attention_heads",
            "n_head",
            "num_heads",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "n_heads",
            "num_decoder_attention_heads",
        ),
        4,
    ),
    **dict.fromkeys(
        ("num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_kv_heads", "decoder_num_key_value_heads"), 2
    ),
    **dict.fromkeys(("head_dim", "kv_channels", "d_kv", "attention_head_size"), 16),
    **dict.fromkeys(
        (
            "intermediate_size",
            "ffn_dim",
            "n_inner",
            "d_ff",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "hidden_dim",
            "ffn_hidden_size",
            "moe_ffn_hidden_size",
            "expert_intermediate_size",
            "dim_feedforward",
            "d_inner",
            "decoder_intermediate_size",
            "moe_shared_expert_intermediate_size",
        ),
        64,
    ),
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "n_layer",
            "num_layers",
            "encoder_layers",
            "decoder_layers",
            "num_decoder_layers",
            "n_layers",
            "num_encoder_layers",
            "decoder_num_hidden_layers",
        ),
        2,
    ),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "num_selected_experts", "moe_k", "top_k"), 2),
    **dict.fromkeys(("n_group", "topk_group", "n_shared_experts", "num_shared_experts"), 1),
    **dict.fromkeys(("q_lora_rank", "kv_lora_rank"), 32),
    **dict.fromkeys(("qk_rope_head_dim", "qk_nope_head_dim"), 8),
    "v_head_dim": 16,
    "vocab_size": 512,
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_target_positions", "n_ctx"), 128),
    "max_source_positions": 16,  # whisper-style encoders take exactly 2x this many frames
    "image_size": 32,
    "num_mel_bins": 16,
    "feature_size": 16,
    "input_feat_per_channel": 16,
    "num_labels": 2,
    "num_groups": 4,  # group norms over the small channel counts (bit)
}
# list-valued keys: every entry made small.
SMALL_LISTS = {
    "hidden_sizes": 32,
    "embed_dims": 32,
    "depths": 1,
    "num_heads": 1,
    "conv_dim": 32,
    "neck_hidden_sizes": 32,
    "hidden_dims": 32,
}
# Derived from the layer or stage count: left for the config to recompute.
DERIVED = ("out_features", "out_indices", "stage_names")
LAYER_KEYS = [k for k, v in SMALL.items() if v == 2 and "layers" in k or k in ("n_layer", "n_layers")]


def shrink(config: dict) -> dict:
    """A small copy of a config's ``to_dict()``: SMALL keys capped (never raised), list keys
    made small, lists as long as the layer count cut to the new count, token ids inside the new
    vocabulary, sub-configs (dict values) shrunk the same way."""
    out = {k: v for k, v in config.items() if k not in DERIVED}
    layers = next((config[k] for k in LAYER_KEYS if isinstance(config.get(k), int)), None)
    for key, value in config.items():
        if key in DERIVED:
            continue
        if isinstance(value, dict) and key not in ("id2label", "label2id", "rope_scaling", "rope_parameters"):
            out[key] = shrink(value)
        elif key in SMALL and isinstance(value, int) and not isinstance(value, bool):
            out[key] = min(value, SMALL[key])
        elif key in SMALL_LISTS and isinstance(value, list) and all(isinstance(v, int) for v in value):
            out[key] = [min(v, SMALL_LISTS[key] * (2**i if key.endswith(("sizes", "dims")) else 1)) for i, v in enumerate(value)]
        elif isinstance(value, list) and layers and len(value) == layers and layers > 2:
            out[key] = value[:2]
    vocab = out.get("vocab_size")
    if isinstance(vocab, int):
        for key, value in list(out.items()):
            if key.endswith(("token_id", "token_index")) and isinstance(value, int) and value >= vocab:
                out[key] = vocab - 1 - sorted(k for k in out if k.endswith(("token_id", "token_index"))).index(key)
    if out.get("is_encoder_decoder"):
        # A released checkpoint sets them; the default config of some (cohere_asr, encoder-decoder) does not.
        if out.get("pad_token_id") is None:
            out["pad_token_id"] = 0
        if "decoder_start_token_id" in out and out["decoder_start_token_id"] is None:
            start = next((out.get(k) for k in ("bos_token_id", "pad_token_id") if isinstance(out.get(k), int)), 0)
            out["decoder_start_token_id"] = start
    if out.get("id2label"):
        out["id2label"] = {str(i): f"LABEL_{i}" for i in range(2)}
        out["label2id"] = {f"LABEL_{i}": i for i in range(2)}
    return out


def architectures() -> list[tuple[str, str, str]]:
    """(model type, kind, auto class) for every model type in TASKS' mappings, sorted by type."""
    from transformers.models.auto import modeling_auto

    found: dict[str, tuple[str, str]] = {}
    for kind, mapping, auto in TASKS:
        for model_type in getattr(modeling_auto, mapping):
            found.setdefault(model_type, (kind, auto))
    return sorted((t, k, a) for t, (k, a) in found.items())


# -- one architecture (the child process) ----------------------------------------------------


class Row:
    """One architecture's results, rewritten to ``path`` after every stage (what a killed child
    leaves says which stage it died in)."""

    def __init__(self, path: str, model_type: str, kind: str, auto: str):
        self.path = path
        self.data = {"arch": model_type, "kind": kind, "auto": auto, "stages": {}, "fallback": [], "reasons": {}}

    def set(self, stage: str, status: str, message: str = "") -> None:
        self.data["stages"][stage] = {"status": status, "message": message}
        self.write()

    def write(self) -> None:
        with open(self.path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.data, f, sort_keys=True)
        os.replace(self.path + ".tmp", self.path)


def _error(err: BaseException) -> str:
    """The exception's type and first line; a first line that only introduces the cause (Dynamo's
    "backend='neuron' raised:") is joined with the next."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return f"{type(err).__name__}: {text}"[:400]


def _tensors(value) -> list:
    import torch
    from torch.utils._pytree import tree_flatten

    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    return [x for x in tree_flatten(value)[0] if isinstance(x, torch.Tensor)]


def _mismatch(expected, actual, tol: float) -> str | None:
    """None if every floating tensor of ``actual`` is within ``tol`` of ``expected`` (relative
    to the largest expected value), else which one is not (op_coverage.compare does the rest)."""
    from op_coverage import compare, to_cpu

    exp, act = _tensors(expected), [to_cpu(x) for x in _tensors(actual)]
    if len(exp) != len(act):
        return f"{len(act)} output tensors, CPU gives {len(exp)}"
    for i, (e, a) in enumerate(zip(exp, act)):
        scale = float(e.detach().abs().max()) if e.is_floating_point() and e.numel() else 0.0
        tolerances = {e.dtype: dict(rtol=tol, atol=tol * scale + 1e-6)} if e.is_floating_point() else {}
        why = compare(e.detach(), a.detach(), e.dtype, tolerances=tolerances)
        if why is not None:
            return f"output {i}: {why}"
    return None


def _grad_mismatch(expected: dict, actual: dict, tol: float) -> str | None:
    if set(expected) != set(actual):
        missing = sorted(set(expected) ^ set(actual))
        return f"gradients differ in which parameters have one: {', '.join(missing[:3])}"
    for name in sorted(expected):
        why = _mismatch(expected[name], actual[name], tol)
        if why is not None:
            return f"{name}: {why.removeprefix('output 0: ')}"
    return None


def _inputs(model, config, kind: str, auto: str) -> dict:
    """One batch for ``model``'s main input (random, seeded), with labels where the task's loss
    takes them."""
    import torch

    g = torch.Generator().manual_seed(0)
    name = model.main_input_name
    if name == "input_ids":
        try:
            vocab = model.get_input_embeddings().num_embeddings
        except NotImplementedError:  # a composite model (dia) that leaves it to its parts
            vocab = _setting(config, ("vocab_size",), SMALL["vocab_size"])
        ids = torch.randint(3, vocab, (BATCH, SEQ), generator=g)
        batch = {"input_ids": ids}
        # Seq2seq-LM mappings also hold decoder-only models (audio LMs): their labels are the ids.
        if auto in ("AutoModelForCausalLM", "AutoModelForMaskedLM") or not config.is_encoder_decoder:
            batch["labels"] = ids.clone()
        else:
            batch["labels"] = torch.randint(3, vocab, (BATCH, SEQ - 2), generator=g)
        return batch
    if name == "pixel_values":
        channels = _setting(config, ("num_channels",), 3)
        size = _setting(config, ("image_size",), 32)
        size = size[0] if isinstance(size, (list, tuple)) else size
        return {
            "pixel_values": torch.randn(BATCH, channels, size, size, generator=g),
            "labels": torch.randint(0, 2, (BATCH,), generator=g),
        }
    if name == "input_features":
        bins = _setting(config, ("num_mel_bins", "feature_size", "input_feat_per_channel"), 16)
        positions = _setting(config, ("max_source_positions",), None)
        frames = 2 * positions if positions else 64
        features = torch.randn(BATCH, bins, frames, generator=g)
        batch = {"input_features": features}
        vocab = _setting(config, ("vocab_size",), None)
        if vocab:
            batch["labels"] = torch.randint(3, vocab, (BATCH, SEQ - 2), generator=g)
        return batch
    if name == "input_values":
        return {"input_values": torch.randn(BATCH, SAMPLES, generator=g)}
    raise ValueError(f"no inputs for main input {name!r} of {type(model).__name__}")


def _setting(config, keys: tuple[str, ...], default):
    """The first of ``keys`` that ``config`` or one of its sub-configs (an encoder's, an audio or
    vision tower's) sets to an int."""
    configs = [config, *(v for v in vars(config).values() if hasattr(v, "to_dict") and hasattr(v, "model_type"))]
    for key in keys:
        for c in configs:
            value = getattr(c, key, None)
            if isinstance(value, int) and not isinstance(value, bool) or isinstance(value, (list, tuple)) and value:
                return value
    return default


def _other_layout(batch: dict) -> dict | None:
    """The batch in the other layout some models of a task take, when CPU rejected the first:
    (batch, frames, features) as speech_to_text and the conformer (parakeet) encoders take them,
    not whisper's (batch, features, frames); labels as long as the inputs for a seq2seq model
    that shifts its inputs, not its labels, into the decoder (fsmt)."""
    if "input_features" in batch:
        return {**batch, "input_features": batch["input_features"].transpose(1, 2).contiguous()}
    if "input_ids" in batch and "labels" in batch and batch["labels"].shape != batch["input_ids"].shape:
        return {**batch, "labels": batch["input_ids"].clone()}
    return None


def _to(batch: dict, device: str) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def _loss(output):
    """The model's loss where it computed one, else the mean square of its first output."""
    loss = getattr(output, "loss", None)
    if loss is not None:
        return loss
    first = next(x for x in _tensors(output) if x.is_floating_point())
    return first.float().pow(2).mean()


def _logits(output):
    """What the forward is compared by: the logits, or every tensor output but the loss."""
    logits = getattr(output, "logits", None)
    if logits is not None:
        return logits
    return [x for k, x in output.items() if k != "loss"] if hasattr(output, "items") else output


def _grads(model) -> dict:
    return {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters() if p.grad is not None}


def run_architecture(model_type: str, kind: str, auto: str, out_path: str, work_dir: str) -> None:
    """Every stage for one architecture; each stage's outcome goes to ``out_path`` as it ends."""
    import warnings

    row = Row(out_path, model_type, kind, auto)
    caught: list[str] = []

    def show(message, category, *args, **kwargs):
        match = FALLBACK.search(str(message))
        if match and match.group(1) not in caught:
            caught.append(match.group(1))
            row.data["fallback"] = list(caught)

    warnings.showwarning = show
    warnings.simplefilter("always")
    stage = "build"
    row.set(stage, "running")
    try:
        import torch
        import torch_neuronx
        import transformers

        cls = getattr(transformers, auto)
        torch.manual_seed(0)
        config = transformers.AutoConfig.for_model(model_type)
        small = {k: v for k, v in shrink(config.to_dict()).items() if k not in ("model_type", "transformers_version")}
        config = type(config)(**small)
        model = cls.from_config(config)
        with torch.no_grad():
            # Some architectures zero-initialize a weight matrix (afmoe's router gate): every token's
            # scores tie exactly and topk's order among equals, which PyTorch leaves unspecified,
            # decides the routing. A trained checkpoint has no such ties.
            for p in model.parameters():
                if p.is_floating_point() and p.dim() >= 2 and not p.any():
                    p.normal_(0.0, 0.02)
        row.data["class"] = type(model).__name__
        row.data["params"] = sum(p.numel() for p in model.parameters())
        directory = os.path.join(work_dir, model_type)
        model.save_pretrained(directory)
        # The CPU reference is part of the build: a model the sweep cannot run on CPU says
        # nothing about neuron.
        cpu = cls.from_pretrained(directory).eval()
        batch = _inputs(cpu, cpu.config, kind, auto)
        torch.manual_seed(0)
        try:
            expected = cpu(**batch)
        except Exception:
            batch = _other_layout(batch)
            if batch is None:
                raise
            torch.manual_seed(0)
            expected = cpu(**batch)
        _loss(expected).backward()
        cpu_grads = _grads(cpu)
        row.set(stage, "ok")

        stage = "load"
        row.set(stage, "running")
        dev = cls.from_pretrained(directory, device_map="neuron").eval()
        placed = {p.device.type for p in dev.parameters()}
        if placed != {"neuron"}:
            raise RuntimeError(f"device_map='neuron' left parameters on {sorted(placed)}")
        row.set(stage, "ok")

    except BaseException as err:  # noqa: BLE001 - the failure is the finding
        row.set(stage, "error", _error(err))
        traceback.print_exc()
        return
    # Eager, then compiled: an eager error does not stop the compiled run, which is then compared
    # with CPU instead of eager neuron.
    eager_logits, eager_grads = _eager(row, cpu, dev, batch, expected, cpu_grads, auto)
    if eager_grads is not None:
        _compiled(row, dev, batch, eager_logits, eager_grads, against="eager")
    else:
        _compiled(row, dev, batch, [x.detach() for x in _tensors(_logits(expected))], cpu_grads, against="CPU")
    row.data["reasons"] = {k: v.strip().splitlines()[0][:200] for k, v in torch_neuronx.get_fallback_reasons().items()}
    row.write()


def _eager(row: Row, cpu, dev, batch: dict, expected, cpu_grads: dict, auto: str):
    """forward, backward, generate on neuron against CPU; (logits, gradients) of the eager run, or
    None for what it did not reach."""
    import torch

    eager_logits = eager_grads = None
    stage = "forward"
    try:
        row.set(stage, "running")
        torch.manual_seed(0)
        actual = dev(**_to(batch, "neuron"))
        torch.neuron.synchronize()
        eager_logits = [x.detach().cpu() for x in _tensors(_logits(actual))]
        why = _mismatch(_logits(expected), _logits(actual), FORWARD_TOL)
        row.set(stage, "mismatch" if why else "ok", why or "")

        stage = "backward"
        row.set(stage, "running")
        _loss(actual).backward()
        torch.neuron.synchronize()
        eager_grads = _grads(dev)
        why = _grad_mismatch(cpu_grads, eager_grads, GRAD_TOL)
        row.set(stage, "mismatch" if why else "ok", why or "")

        stage = "generate"
        row.set(stage, "running")
        prompt = {k: v for k, v in batch.items() if k != "labels"}
        settings = dict(max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1)
        want = None
        if auto in GENERATIVE:
            try:
                with torch.no_grad():
                    want = cpu.generate(**prompt, **settings)
            except Exception as err:  # noqa: BLE001 - not a neuron finding: recorded, not counted
                row.set(stage, "n/a", f"generate fails on CPU: {_error(err)}")
        else:
            row.set(stage, "n/a")
        if want is not None:
            with torch.no_grad():
                got = dev.generate(**_to(prompt, "neuron"), **settings).cpu()
            if want.shape != got.shape or not torch.equal(want, got):
                row.set(stage, "mismatch", f"tokens {got[0].tolist()} != CPU {want[0].tolist()}")
            else:
                row.set(stage, "ok")
    except BaseException as err:  # noqa: BLE001 - the failure is the finding
        row.set(stage, "error", _error(err))
        traceback.print_exc()
    return eager_logits, eager_grads


def _compiled(row: Row, dev, batch: dict, logits: list, grads: dict, against: str) -> None:
    """torch.compile(backend="neuron") forward and backward against ``logits`` / ``grads`` (of
    eager neuron, or of CPU where eager failed)."""
    import torch

    note = "" if against == "eager" else " (against CPU: eager failed)"
    stage = "compile_forward"
    try:
        row.set(stage, "running")
        dev.zero_grad(set_to_none=True)
        torch._dynamo.reset()
        compiled = torch.compile(dev, backend="neuron")
        torch.manual_seed(0)
        output = compiled(**_to(batch, "neuron"))
        torch.neuron.synchronize()
        why = _mismatch(logits, _logits(output), COMPILE_TOL)
        row.set(stage, "mismatch" if why else "ok", (why + note) if why else "")

        stage = "compile_backward"
        row.set(stage, "running")
        _loss(output).backward()
        torch.neuron.synchronize()
        why = _grad_mismatch(grads, _grads(dev), GRAD_TOL)
        row.set(stage, "mismatch" if why else "ok", (why + note) if why else "")
    except BaseException as err:  # noqa: BLE001 - the failure is the finding
        row.set(stage, "error", _error(err) + note)
        traceback.print_exc()


# -- the sweep (the parent process) ----------------------------------------------------------


# Imported once by the fork server: each architecture's process is a fork of it, so it starts in
# a fraction of a second instead of importing torch and transformers again (tens of seconds on a
# loaded machine). Nothing in them starts a thread or touches the device at import.
PRELOAD = [
    "torch",
    "torch_neuronx",
    "transformers",
    "transformers.modeling_utils",
    "transformers.generation",
    "transformers.models.auto.modeling_auto",
    "op_coverage",
]
CHILD_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
    "PYTHONHASHSEED": "0",
}


def process_context():
    """The multiprocessing context the architectures' processes come from (a fork server that has
    imported PRELOAD, started with CHILD_ENV)."""
    os.environ.update(CHILD_ENV)  # before the fork server starts: it imports torch
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _child(model_type: str, kind: str, auto: str, out_path: str, work_dir: str, log_path: str, limit: int) -> None:
    """The architecture's process: its own session (the sweep ends it and whatever it started with
    one killpg), its output to its log, its address space bounded."""
    import resource

    os.setsid()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    run_architecture(model_type, kind, auto, out_path, work_dir)
    sys.stdout.flush()
    sys.stderr.flush()


RUNNING: set[int] = set()  # the architectures' processes now running (ended on an interrupt)


def _kill(pid: int) -> None:
    """End an architecture's process and all it started (its session); the process itself too, as
    it may not have made its own session yet."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def sweep_one(model_type: str, kind: str, auto: str, work_dir: str, timeout: float, memory_gb: float, context) -> dict:
    """Run one architecture in a process bounded by ``timeout`` seconds and ``memory_gb`` of address
    space; the row it left, with the stage it was in marked timeout / crashed."""
    out_path = os.path.join(work_dir, model_type + ".json")
    log_path = os.path.join(work_dir, model_type + ".log")
    for path in (out_path, log_path):
        if os.path.exists(path):
            os.remove(path)
    proc = context.Process(target=_child, args=(model_type, kind, auto, out_path, work_dir, log_path, int(memory_gb * 2**30)))
    proc.start()  # the first start waits for the fork server's imports: not the architecture's time
    RUNNING.add(proc.pid)
    start = time.monotonic()
    proc.join(timeout)
    returncode = proc.exitcode
    if returncode is None:
        _kill(proc.pid)
        proc.join()
    RUNNING.discard(proc.pid)
    if os.path.exists(out_path):
        with open(out_path, encoding="utf-8") as f:
            row = json.load(f)
    else:
        row = {
            "arch": model_type,
            "kind": kind,
            "auto": auto,
            "stages": {"build": {"status": "running"}},
            "fallback": [],
            "reasons": {},
        }
    for result in row["stages"].values():
        if result["status"] == "running":
            if returncode is None:
                result.update(status="timeout", message=f"no result within {timeout:g} s")
            else:
                tail = [line for line in _read(log_path).splitlines() if line.strip()][-1:]
                why = f"exit code {returncode}" if returncode >= 0 else f"killed by signal {-returncode}"
                result.update(status="crashed", message=f"{why}: {tail[0][:300] if tail else ''}")
    row["seconds"] = round(time.monotonic() - start, 1)
    return row


def _interleaved(archs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    by_kind = [sorted(a for a in archs if a[1] == kind) for kind in RUN_ORDER]
    return [
        a for turn in range(max(map(len, by_kind), default=0)) for group in by_kind if turn < len(group) for a in [group[turn]]
    ]


def read_rows(path: str) -> dict[str, dict]:
    """The rows of a rows file, a later row of an architecture replacing an earlier one."""
    return {row["arch"]: row for row in read_events(path)} if os.path.exists(path) else {}


# -- the page --------------------------------------------------------------------------------

SHOWN = {
    "ok": "ok",
    "mismatch": "**mismatch**",
    "error": "**error**",
    "timeout": "**timeout**",
    "crashed": "**crashed**",
    "n/a": "-",
}


FAILED = ("mismatch", "error", "timeout", "crashed")


def first_failure(row: dict) -> tuple[str, dict] | None:
    return next(((s, row["stages"][s]) for s in STAGES if row["stages"].get(s, {}).get("status") in FAILED), None)


def render(rows: dict[str, dict], info: dict) -> str:
    ordered = sorted(rows.values(), key=lambda r: (r["kind"], r["arch"]))
    kinds = sorted({r["kind"] for r in ordered})
    out = [
        "# Hugging Face Transformers architectures on `neuron`",
        "",
        f"Generated by `{info['command']}` on commit {info['commit']} (transformers {info['transformers']}, "
        f"torch {info['torch']}; per architecture at most {info['timeout']:g} s and {info['memory_gb']:g} GiB of "
        "address space, in its own process). Each architecture of transformers' auto mappings (one task each: "
        "speech seq2seq, seq2seq LM, masked LM, causal LM, CTC, image classification) is built from its default "
        "config shrunk generically (hidden 64, 4 heads, 2 layers, vocabulary 512, 4 experts, 32x32 images), with "
        'random weights, saved, and loaded with `from_pretrained(dir, device_map="neuron")` beside the same '
        f"checkpoint on CPU. forward / backward: a batch of {BATCH} (sequence {SEQ}) through both, the outputs and "
        "every parameter's gradient compared (max error within "
        f"{FORWARD_TOL:g} / {GRAD_TOL:g} of the largest CPU value); generate: greedy, {NEW_TOKENS} new tokens, "
        'the tokens equal to CPU\'s; compile: `torch.compile(model, backend="neuron")` forward and backward '
        f"against eager neuron ({COMPILE_TOL:g} / {GRAD_TOL:g}). fallback: the ops whose `NeuronFallbackWarning` "
        "the process saw. A build failure is the sweep's (the generic shrinking made a config the model rejects, or "
        "the model does not run on CPU with the sweep's inputs), not neuron's. An eager error skips the rest of eager (blank) but not compile, which is then compared with CPU.",
        "",
    ]
    if info.get("note"):
        out += [info["note"], ""]
    missing = [arch for arch in info.get("selected", []) if arch not in rows]
    if missing:
        out += [
            f"{len(rows)} of the {len(info['selected'])} architectures selected have rows; not run yet "
            f"(the sweep resumes with them): {', '.join(missing)}.",
            "",
        ]
    out += ["## Totals", "", "| kind | architectures | " + " | ".join(STAGES) + " |", "|---|---:|" + "---:|" * len(STAGES)]
    for kind in [*kinds, None]:
        members = [r for r in ordered if kind is None or r["kind"] == kind]
        cells = []
        for s in STAGES:
            statuses = [r["stages"][s]["status"] for r in members if s in r["stages"]]
            tried = [x for x in statuses if x != "n/a"]
            cells.append(f"{statuses.count('ok')} / {len(tried)}" if tried else "-")
        out.append(f"| {kind or '**all**'} | {len(members)} | " + " | ".join(cells) + " |")
    out += [
        "",
        "Each cell: passed / run. An error skips the later stages of its part (eager or compiled); a timeout or crash ends the architecture's run.",
        "",
    ]

    causes: dict[str, list[str]] = collections.defaultdict(list)
    for r in ordered:
        for stage in STAGES:
            result = r["stages"].get(stage, {})
            if result.get("status") in FAILED:
                causes[f"{stage}: {result['status']}: {reason_key(result.get('message', ''))}"].append(r["arch"])
    out += [
        f"## Failure causes ({len(causes)}; every failed stage of every architecture, numbers in messages as N)",
        "",
        "| architectures | cause | which |",
        "|---:|---|---|",
    ]
    for key, archs in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"| {len(archs)} | {_cell(key)} | {_cell(', '.join(archs), 300)} |")

    fallback = collections.Counter(op for r in ordered for op in r.get("fallback", []))
    reasons = {op: why for r in ordered for op, why in r.get("reasons", {}).items()}
    out += [
        "",
        "## Fallback ops (architectures whose run warned about each)",
        "",
        "| op | architectures | reason (the compiler's, where it tried) |",
        "|---|---:|---|",
    ]
    for op, count in sorted(fallback.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f"| `{op}` | {count} | {_cell(reasons.get(op, '-'))} |")

    out += [
        "",
        "## Architectures",
        "",
        "| architecture | kind | class | params | " + " | ".join(STAGES) + " | fallback ops | first error | s |",
        "|---|---|---|---:|" + "---|" * len(STAGES) + "---|---|---:|",
    ]
    for r in ordered:
        cells = [SHOWN.get(r["stages"][s]["status"], r["stages"][s]["status"]) if s in r["stages"] else "" for s in STAGES]
        failed = first_failure(r)
        error = _cell(failed[1].get("message", ""), 200) if failed else ""
        ops = len(r.get("fallback", []))
        out.append(
            f"| {r['arch']} | {r['kind']} | {r.get('class', '')} | {r.get('params', '')} | "
            + " | ".join(cells)
            + f" | {ops or ''} | {error} | {r.get('seconds', '')} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model types (default: every architecture)")
    parser.add_argument(
        "--rows",
        default=os.path.join(tempfile.gettempdir(), "hf-sweep", "rows.jsonl"),
        help="the rows file (JSON lines): kept between runs, so a sweep resumes",
    )
    parser.add_argument("--work-dir", default=None, help="checkpoints and logs (default: beside --rows)")
    parser.add_argument("--output", default=os.path.join(ROOT, "docs", "hf_coverage.md"))
    parser.add_argument("--jobs", type=int, default=1, help="architectures run at once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per architecture")
    parser.add_argument("--memory-gb", type=float, default=8.0, help="address-space bound per architecture (GiB)")
    parser.add_argument("--rerun", action="store_true", help="run the selected architectures even if rows hold them")
    parser.add_argument("--render-only", action="store_true", help="write the page from the rows, run nothing")
    parser.add_argument("--note", default="", help="a paragraph for the page (how this run went)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    work_dir = args.work_dir or os.path.join(os.path.dirname(os.path.abspath(args.rows)), "work")
    os.makedirs(work_dir, exist_ok=True)

    import torch
    import transformers

    every = architectures()
    wanted = [t for t in args.only.split(",") if t]
    unknown = sorted(set(wanted) - {t for t, _, _ in every})
    if unknown:
        parser.error(f"--only: not an architecture of transformers {transformers.__version__}: {', '.join(unknown)}")
    selected = [a for a in every if not wanted or a[0] in wanted]
    rows = read_rows(args.rows)
    todo = [] if args.render_only else [a for a in selected if args.rerun or a[0] not in rows]
    todo = _interleaved(todo)
    lock = threading.Lock()
    context = process_context()

    stopping = threading.Event()

    def one(arch):
        if stopping.is_set():
            return
        row = sweep_one(*arch, work_dir, args.timeout, args.memory_gb, context)
        with lock:
            if stopping.is_set():
                return  # ended by the interrupt, not by its own doing: run again on resume
            _record(args.rows, **row)
            rows[row["arch"]] = row
            failed = first_failure(row)
            print(
                f"[{len(rows)}/{len(every)}] {row['arch']} ({row['seconds']} s): "
                + (f"{failed[0]} {failed[1]['status']}: {failed[1].get('message', '')[:120]}" if failed else "ok"),
                flush=True,
            )

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    pool = concurrent.futures.ThreadPoolExecutor(args.jobs)
    try:
        list(pool.map(one, todo))
    except KeyboardInterrupt:
        stopping.set()
        for pid in list(RUNNING):
            _kill(pid)
        pool.shutdown(wait=True, cancel_futures=True)
        print("interrupted: the rows file keeps every finished architecture; run again to resume", flush=True)
        return 130
    pool.shutdown()
    shown = {t: rows[t] for t, _, _ in selected if t in rows}
    command = "python tools/hf_sweep.py " + " ".join(shlex.quote(a) for a in argv if a not in ("--render-only", "--rerun"))
    info = dict(
        command=command,
        commit=repo_commit(),
        transformers=transformers.__version__,
        torch=torch.__version__.split("+")[0],
        timeout=args.timeout,
        memory_gb=args.memory_gb,
        note=args.note,
        selected=[t for t, _, _ in _interleaved(selected)],
    )
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(render(shown, info))
    print(f"wrote {args.output} ({len(shown)} architectures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
