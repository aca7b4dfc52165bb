"""nki.typing: parameter annotations (``nt.tensor[...]``, ``nt.mutable_tensor``) in both namespaces."""

import nki
import nki.language as nl
import nki.typing as nt
import numpy as np
from nki_helpers import rand


def test_annotated_kernel_traces_from_its_arguments():
    @nki.jit
    def scale_into(x: nt.tensor[128, 64], out: nt.mutable_tensor, factor: float = 2.0):
        nl.store(out, nl.multiply(nl.load(x), factor))

    x = rand((128, 64), seed=1)
    out = np.zeros_like(x)
    scale_into(x, out)
    np.testing.assert_array_equal(out, 2 * x)
    # the annotation describes; the arguments decide (it is not a check)
    y = rand((64, 32), seed=2)
    out = np.zeros_like(y)
    scale_into(y, out, 3.0)
    np.testing.assert_allclose(out, 3 * y, rtol=1e-6)


def test_annotation_objects_carry_what_they_say():
    assert nt.tensor[128, 512].shape == (128, 512) and nt.tensor[128, 512].dtype is None
    annotated = nt.tensor[[128, 512], nl.bfloat16]
    assert annotated.shape == (128, 512) and annotated.dtype == nl.bfloat16
    assert nt.mutable_tensor.mutable and not nt.tensor.mutable
    assert repr(annotated) == "nt.tensor[[128, 512], bfloat16]"


def test_legacy_namespace_modules_are_the_same_objects():
    import neuronxcc.nki.isa.constants as legacy_constants
    import neuronxcc.nki.language.constants as legacy_lc
    import neuronxcc.nki.typing as legacy_nt
    from neuronxcc.nki.typing import tensor

    assert legacy_nt is nt and tensor is nt.tensor
    assert legacy_constants.oob_mode is nki.isa.oob_mode and legacy_constants.dge_mode is nki.isa.dge_mode
    assert legacy_lc.sizeinbytes(nl.bfloat16) == 2 and legacy_lc.sbuf_min_align == nl.tile_size.sbuf_min_align
