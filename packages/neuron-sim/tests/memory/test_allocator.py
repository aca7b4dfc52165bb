"""OnChipAllocator: first fit within each partition, alignment, PSUM banks, capacity errors."""

import pytest
from neuron_sim import ProgramBuilder, ValidationError, get_architecture
from neuron_sim.memory.allocator import OnChipAllocator


def test_first_fit_with_alignment_and_reuse():
    alloc = OnChipAllocator("sbuf", 1024, alignment=4)
    a = alloc.allocate(10)  # rounds to 12
    b = alloc.allocate(4)
    c = alloc.allocate(0)  # still takes one aligned unit
    assert (a, b, c) == (0, 12, 16)
    assert alloc.used == 20 and alloc.peak == 20
    alloc.free(b)
    assert alloc.allocate(3) == 12  # the hole is reused
    assert alloc.allocate(8) == 20  # too big for a hole of 0: goes after the last block
    alloc.free(a)
    assert alloc.allocate(12) == 0
    assert alloc.peak == 28


def test_capacity_error_names_the_numbers():
    alloc = OnChipAllocator("sbuf", 1000)
    alloc.allocate(400)
    alloc.allocate(400)
    with pytest.raises(ValidationError) as info:
        alloc.allocate(300, what="tile [128, 75] float32")
    err = info.value
    assert err.rule == "sbuf.capacity"
    text = str(err)
    assert "300 bytes" in text and "200 of 1000" in text and "tile [128, 75] float32" in text and "2 live tiles" in text


def test_fragmentation_is_reported_with_the_largest_free_block():
    alloc = OnChipAllocator("sbuf", 100)
    blocks = [alloc.allocate(20) for _ in range(5)]
    alloc.free(blocks[1])
    alloc.free(blocks[3])
    with pytest.raises(ValidationError) as info:
        alloc.allocate(40)
    assert "40 of 100 are free" in str(info.value) and "largest free block 20" in str(info.value)


def test_psum_small_tiles_never_cross_a_bank():
    alloc = OnChipAllocator("psum", 8 * 2048, bank_bytes=2048)
    assert alloc.allocate(1536) == 0
    second = alloc.allocate(1024)  # would cross into bank 1 at offset 1536: moves to 2048
    assert second == 2048
    offsets = [alloc.allocate(600) for _ in range(19)]  # 1 more in bank 1, 3 in each of banks 2..7
    assert all(off // 2048 == (off + 600 - 1) // 2048 for off in offsets)
    assert sorted(offsets)[:2] == [3072, 4096]
    with pytest.raises(ValidationError, match="largest free block 512"):
        alloc.allocate(600)  # 512 + 8 + ... bytes free in total, but no bank has 600 left


def test_psum_large_tiles_take_whole_banks():
    alloc = OnChipAllocator("psum", 8 * 2048, bank_bytes=2048)
    alloc.allocate(4)
    big = alloc.allocate(3000)  # 2 banks, bank aligned
    assert big == 2048 and alloc.used == 4 + 4096
    with pytest.raises(ValidationError) as info:
        alloc.allocate(6 * 2048)
    assert info.value.rule == "psum.capacity" and "PSUM" in str(info.value)


def test_free_of_unknown_offset_is_refused():
    alloc = OnChipAllocator("sbuf", 100)
    with pytest.raises(ValueError, match="offset 8"):
        alloc.free(8)


def test_builder_tiles_hit_the_usable_sbuf_capacity():
    arch = get_architecture("trn2")
    b = ProgramBuilder("full", arch)
    per_partition = arch.sbuf_usable_bytes_per_partition
    b.sbuf((128, per_partition // 4 - 16), "float32")
    with pytest.raises(ValidationError) as info:
        b.sbuf((128, 32), "float32")
    assert info.value.rule == "sbuf.capacity" and "128 bytes" in str(info.value)
    b2 = ProgramBuilder("banks", arch)
    for _ in range(arch.psum_banks):
        b2.psum((128, 512), "float32")
    with pytest.raises(ValidationError) as info:
        b2.psum((128, 1), "float32")
    assert info.value.rule == "psum.capacity"


def test_reserved_bytes_are_never_allocated():
    # A tile placed at an address by its kernel (NKI direct allocation) keeps its bytes: automatic
    # allocations go around it, and the capacity error counts them as taken.
    alloc = OnChipAllocator("sbuf", 100)
    alloc.reserve(8, 20)
    alloc.reserve(8, 20)  # the same placement again (a loop re-declaring the tile)
    assert alloc.allocate(8) == 0
    assert alloc.allocate(4) == 28  # 8 bytes would fit at 8 but the reservation holds [8, 28)
    alloc.reserve(40, 32)
    assert alloc.allocate(12) == 72
    with pytest.raises(ValidationError) as info:
        alloc.allocate(40)
    assert "24 of 100 are free" in str(info.value) and "2 directly placed" in str(info.value)
