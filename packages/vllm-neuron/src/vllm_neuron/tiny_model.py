"""Tiny Hugging Face checkpoints made offline: random weights and a locally trained BPE tokenizer.

No hub access is needed (and none is possible on a machine without network), so examples and
tests build their model here: ``python -m vllm_neuron.tiny_model OUT_DIR [--arch llama]``.
The models are small enough to run on the simulated device in seconds, but they are real
checkpoints: vLLM loads them through its normal model registry and weight loader.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# A few hundred distinct words, so the BPE merges are non-trivial and prompts tokenize to
# several lengths.
_TRAIN_TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "hello world, this is a tiny language model for testing",
    "a neuron core has tensor vector scalar and gpsimd engines",
    "paged attention keeps the key value cache in fixed size blocks",
    "continuous batching schedules prefill and decode tokens together",
    "the simulator reports device time for every instruction it runs",
    "once upon a time there was a small model that generated text",
    "numbers like 0 1 2 3 4 5 6 7 8 9 10 42 128 256 appear in code",
    "def main(): print('hello') return 0 if x else 1",
    "trainium chips carry high bandwidth memory and many neuron cores",
] * 20

ARCHITECTURES = ("llama", "qwen3", "mistral")
VOCAB_SIZE = 512


def _config(arch: str):
    import transformers

    # head_dim 32: the smallest head size vLLM's CPU attention backend accepts, so the same
    # checkpoint also runs on vLLM's CPU platform (the reference for token equality).
    common = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    if arch == "llama":
        return transformers.LlamaConfig(**common)
    if arch == "qwen3":
        return transformers.Qwen3Config(**common)
    if arch == "mistral":
        return transformers.MistralConfig(**common, sliding_window=None)
    raise ValueError(f"tiny_model: unknown architecture {arch!r}; known: {', '.join(ARCHITECTURES)}")


def make_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_TRAIN_TEXTS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(out)


def make_tiny_model(out: str | Path, arch: str = "llama", seed: int = 0) -> Path:
    """Write a random-weight ``arch`` causal LM and its tokenizer to ``out``; return the folder."""
    import torch
    import transformers

    config = _config(arch)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    make_tokenizer(out)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to write the checkpoint to")
    parser.add_argument("--arch", choices=ARCHITECTURES, default="llama")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(make_tiny_model(args.out, args.arch, args.seed))


if __name__ == "__main__":
    main()
