"""Foreign array types: a framework registers how to recognize, describe and launch its arrays;
nki itself knows none (torch-neuronx registers torch tensors)."""

from __future__ import annotations

import nki
import nki.language as nl
import numpy as np
import pytest
from nki import NkiError
from nki_helpers import rand


class HostBox:
    """A framework's array type, for the test: a numpy array in a box."""

    def __init__(self, array):
        self.array = array


def _launch_through_numpy(kernel, args, kwargs):
    unbox = [a.array if isinstance(a, HostBox) else a for a in args]
    out = nki.simulate(kernel)(*unbox, **{k: v.array if isinstance(v, HostBox) else v for k, v in kwargs.items()})
    LAUNCHES.append(kernel.__name__)
    return HostBox(out)


LAUNCHES: list[str] = []
BOX = nki.ArrayType("hostbox", lambda x: isinstance(x, HostBox), lambda b: (b.array.shape, b.array.dtype),
                    _launch_through_numpy)


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(x), nl.load(x)))
    return out


@pytest.fixture
def hostbox():
    nki.register_array_type(BOX)
    LAUNCHES.clear()
    yield
    nki.unregister_array_type("hostbox")


def test_registered_type_is_traced_from_its_description_and_launched_by_it(hostbox):
    x = rand((128, 16), seed=1)
    result = double(HostBox(x))
    assert isinstance(result, HostBox) and LAUNCHES == ["double"]
    np.testing.assert_array_equal(result.array, 2 * x)
    compiled = double.compile((HostBox(x),), {})  # traced from (shape, dtype) alone
    assert compiled.tensors["x"].shape == (128, 16) and compiled.tensors["x"].dtype == "float32"
    assert "hostbox" in nki.registered_array_types()


def test_mixing_frameworks_is_refused(hostbox):
    other = nki.ArrayType("other", lambda x: isinstance(x, list), lambda v: ((len(v),), np.float32), _launch_through_numpy)
    nki.register_array_type(other)
    try:
        with pytest.raises(NkiError, match="several frameworks"):
            double(HostBox(rand((8, 8))), [1.0])
    finally:
        nki.unregister_array_type("other")


def test_registration_errors():
    with pytest.raises(TypeError, match="ArrayType"):
        nki.register_array_type(object())
    with pytest.raises(KeyError, match="no NKI array type"):
        nki.unregister_array_type("never-registered")
