"""Run by test_neff_cache_memory in a fresh process: one ``NeffCache.get`` and how much the
process's peak resident memory grew during it (the parent's test process has a large, noisy heap).

    python cache_reader.py DIRECTORY MAX_ENTRY_BYTES KEY_PARTS_JSON
prints a JSON object: growth_mib, hit, warnings.

The peak is the address space's high-water mark (VmHWM), not getrusage's ru_maxrss: Linux carries
ru_maxrss across exec, so a child of a large test process would start at the parent's peak.
"""

from __future__ import annotations

import json
import sys
import warnings


def peak_rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(directory: str, max_entry_bytes: str, parts: str) -> None:
    from neuron_sim.neff import NeffCache, cache_key

    cache = NeffCache(directory, memory_entries=0, max_entry_bytes=int(max_entry_bytes))
    key = cache_key(*json.loads(parts))
    before = peak_rss_kib()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        neff = cache.get(key)
    after = peak_rss_kib()
    print(json.dumps({"growth_mib": (after - before) / 1024, "hit": neff is not None,
                      "warnings": [str(w.message) for w in caught]}))


if __name__ == "__main__":
    main(*sys.argv[1:])
