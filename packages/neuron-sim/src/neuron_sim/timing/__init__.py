"""Device-time estimates: per-instruction timelines and Neuron Explorer style summaries."""

from .model import estimate
from .per_program import RecordedTiming, program_timing
from .records import DmaRecord, InstructionRecord, SemaphoreUpdate, TimingResult

__all__ = ["estimate", "program_timing", "RecordedTiming", "TimingResult", "InstructionRecord", "DmaRecord", "SemaphoreUpdate"]
