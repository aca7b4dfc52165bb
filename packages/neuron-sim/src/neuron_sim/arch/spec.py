"""The architecture description every other module reads: one frozen dataclass per generation.

Numbers live in ``trn2.py``/``trn3.py`` next to the public source they come from; this module only
defines their shape and the few quantities derived from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineSpec:
    """A compute engine's clock and its per-instruction cost parameters (engine cycles)."""

    name: str
    clock_hz: float
    min_initiation_interval: int  # MIN_II: shortest issue-to-issue time of one instruction
    static_overhead_cycles: int  # fixed cost to start an SBUF/PSUM access
    fixed_cycles: int = 0  # GpSimd's software loop entry cost

    def cycles_to_ns(self, cycles: float) -> float:
        return cycles * 1e9 / self.clock_hz


@dataclass(frozen=True)
class TensorEngineSpec:
    rows: int  # contraction (partition) dimension of the PE array
    cols: int  # stationary free size (output partitions)
    clock_hz: float
    moving_fmax: int  # max moving free size per instruction (fp32 elements of one PSUM bank)
    # NC-v4 matmuls may write a result spanning several PSUM banks: up to this many fp32 columns
    # (twice as many bf16). None: a result must fit one bank (NC-v2/v3).
    multibank_moving_fmax: int | None
    min_moving_cycles: int  # the systolic pipeline's initiation interval floor
    fp32_slowdown: int  # fp32 matmuls run as several passes
    load_stationary_speedup: int  # fast LoadStationary relative to a MultiplyMoving of equal size

    @property
    def peak_bf16_flops(self) -> float:
        return 2.0 * self.rows * self.cols * self.clock_hz

    def cycles_to_ns(self, cycles: float) -> float:
        return cycles * 1e9 / self.clock_hz


@dataclass(frozen=True)
class DmaSpec:
    engines: int  # DMA engines per NeuronCore
    queues_per_engine: int
    bytes_per_ns_per_engine: float  # practical per-engine bandwidth
    theoretical_bytes_per_ns_per_engine: float
    fixed_latency_ns: float  # trigger -> first byte (descriptor fetch, semaphore path)
    descriptor_overhead_ns: float  # per contiguous chunk; makes small transfers overhead-bound
    hwdge_issue_ns: float  # time the issuing sequencer is busy per DMA instruction
    semaphore_update_ns: float  # completion write back to the core

    @property
    def partitions_per_engine(self) -> int:
        return 128 // self.engines

    @property
    def peak_bytes_per_ns(self) -> float:
        return self.engines * self.bytes_per_ns_per_engine


@dataclass(frozen=True)
class Architecture:
    """One NeuronCore generation. Byte sizes are per NeuronCore unless named otherwise."""

    name: str  # platform target: "trn2", "trn3"
    neuron_core: str  # "NeuronCore-v3"
    nc_version: str  # NKI's name: "gen3"
    num_partitions: int
    sbuf_bytes_per_partition: int  # physical
    sbuf_usable_bytes_per_partition: int  # what kernels may allocate (runtime keeps the rest)
    psum_banks: int
    psum_bank_bytes: int  # per partition
    hbm_bytes_per_core: int
    hbm_bytes_per_ns_per_core: float  # peak HBM bandwidth one core can draw on (MBU denominator)
    physical_cores_per_chip: int
    tensor: TensorEngineSpec
    vector: EngineSpec
    scalar: EngineSpec
    gpsimd: EngineSpec
    sync: EngineSpec
    dma: DmaSpec
    base_clock_hz: float  # NeuronCore base clock the profiler counts cycles in
    psum_matmul_dtypes: tuple[str, ...] = ("float32",)
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def psum_bytes_per_partition(self) -> int:
        return self.psum_banks * self.psum_bank_bytes

    @property
    def quadrant(self) -> int:
        return self.num_partitions // 4

    def engine(self, name: str) -> EngineSpec:
        return {"vector": self.vector, "scalar": self.scalar, "gpsimd": self.gpsimd, "sync": self.sync}[name]
