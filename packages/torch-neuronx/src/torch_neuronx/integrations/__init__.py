"""How libraries built for CUDA-style accelerators find the neuron device where they do not ask for it."""
