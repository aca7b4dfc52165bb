"""nkilib: NKI kernels for the software NeuronCore, each beside its plain numpy reference.

    import numpy as np
    from nkilib.norm import rms_norm
    y = rms_norm(np.ones((130, 200), np.float32), np.ones(200, np.float32))

``nkilib.torch`` (needs torch-neuronx) registers the kernels as torch custom ops.
"""

from nkilib._checks import NkilibError

__version__ = "0.1.0+sim"
__all__ = ["NkilibError"]
