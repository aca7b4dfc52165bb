"""``torch.compile(backend="neuron")``: AOTAutograd graphs compiled by neuronx-cc into one NEFF each.

    model = torch.compile(model, backend="neuron")     # or torch.compiler.set_default_backend("neuron")
    torch_neuronx.compile_metrics()                    # graphs compiled, cache hits, seconds per graph

Modules: ``backend`` (the dynamo backend and its options), ``partition`` (host / random / device
nodes), ``lowering`` (device part -> StableHLO -> graph), ``runtime`` (a compiled graph's calls),
``graph_cache`` (NEFFs by graph code and layouts), ``metrics`` (records and log lines), ``padding`` (buckets),
``errors``.
"""

from .backend import FALLBACK_ENV, NeuronCompileFallbackWarning, neuron_backend
from .errors import NeuronCompileError, NeuronDynamicShapeError
from .metrics import compile_metrics, reset_compile_metrics
from .padding import bucket_for, pad_to_bucket

__all__ = ["neuron_backend", "NeuronCompileError", "NeuronDynamicShapeError", "NeuronCompileFallbackWarning",
           "FALLBACK_ENV", "compile_metrics", "reset_compile_metrics", "pad_to_bucket", "bucket_for"]
