from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """arch -> folder of a tiny random-weight checkpoint, made on first use."""
    from vllm_neuron.tiny_model import make_tiny_model

    root = tmp_path_factory.mktemp("tiny")
    made = {}

    def get(arch: str):
        if arch not in made:
            made[arch] = make_tiny_model(root / arch, arch)
        return made[arch]

    return get


@pytest.fixture(scope="session")
def tiny_llama(tiny_models):
    return tiny_models("llama")
