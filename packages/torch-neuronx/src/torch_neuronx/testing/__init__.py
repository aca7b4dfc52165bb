"""Reference models and helpers shared by the demo, the tests and the benchmarks."""

from .fast_form import check_fast_form
from .gpt import GPT, GPTConfig, TrainRun, train_run, train_steps

__all__ = ["GPT", "GPTConfig", "TrainRun", "train_run", "train_steps", "check_fast_form"]
