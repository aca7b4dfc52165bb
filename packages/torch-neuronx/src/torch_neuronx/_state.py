"""Process-wide state of the backend: the runtime bridge and the compiled shim, set up once."""

from __future__ import annotations

import threading

_lock = threading.RLock()
_bridge = None
_shim = None
_initialized = False


def bridge():
    if _bridge is None:
        from ._registration import initialize

        initialize()
    return _bridge


def shim():
    if _shim is None:
        from ._registration import initialize

        initialize()
    return _shim


def current_queue(device: int):
    """The runtime queue behind ``device``'s current stream on this thread."""
    return bridge().queue(device, shim().current_stream_id(device))
