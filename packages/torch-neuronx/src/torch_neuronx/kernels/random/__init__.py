"""On-device random numbers: ``philox`` (the counter-based generator in torch ops), ``ops`` (the
``neuron_rng`` operators compiled onto the NeuronCore) and ``draws`` (ATen's random ops on top)."""
