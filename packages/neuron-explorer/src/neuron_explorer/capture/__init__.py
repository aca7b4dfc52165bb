"""Capturing profiles: the recorder, its options, and capture driven by the environment."""

from .config import CaptureConfig, parse_core_list, parse_event_filter
from .recorder import Recorder

__all__ = ["CaptureConfig", "Recorder", "parse_core_list", "parse_event_filter"]
