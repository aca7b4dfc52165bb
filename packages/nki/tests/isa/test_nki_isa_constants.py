"""nki.isa constants: NeuronCore generations are ordered (kernels branch on the target's)."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest


def test_nc_versions_order_by_generation():
    v = nisa.nc_version
    assert v.gen2 < v.gen3 < v.gen4 and v.gen4 >= v.gen3 >= v.gen3 and v.gen2 <= v.gen2 and not v.gen2 > v.gen3
    assert sorted([v.gen4, v.gen2, v.gen3]) == [v.gen2, v.gen3, v.gen4]
    with pytest.raises(TypeError):
        v.gen2 < 3  # noqa: B015 - only generations compare


def test_kernel_branches_on_the_target_generation():
    @nki.jit
    def pick(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, value=nl.multiply(t, 2.0) if nisa.get_nc_version() >= nisa.nc_version.gen3 else t)
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    expected = 2 * x if nisa.get_nc_version() >= nisa.nc_version.gen3 else x
    np.testing.assert_array_equal(pick(x), expected)
