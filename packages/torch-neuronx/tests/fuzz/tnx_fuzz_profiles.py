"""Hypothesis settings of the fuzz tests, per profile and mode.

``TNX_FUZZ_PROFILE=ci`` (default): a fixed set of programs (derandomized: the same every run),
no shrinking, sized so the three modes take a few minutes on a 2-core machine.
``TNX_FUZZ_PROFILE=long``: many more programs from a random seed (hypothesis prints it; pass
``--hypothesis-seed=N`` to run the same ones again), and a failing program is shrunk to a small
one before it is reported. ``TNX_FUZZ_EXAMPLES=N`` sets the number of programs per mode; ``TNX_FUZZ_TRACE=1`` prints each
program before it runs (when one kills the process, it is the last one printed).
``TNX_FUZZ_DTYPES`` limits the inputs' dtypes: ``integer`` (int64, int32, int16, int8, uint8) or a
comma-separated list of names (``int64,bool``); programs still convert and promote as they go.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE_ENV = "TNX_FUZZ_PROFILE"
EXAMPLES_ENV = "TNX_FUZZ_EXAMPLES"
TRACE_ENV = "TNX_FUZZ_TRACE"  # 1: print each program (JSON) on stderr before it runs
DTYPES_ENV = "TNX_FUZZ_DTYPES"
INTEGER_DTYPES = ("int64", "int32", "int16", "int8", "uint8")

# programs per mode: compiled programs cost the most (dynamo + AOTAutograd + a NEFF per graph)
EXAMPLES = {
    "ci": {"eager": 100, "adaptive": 60, "compile": 25},
    "long": {"eager": 3000, "adaptive": 2000, "compile": 1500},
}


def profile() -> str:
    name = os.environ.get(PROFILE_ENV, "ci")
    if name not in EXAMPLES:
        raise ValueError(f"{PROFILE_ENV}={name!r}: expected one of {sorted(EXAMPLES)}")
    return name


def input_dtypes(known) -> list[str]:
    """The dtype names inputs are drawn from: ``known`` (every fuzz dtype), or those
    ``TNX_FUZZ_DTYPES`` names."""
    wanted = os.environ.get(DTYPES_ENV, "").strip()
    if not wanted:
        return list(known)
    names = list(INTEGER_DTYPES) if wanted == "integer" else [n.strip() for n in wanted.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"{DTYPES_ENV}={wanted!r}: expected 'integer' or names from {sorted(known)}")
    return names


def for_mode(mode: str) -> settings:
    name = profile()
    examples = int(os.environ.get(EXAMPLES_ENV, EXAMPLES[name][mode]))
    common = dict(max_examples=examples, deadline=None, database=None, print_blob=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    if name == "ci":
        return settings(derandomize=True, phases=[Phase.explicit, Phase.generate], **common)
    return settings(derandomize=False, phases=[Phase.explicit, Phase.generate, Phase.shrink], **common)
