"""The device layer: everything that makes ``neuron`` a PyTorch device, and nothing that runs ops.

``registration`` (PrivateUse1 renamed, the C++ shim started), ``bridge`` (the object the shim's
allocator, guard and hooks call), ``neuron`` (the ``torch.neuron`` module), ``streams``, ``memory``,
``random``, ``amp``, ``errors``, ``env``, ``state`` (the process's bridge and shim) and ``hooks``
(how the execution policies above - adaptive eager, the eager scalar cache - learn that a queue is
about to be used or the device synchronized). Nothing here imports from the layers above.
"""
