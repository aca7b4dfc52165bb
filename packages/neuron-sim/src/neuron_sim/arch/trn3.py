"""Trainium3: NeuronCore-v4. Each number names the public document it comes from.

SDK = aws-neuron/aws-neuron-sdk @81ce03ae (Neuron SDK 2.32, Aug 2026); KLR = leanprover/KLR.
"""

from .spec import Architecture, DmaSpec, EngineSpec, TensorEngineSpec

GiB = 1 << 30

TRN3 = Architecture(
    name="trn3",
    neuron_core="NeuronCore-v4",
    nc_version="gen4",
    num_partitions=128,
    sbuf_bytes_per_partition=256 * 1024,
    sbuf_usable_bytes_per_partition=245752,
    psum_banks=8,
    psum_bank_bytes=2048,
    hbm_bytes_per_core=144 * GiB // 8,
    hbm_bytes_per_ns_per_core=4900.0 / 4,
    physical_cores_per_chip=8,
    tensor=TensorEngineSpec(
        rows=128,
        cols=128,
        clock_hz=2.4e9,
        moving_fmax=512,
        multibank_moving_fmax=4096,
        min_moving_cycles=64,
        fp32_slowdown=4,
        load_stationary_speedup=4,
    ),
    vector=EngineSpec("vector", clock_hz=1.2e9, min_initiation_interval=64, static_overhead_cycles=60),
    scalar=EngineSpec("scalar", clock_hz=1.2e9, min_initiation_interval=64, static_overhead_cycles=60),
    gpsimd=EngineSpec("gpsimd", clock_hz=1.2e9, min_initiation_interval=64, static_overhead_cycles=60, fixed_cycles=150),
    sync=EngineSpec("sync", clock_hz=1.2e9, min_initiation_interval=16, static_overhead_cycles=0),
    dma=DmaSpec(
        engines=16,
        queues_per_engine=16,
        bytes_per_ns_per_engine=33.0,
        theoretical_bytes_per_ns_per_engine=38.4,
        fixed_latency_ns=1300.0,
        descriptor_overhead_ns=10.0,
        hwdge_issue_ns=600.0,
        semaphore_update_ns=16.0,
    ),
    base_clock_hz=1.2e9,
    psum_matmul_dtypes=("float32", "bfloat16"),
    sources={
        "SBUF 128 x 256 KiB, PSUM 8 x 2 KiB banks, bf16 PSUM accumulation": "SDK nki/guides/architecture/trainium3_arch.rst",
        "usable SBUF bytes per partition 245752": "KLR KLR/Trace.lean (tile_size.sbuf_fmax_bytes, gen4)",
        "HBM 144 GiB and 4.9 TB/s per chip over 4 stacks, 8 NeuronCores": "SDK about-neuron/arch/neuron-hardware/trainium3.rst",
        "TensorE 2.4 GHz (79 TF BF16, 20 TF FP32, 315 TF MXFP8)": "SDK about-neuron/arch/neuron-hardware/neuron-core-v4.rst",
        "VectorE/ScalarE/GpSimd 1.2 GHz": "SDK nki/guides/architecture/trainium3_arch.rst",
        "nc_matmul result up to 4096 fp32 / 8192 bf16 columns across PSUM banks": "SDK nki/api/nki/isa nc_matmul (NKI 0.5 release notes)",
        "16 DMA engines, 33 B/ns practical, 38.4 GB/s theoretical": "SDK nki/get-started/about/nki-dma-overview.rst; nki/deep-dives/nki-dma-bandwidth-guide.rst",
        "NeuronCore base clock (not published for Trn3; Trn2 value kept)": "SDK tools/neuron-explorer/profile-schema-reference.rst",
        "GpSimd 128 elements/cycle for every dtype; integer ALU mode as on NC-v3": "SDK nki/guides/architecture/trainium3_arch.rst; see trn2.py",
        "cost constants shared with NC-v3 where no NC-v4 figure is published": "see trn2.py",
    },
)
