"""nkilib's kernels as PyTorch ops on the ``neuron`` device (needs torch-neuronx).

    import torch
    import nkilib.torch as nkt

    x = torch.randn(130, 200, device="neuron", requires_grad=True)
    w = torch.ones(200, device="neuron", requires_grad=True)
    nkt.rms_norm(x, w).sum().backward()

Each kernel is a custom op (``torch.ops.nkilib.*``, registered through ``torch_neuronx.nki_op``)
with ``register_autograd`` for the ones with a backward, so it runs eagerly on neuron tensors
and as a kernel launch inside ``torch.compile(backend="neuron")`` graphs. The wrappers below take
the same arguments as the torch ops they replace; arguments no kernel takes (a dtype, a row
wider than SBUF, a missing weight) run those torch ops instead, with one
``NkilibFallbackWarning`` per op, shapes and dtypes. Tensors on other devices always run the
torch ops. ``swap_modules(model)`` turns a model's nn.RMSNorm / nn.LayerNorm into kernel calls.
"""

from nkilib.torch import fast_forms  # noqa: F401  (registers every kernel's fast form)
from nkilib.torch._support import NkilibFallbackWarning
from nkilib.torch.attention import decode_attention, paged_attention, scaled_dot_product_attention
from nkilib.torch.embeddings import rope, rope_plain
from nkilib.torch.loss import cross_entropy
from nkilib.torch.misc import softmax
from nkilib.torch.mlp import gated_mlp
from nkilib.torch.modules import swap_modules
from nkilib.torch.moe import block_layout, blockwise_matmul, router_topk
from nkilib.torch.norm import layer_norm, residual_rms_norm, rms_norm

__all__ = ["NkilibFallbackWarning", "block_layout", "blockwise_matmul", "cross_entropy", "decode_attention", "gated_mlp", "layer_norm",
           "paged_attention", "residual_rms_norm", "rms_norm", "rope", "rope_plain", "router_topk", "scaled_dot_product_attention",
           "softmax", "swap_modules"]
