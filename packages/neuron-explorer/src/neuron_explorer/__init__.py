"""neuron-explorer: profiles of the software NeuronCore.

    from neuron_explorer import CaptureConfig, Recorder, ingest, open_profile

    with Recorder("./output", CaptureConfig(device_profile="session")) as rec:
        ...                                    # launch work on the software NeuronCore
    profile = open_profile(ingest(rec.session_dir))
    profile.table("Instruction")               # a pyarrow.Table; every table is also a Parquet file

Importable without torch; the torch.profiler side lives in ``torch_neuronx.profiling``.
"""

from .capture import CaptureConfig, Recorder
from .errors import (
    CaptureConfigError,
    ExplorerError,
    MissingNeffError,
    ProfileFormatError,
    SchemaVersionError,
)
from .ingest import ingest
from .profile import Profile, open_profile
from .schema import SCHEMA_VERSION, TABLES, describe_schema
from .version import __version__

__all__ = [
    "CaptureConfig", "Recorder", "ingest", "Profile", "open_profile", "SCHEMA_VERSION", "TABLES", "describe_schema",
    "ExplorerError", "ProfileFormatError", "SchemaVersionError", "MissingNeffError", "CaptureConfigError", "__version__",
]
