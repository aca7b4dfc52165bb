"""Device-time estimates: per-instruction timelines and Neuron Explorer style summaries."""

from .model import estimate
from .records import DmaRecord, InstructionRecord, SemaphoreUpdate, TimingResult

__all__ = ["estimate", "TimingResult", "InstructionRecord", "DmaRecord", "SemaphoreUpdate"]
