"""Errors of neuron-explorer. Each names the file or value at fault and what to do about it."""

from __future__ import annotations


class ExplorerError(Exception):
    """Base class of every error neuron-explorer raises on bad input."""


class ProfileFormatError(ExplorerError):
    """A trace, session or Parquet file that is corrupt, truncated or not ours."""


class SchemaVersionError(ProfileFormatError):
    """A file written with a schema or session format this version cannot read."""


class MissingNeffError(ExplorerError):
    """A device trace refers to a NEFF the profile does not hold."""


class CaptureConfigError(ExplorerError, ValueError):
    """A capture option (cores, modes, filters, limits) that cannot be honoured."""
