"""Version of the profile schema and of the capture session format, and the checks on load.

MAJOR.MINOR.PATCH as Neuron Explorer versions its schema: MAJOR is an incompatible change (a
table or field removed or renamed, a type changed), MINOR a compatible addition, PATCH a change of
descriptions only. A reader accepts any file of its own MAJOR with a MINOR up to its own; a newer
file is refused with a message naming it, never read as if it were ours.
"""

from __future__ import annotations

import re

from ..errors import SchemaVersionError

SCHEMA_VERSION = "1.0.0"  # the Parquet tables (profile_schema_version in Metadata)
SESSION_FORMAT_VERSION = "1.0.0"  # the capture session directory (session.json, device and system traces)

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def parse(version: str, what: str) -> tuple[int, int, int]:
    match = _VERSION.match(version) if isinstance(version, str) else None
    if match is None:
        raise SchemaVersionError(f"{what}: version {version!r} is not MAJOR.MINOR.PATCH")
    return tuple(int(g) for g in match.groups())


def check_readable(version: str, supported: str, what: str) -> None:
    """Raise SchemaVersionError unless a file of ``version`` can be read by code of ``supported``."""
    major, minor, _ = parse(version, what)
    our_major, our_minor, _ = parse(supported, "this neuron-explorer")
    if major != our_major or minor > our_minor:
        newer = (major, minor) > (our_major, our_minor)
        raise SchemaVersionError(
            f"{what} has format version {version}, this neuron-explorer reads {our_major}.x up to {supported}"
            + ("; it was written by a newer neuron-explorer: upgrade to read it" if newer else
               "; re-capture it, or read it with the neuron-explorer that wrote it")
        )
