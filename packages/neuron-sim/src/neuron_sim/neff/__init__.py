"""The NEFF file format (a compiled program as a versioned, checksummed, pickle-free file) and the
on-disk NEFF cache.

    neff = Neff(program, timing_summary=summary, metadata={"source_hash": h})
    neff.save("kernel.neff"); Neff.load("kernel.neff"); inspect("kernel.neff")
    cache = NeffCache(directory); cache.get_or_build(cache_key(source, shapes), compile_fn)
"""

from .cache import DEFAULT_MAX_ENTRY_BYTES, CacheKey, CacheStats, NeffCache, NeffCacheWarning, cache_key
from .container import NEFF_MAGIC, NEFF_VERSION
from .format import Neff
from .inspection import inspect

__all__ = ["NEFF_MAGIC", "NEFF_VERSION", "DEFAULT_MAX_ENTRY_BYTES", "CacheKey", "CacheStats", "Neff", "NeffCache",
           "NeffCacheWarning", "cache_key", "inspect"]
