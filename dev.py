#!/usr/bin/env python3
"""The quick start's entry point: `python3 dev.py demo` or `python3 dev.py test`.

Needs only Python 3.11 and pip. It keeps nox in a private virtualenv (.venv-dev) and runs the
matching nox session, which builds its own virtualenv with our packages installed from their
folders. Extra arguments go to the session (e.g. `python3 dev.py test -- -k timing`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv

ROOT = os.path.dirname(os.path.abspath(__file__))
TOOLS_VENV = os.path.join(ROOT, ".venv-dev")
NOX_VERSION = "2026.10.20"
SESSIONS = {"demo": "demo", "test": "tests", "tests": "tests", "lint": "lint", "benchmarks": "benchmarks"}


def tools_python() -> str:
    bin_dir = "Scripts" if os.name == "nt" else "bin"
    python = os.path.join(TOOLS_VENV, bin_dir, "python")
    if not os.path.exists(python):
        print(f"setting up {TOOLS_VENV} (nox {NOX_VERSION}) ...", flush=True)
        venv.create(TOOLS_VENV, with_pip=True)
    probe = subprocess.run([python, "-c", f"import nox, importlib.metadata as m; assert m.version('nox') == '{NOX_VERSION}'"],
                           capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([python, "-m", "pip", "install", "-q", f"nox=={NOX_VERSION}"])
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in SESSIONS and not argv[0].startswith("-"):
        print(__doc__)
        print("commands:", ", ".join(sorted(SESSIONS)), "(or any nox arguments, e.g. -s neuron-sim)")
        return 2
    python = tools_python()
    if argv[0] in SESSIONS:
        args = ["-s", SESSIONS[argv[0]], *argv[1:]]
    else:
        args = argv
    return subprocess.call([python, "-m", "nox", "-f", os.path.join(ROOT, "noxfile.py"), *args], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
