"""Reference models and helpers shared by the demo, the tests and the benchmarks."""

from .gpt import GPT, GPTConfig, TrainRun, train_run, train_steps

__all__ = ["GPT", "GPTConfig", "TrainRun", "train_run", "train_steps"]
