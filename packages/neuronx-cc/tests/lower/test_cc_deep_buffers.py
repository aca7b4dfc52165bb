"""Fused groups moving few operands per tile keep a fourth tile in flight (``DEEP_BUFFERS``); groups
moving many keep three slots and larger tiles."""

from cc_helpers import Graph, check
from neuronxcc.compiler.lower import elementwise


def _chain(n_inputs, shape=(1024, 1024)):
    g = Graph("chain")
    xs = [g.add_input(f"x{k}", shape, "float32") for k in range(n_inputs)]
    y = xs[0]
    for k, x in enumerate(xs[1:] or xs):
        y = g.add1("tanh", g.add1("add" if k % 2 else "multiply", y, x))
    g.set_outputs([y], ["out"])
    return g


def _free(program):
    return program.metadata["groups"][0]["free"]


def test_few_operands_pipeline_deeper_and_stay_exact(monkeypatch):
    deep = check(_chain(2), rtol=1e-6, atol=1e-6)
    monkeypatch.setattr(elementwise, "DEEP_MAX_OPERANDS", 0)
    shallow = check(_chain(2), rtol=1e-6, atol=1e-6)
    assert _free(deep) <= _free(shallow)


def test_many_operands_keep_three_slots(monkeypatch):
    n = elementwise.DEEP_MAX_OPERANDS + 1
    wide = check(_chain(n, (256, 2048)), rtol=1e-6, atol=1e-6)
    monkeypatch.setattr(elementwise, "DEEP_BUFFERS", elementwise.BUFFERS)
    same = check(_chain(n, (256, 2048)), rtol=1e-6, atol=1e-6)
    assert _free(wide) == _free(same)
