"""The op kernels of the ``neuron`` device, registered with PyTorch's dispatcher.

``registration.register()`` installs them once: the boxed kernel every ATen op on neuron tensors
reaches (``compiled.dispatch``: compiled on the NeuronCore, or CPU fallback), the functional
overloads of structured ops routed there directly, and the explicit kernels - ``copies``
(``_copy_from``, ``.item()``, ``resize_``), ``views`` (metadata only), ``random`` (on-device RNG), ``rnn`` (fused
cells), ``convolution`` (registered whole, compiled), ``batch_norm`` (the running-statistics update
as a functional op plus a copy) and ``whole_ops`` (ops kept whole instead of decomposed).
"""
