"""Trainium2: NeuronCore-v3. Each number names the public document it comes from.

SDK = aws-neuron/aws-neuron-sdk @81ce03ae (Neuron SDK 2.32, Aug 2026); KLR = leanprover/KLR.
"""

from .spec import Architecture, DmaSpec, EngineSpec, TensorEngineSpec

GiB = 1 << 30

TRN2 = Architecture(
    name="trn2",
    neuron_core="NeuronCore-v3",
    nc_version="gen3",
    num_partitions=128,
    sbuf_bytes_per_partition=224 * 1024,
    sbuf_usable_bytes_per_partition=212984,
    psum_banks=8,
    psum_bank_bytes=2048,
    hbm_bytes_per_core=96 * GiB // 8,
    hbm_bytes_per_ns_per_core=2900.0 / 4,
    physical_cores_per_chip=8,
    tensor=TensorEngineSpec(
        rows=128,
        cols=128,
        clock_hz=2.4e9,
        moving_fmax=512,
        multibank_moving_fmax=None,
        min_moving_cycles=64,
        fp32_slowdown=4,
        load_stationary_speedup=4,
    ),
    vector=EngineSpec("vector", clock_hz=0.96e9, min_initiation_interval=64, static_overhead_cycles=60),
    scalar=EngineSpec("scalar", clock_hz=1.2e9, min_initiation_interval=64, static_overhead_cycles=60),
    gpsimd=EngineSpec("gpsimd", clock_hz=1.2e9, min_initiation_interval=64, static_overhead_cycles=60, fixed_cycles=150),
    sync=EngineSpec("sync", clock_hz=1.2e9, min_initiation_interval=16, static_overhead_cycles=0),
    dma=DmaSpec(
        engines=16,
        queues_per_engine=16,
        bytes_per_ns_per_engine=23.0,
        theoretical_bytes_per_ns_per_engine=27.2,
        fixed_latency_ns=1300.0,
        descriptor_overhead_ns=10.0,
        hwdge_issue_ns=600.0,
        semaphore_update_ns=16.0,
    ),
    base_clock_hz=1.2e9,
    sources={
        "partitions, SBUF 128 x 224 KiB, PSUM 8 x 2 KiB banks": "SDK nki/guides/architecture/trainium2_arch.rst",
        "usable SBUF bytes per partition 212984": "KLR KLR/Trace.lean (tile_size.sbuf_fmax_bytes, gen3)",
        "HBM 96 GiB and 2.9 TB/s per chip over 4 stacks, 8 NeuronCores": "SDK about-neuron/arch/neuron-hardware/trainium2.rst",
        "TensorE 128x128 at 2.4 GHz (79 TF BF16, 20 TF FP32, 158 TF FP8)": "SDK about-neuron/arch/neuron-hardware/neuron-core-v3.rst",
        "MultiplyMoving max(N, 64) cycles, fp32 4x, moving fmax 512": "SDK nki/guides/architecture/trainium_inferentia2_arch.rst; nki.language.tile_size",
        "fast LoadStationary up to 4x faster than MultiplyMoving": "SDK nki/guides/architecture/trainium2_arch.rst",
        "VectorE 0.96 GHz, ScalarE/GpSimd 1.2 GHz": "SDK nki/guides/architecture/trainium2_arch.rst",
        "MIN_II 64 cycles, ~60-cycle access overhead, GpSimd ~150 + N": "SDK@v2.26 general/nki/api/nki/isa (NC-v2 cost notes)",
        "GpSimd integer ALU: all-int32/uint32 tensor_tensor exact in 32-bit integer arithmetic":
            "SDK nki/api/nki/isa (nki.isa.tensor_tensor, 'int32/uint32 types'; NKI 0.6)",
        "GpSimd 8 cores x 512-bit SIMD (16 x 32-bit lanes), 16 partitions per core: 1 element/partition/cycle":
            "SDK nki/guides/architecture/trainium_inferentia2_arch.rst (GpSimd engine)",
        "16 DMA engines x 16 queues, 23 B/ns practical, 27.2 GB/s theoretical": "SDK nki/get-started/about/nki-dma-overview.rst; nki/deep-dives/nki-dma-bandwidth-guide.rst",
        "DMA fixed cost ~1300 ns, small transfers overhead-bound": "SDK nki/get-started/about/nki-dma-overview.rst",
        "HWDGE ~600 ns per DMA instruction (charged to the triggering engine)": "SDK nki/deep-dives/nki-dge.rst",
        "NeuronCore base clock 1.2 GHz": "SDK tools/neuron-explorer/profile-schema-reference.rst (Summary.neuroncore_cycle_count)",
        "MBU denominator = one HBM stack (2.9 TB/s / 4)": "SDK tools/neuron-explorer/profile-schema-reference.rst (mbu_estimated_percent)",
    },
)
