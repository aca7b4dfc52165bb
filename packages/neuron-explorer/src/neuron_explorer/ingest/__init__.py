"""Turning capture sessions into the profile's Parquet tables."""

from .pipeline import default_profile_dir, ingest

__all__ = ["ingest", "default_profile_dir"]
