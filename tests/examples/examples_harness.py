"""Runs the announcement's snippets as a user would: each in a fresh interpreter (the default
compile backend and the device state are process-wide), the snippet's text unchanged, with a
prelude that defines what the snippet leaves to the reader (``MyModel``, ``dataloader``, ...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

RESULT_MARK = "EXAMPLE-RESULT "


def run_example(code: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict:
    """Run ``code`` in a fresh interpreter; it reports with ``report(dict)``. Returns that dict."""
    prelude = textwrap.dedent(f"""
        import json as _json
        def report(values):
            print({RESULT_MARK!r} + _json.dumps(values), flush=True)
    """)
    full_env = {**os.environ, "TORCH_NEURONX_COMPILE_LOG": "0", **(env or {})}
    full_env.pop("NEURON_LAUNCH_BLOCKING", None)
    proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"example failed (rc {proc.returncode})\n--- stdout\n{proc.stdout[-4000:]}"
                             f"\n--- stderr\n{proc.stderr[-6000:]}")
    return json.loads(lines[-1][len(RESULT_MARK):])
