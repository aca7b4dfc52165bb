"""Compiled eager ops: each ATen call on ``neuron`` tensors compiled by neuronx-cc into a NEFF
(once per signature, cached in memory and on disk) and launched on the simulated NeuronCore."""
