"""Which folders a file of a kernel repository imports from, and which files are units."""

from __future__ import annotations

import os
import re

_MAIN_BLOCK = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)
_TEST_DEF = re.compile(r"^\s*(def test_|class Test|class \w+\(.*TestCase\))", re.M)


def import_paths(file: str, root: str) -> list[str]:
    """The file's folder, the repository root, ``root/src`` and the non-package folders inside
    it (``src/nkilib_src`` holds the ``nkilib`` package)."""
    paths = [os.path.dirname(file), root]
    src = os.path.join(root, "src")
    if os.path.isdir(src):
        paths.append(src)
        for entry in sorted(os.listdir(src)):
            folder = os.path.join(src, entry)
            if os.path.isdir(folder) and not os.path.exists(os.path.join(folder, "__init__.py")):
                paths.append(folder)
    return [p for i, p in enumerate(paths) if p not in paths[:i]]


def unit_kind(path: str) -> str | None:
    """``"tests"``, ``"script"`` or None (a module other files import)."""
    name = os.path.basename(path)
    if name in ("conftest.py", "__init__.py", "setup.py"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    if (name.startswith("test_") or name.endswith("_test.py")) and _TEST_DEF.search(text):
        return "tests"
    if _MAIN_BLOCK.search(text):
        return "script"
    return None


def find_units(paths) -> list[tuple[str, str, str]]:
    """(file, root, kind) of every unit file under ``paths`` (files or folders), sorted."""
    found = []
    for path in paths:
        path = os.path.abspath(path)
        if os.path.isfile(path):
            kind = unit_kind(path)
            if kind:
                found.append((path, os.path.dirname(path), kind))
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(files):
                if name.endswith(".py"):
                    file = os.path.join(folder, name)
                    kind = unit_kind(file)
                    if kind:
                        found.append((file, path, kind))
    return found
