"""ScalarE: the activation instruction, ``dst = func(src * scale + bias)``, with optional reduction.

``scale`` is an immediate or a [P, 1] tile, ``bias`` a [P, 1] tile or an immediate. With
``reduce_op`` the results along the free dimension are also reduced into ``reduce_res`` [P, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..memory.access_pattern import AccessPattern
from . import ops
from .base import Instruction, check_operand, check_same_free_size, check_same_partitions, check_scalar_operand

ACTIVATION_REDUCE_OPS = ("add", "maximum", "minimum")


@dataclass(kw_only=True, eq=False)
class Activation(Instruction):
    opcode = "ACTIVATE"
    engines = ("scalar",)
    dst: AccessPattern
    src: AccessPattern
    func: str
    scale: float | AccessPattern = 1.0
    bias: float | AccessPattern | None = None
    reduce_op: str | None = None
    reduce_res: AccessPattern | None = None

    def reads(self):
        reads = [self.src]
        for operand in (self.scale, self.bias):  # a [P, 1] tile, or an immediate
            if isinstance(operand, AccessPattern):
                reads.append(operand)
        return reads

    def writes(self):
        return [self.dst] + ([self.reduce_res] if self.reduce_res is not None else [])

    def _validate(self, arch):
        ops.check_op(self.func, ops.ACTIVATIONS, "activation")
        check_operand(self.dst, arch, "scalar", "dst", writing=True)
        check_operand(self.src, arch, "scalar", "src", writing=False)
        check_same_partitions(self.src, self.dst, "src", "dst")
        check_same_free_size(self.src, self.dst, "src", "dst")
        check_scalar_operand(self.scale, self.src, arch, "scale", "scalar")
        check_scalar_operand(self.bias, self.src, arch, "bias", "scalar")
        if (self.reduce_op is None) != (self.reduce_res is None):
            raise ValidationError("activation.reduce", "reduce_op and reduce_res go together")
        if self.reduce_op is not None:
            if self.reduce_op not in ACTIVATION_REDUCE_OPS:
                raise ValidationError("activation.reduce", f"activation reduces with {ACTIVATION_REDUCE_OPS}, not {self.reduce_op!r}")
            check_operand(self.reduce_res, arch, "scalar", "reduce_res", writing=True)
            check_same_partitions(self.reduce_res, self.src, "reduce_res", "src")
            if self.reduce_res.free_size != 1:
                raise ValidationError("activation.reduce", f"reduce_res holds one value per partition, got {list(self.reduce_res.shape)}")
