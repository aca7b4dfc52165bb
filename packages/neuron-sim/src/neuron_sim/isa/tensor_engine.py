"""TensorE instructions: the 128x128 systolic array. Reads SBUF, writes PSUM.

``Matmul``: ``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` with K on partitions. It lowers to a
LoadStationary (profiler opcode LDWEIGHTS) and a MultiplyMoving (MATMUL); the timing model charges
both. ``accumulate=False`` overwrites the PSUM location, ``True`` adds in fp32. With
``perf_mode="double_row"`` (FP8) the operands are ``[K, 2, M]`` and ``[K, 2, N]``: each partition
carries two contraction rows, so one instruction contracts over 2K.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import AccessPattern
from .base import Instruction, check_operand

MATMUL_INPUT_DTYPES = ("bfloat16", "float16", "float32", "tfloat32", "float8_e4m3", "float8_e5m2")
# float8_e4m3fn is a TensorE input on NC-v4 only (nki.isa.nc_matmul).
_MATMUL_EXTRA_DTYPES = {"gen4": ("float8_e4m3fn",)}
_FP32_FAMILY = ("float32", "tfloat32")


def _check_psum_bank(dst: AccessPattern, arch, what: str) -> None:
    bank = arch.psum_bank_bytes
    lo, hi = dst.free_byte_span()
    if lo // bank != (hi - 1) // bank:
        raise ValidationError(
            "psum.bank_overflow",
            f"{what} writes bytes [{lo}, {hi}) of each PSUM partition, crossing a {bank}-byte bank boundary; "
            f"a matmul result tile must fit one PSUM bank ({bank // 4} fp32 elements)",
        )


@dataclass(kw_only=True, eq=False)
class Matmul(Instruction):
    opcode = "MATMUL"
    engines = ("tensor",)
    dst: AccessPattern
    stationary: AccessPattern
    moving: AccessPattern
    accumulate: bool = False
    perf_mode: str = "none"  # "double_row" for FP8 on NC-v3/v4

    def reads(self):
        return [self.stationary, self.moving, self.dst] if self.accumulate else [self.stationary, self.moving]

    def writes(self):
        return [self.dst]

    # In double_row mode (FP8) the operands are [K, 2, M] and [K, 2, N]: each partition holds two
    # rows of the contraction, so K doubles and M/N are half the free sizes.
    @property
    def rows_per_partition(self) -> int:
        return 2 if self.perf_mode == "double_row" else 1

    @property
    def k(self) -> int:
        return self.stationary.partition_count * self.rows_per_partition

    @property
    def m(self) -> int:
        return self.stationary.free_size // self.rows_per_partition

    @property
    def n(self) -> int:
        return self.moving.free_size // self.rows_per_partition

    def _validate(self, arch):
        te = arch.tensor
        allowed = MATMUL_INPUT_DTYPES + _MATMUL_EXTRA_DTYPES.get(arch.nc_version, ())
        for ap, role in ((self.stationary, "stationary"), (self.moving, "moving")):
            check_operand(ap, arch, "tensor", role, writing=False)
            if ap.dtype not in allowed:
                raise ValidationError(
                    "matmul.dtype",
                    f"{role} dtype {ap.dtype} is not a TensorE input type on {arch.neuron_core} {list(allowed)}",
                )
        check_operand(self.dst, arch, "tensor", "dst", writing=True)
        if (self.stationary.dtype in _FP32_FAMILY) != (self.moving.dtype in _FP32_FAMILY):
            raise ValidationError(
                "matmul.dtype_pair",
                f"fp32/tf32 operands must pair with fp32/tf32: stationary {self.stationary.dtype}, moving {self.moving.dtype}",
            )
        if self.dst.dtype not in arch.psum_matmul_dtypes:
            raise ValidationError(
                "matmul.psum_dtype",
                f"matmul accumulates in {' or '.join(arch.psum_matmul_dtypes)} PSUM on {arch.neuron_core}, dst is {self.dst.dtype}",
            )
        if self.perf_mode not in ("none", "double_row"):
            raise ValidationError("matmul.perf_mode", f"unknown perf_mode {self.perf_mode!r}")
        if self.perf_mode == "double_row":
            for ap, role in ((self.stationary, "stationary"), (self.moving, "moving")):
                if ap.dtype not in dtypes.FP8_TYPES:
                    raise ValidationError("matmul.perf_mode", f"double_row mode needs fp8 operands, {role} is {ap.dtype}")
                if ap.free_size % 2:
                    raise ValidationError(
                        "matmul.perf_mode",
                        f"double_row {role} is [K, 2, F] (two contraction rows per partition), got shape {list(ap.shape)}",
                    )
        if self.stationary.partition_count != self.moving.partition_count:
            raise ValidationError(
                "matmul.k_mismatch",
                f"contraction sizes differ: stationary has K={self.stationary.partition_count}, moving K={self.moving.partition_count}",
            )
        if self.m > te.cols:
            raise ValidationError(
                "matmul.stationary_fmax", f"stationary free size M={self.m} exceeds the {te.cols} columns of the PE array"
            )
        limit = te.moving_fmax
        if te.multibank_moving_fmax is not None:
            limit = te.multibank_moving_fmax * (2 if self.dst.dtype == "bfloat16" else 1)
        if self.n > limit:
            raise ValidationError(
                "matmul.moving_fmax", f"moving free size N={self.n} exceeds {limit} on {arch.neuron_core} ({self.dst.dtype} result)"
            )
        if (self.dst.partition_count, self.dst.free_size) != (self.m, self.n):
            raise ValidationError(
                "matmul.dst_shape", f"result of [K={self.k}, M={self.m}] x [K, N={self.n}] is [{self.m}, {self.n}], dst is {list(self.dst.shape)}"
            )
        if te.multibank_moving_fmax is None:  # NC-v4 writes wide results across banks
            _check_psum_bank(self.dst, arch, "matmul")


@dataclass(kw_only=True, eq=False)
class Transpose(Instruction):
    """Partition <-> free swap of a [P <= 128, F <= 128] SBUF tile into PSUM (bit-exact).

    On VectorE (``engine="vector"``) the tile is at most 32x32 and may live in SBUF or PSUM.
    """

    opcode = "TRANSPOSE"
    engines = ("tensor", "vector")
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        check_operand(self.src, arch, self.engine, "src", writing=False)
        check_operand(self.dst, arch, self.engine, "dst", writing=True)
        limit = arch.tensor.cols if self.engine == "tensor" else 32
        p, f = self.src.partition_count, self.src.free_size
        if p > limit or f > limit:
            raise ValidationError(
                "transpose.size", f"{self.engine} transpose handles at most {limit}x{limit}, got [{p}, {f}]"
            )
        if (self.dst.partition_count, self.dst.free_size) != (f, p):
            raise ValidationError("transpose.shape", f"transpose of [{p}, {f}] is [{f}, {p}], dst is {list(self.dst.shape)}")
        if self.dst.dtype != self.src.dtype and not (self.engine == "tensor" and self.dst.dtype == "float32"):
            raise ValidationError(
                "transpose.dtype", f"transpose keeps the element type ({self.src.dtype}), dst is {self.dst.dtype}"
            )
        if self.engine == "tensor":
            _check_psum_bank(self.dst, arch, "transpose")
