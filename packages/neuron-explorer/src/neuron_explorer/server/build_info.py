"""Which UI sources the shipped build (``static/``) was made from.

``npm run build`` (in packages/neuron-explorer/ui) writes ``static/build-info.json`` with a digest
of every UI source file; ``sources_digest`` computes the same digest here (sha256 over
"path\\0content\\0" of every file under ui/ except node_modules, sorted by path), so a test can
tell when someone changed the sources without rebuilding the committed assets.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

STATIC_DIR = Path(__file__).with_name("static")


def sources_digest(ui_dir: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p.relative_to(ui_dir).as_posix() for p in ui_dir.rglob("*")
                   if p.is_file() and "node_modules" not in p.relative_to(ui_dir).parts)
    for name in files:
        digest.update(name.encode() + b"\0")
        digest.update((ui_dir / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def shipped_digest() -> str | None:
    path = STATIC_DIR / "build-info.json"
    return json.loads(path.read_text())["sources_sha256"] if path.is_file() else None
