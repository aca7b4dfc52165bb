"""On-chip capacity, manual addresses and reads of memory never written."""

import warnings

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from neuron_sim.errors import ExecutionError, UninitializedReadError
from nki import NkiError, NkiValidationError
from nki_helpers import check_error, line_of

X = np.ones((128, 64), np.float32)


# --- SBUF / PSUM capacity: live tiles only ----------------------------------------------------
@nki.jit
def sbuf_overflow(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    live = []
    for _ in range(4):
        live.append(nl.ndarray((128, 16384), nl.float32, buffer=nl.sbuf))  # sbuf-full
    nl.store(out, nl.load(x))
    return out


@nki.jit
def psum_overflow(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    live = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]  # one tile per bank
    live.append(nl.ndarray((128, 64), nl.float32, buffer=nl.psum))  # psum-full
    nl.store(out, nl.load(x))
    return out


@nki.jit
def tiles_freed_when_dead(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for _ in range(64):  # 64 x 64 KiB per partition: fits only because dead tiles are released
        big = nl.ndarray((128, 16384), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=big, value=1.0)
    for _ in range(32):
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.memset(dst=acc, value=0.0)
    nl.store(out, nl.load(x))
    return out


@nki.jit
def psum_address_off_bank(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.ndarray((128, 128), nl.float32, buffer=nl.psum, address=(0, 512))  # psum-address
    nl.store(out, nl.load(x))
    return out


@nki.jit
def sbuf_address_outside(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf, address=(0, 210000))  # sbuf-address
    nl.store(out, nl.load(x))
    return out


def test_sbuf_capacity_counts_live_tiles():
    with pytest.raises(NkiValidationError) as info:
        sbuf_overflow(X)
    check_error(info.value, "sbuf.capacity", "65536 bytes per partition", "212984", marker="sbuf-full")


def test_psum_capacity_counts_live_tiles():
    with pytest.raises(NkiValidationError) as info:
        psum_overflow(X)
    check_error(info.value, "psum.capacity", "256 bytes", "0 of 16384", marker="psum-full")


def test_dead_tiles_are_released():
    np.testing.assert_array_equal(tiles_freed_when_dead(X), X)


def test_psum_address_must_start_a_bank():
    with pytest.raises(NkiValidationError) as info:
        psum_address_off_bank(X)
    check_error(info.value, "psum.bank_alignment", "512", "2048", marker="psum-address")


def test_manual_sbuf_address_must_fit():
    with pytest.raises(NkiValidationError) as info:
        sbuf_address_outside(X)
    check_error(info.value, "tile.address", "(0, 210000)", marker="sbuf-address")


def test_capacity_follows_the_target(monkeypatch):
    # trn3 has 256 KiB partitions: what overflows trn2's 208 KiB fits there.
    @nki.jit
    def fits_on_trn3(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        big = nl.ndarray((128, 56000), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=big, value=0.0)
        nl.store(out, nl.load(x))
        return out

    with pytest.raises(NkiValidationError, match=r"\[sbuf.capacity\]"):
        fits_on_trn3(X)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    np.testing.assert_array_equal(fits_on_trn3(X), X)


# --- reads of memory never written: NKI_UNINITIALIZED_READ=warn (default) | error | off -----------
@nki.jit
def reads_unwritten_sbuf(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:32], src=x[:, 0:32])
    nisa.dma_copy(dst=out, src=t)  # uninit-read
    return out


@nki.jit
def reads_unwritten_psum(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=acc)  # uninit-psum
    nisa.dma_copy(dst=out, src=t)
    return out


def test_uninitialized_read_warns_by_default(monkeypatch):
    monkeypatch.delenv("NKI_UNINITIALIZED_READ", raising=False)
    with pytest.warns(RuntimeWarning, match=r"\[memory.uninitialized_read\]") as record:
        out = reads_unwritten_sbuf(X)
    w = next(w for w in record if "uninitialized_read" in str(w.message))
    # the warning is issued from the kernel line that read the memory
    assert (w.filename, w.lineno) == (__file__, line_of("uninit-read", __file__))
    np.testing.assert_array_equal(out[:, 0:32], X[:, 0:32])
    assert np.isnan(out[:, 32:]).all()  # the unwritten half reads as the NaN poison


def test_uninitialized_read_error(monkeypatch):
    monkeypatch.setenv("NKI_UNINITIALIZED_READ", "error")
    with pytest.raises(ExecutionError) as info:  # the runtime's report of the failed launch
        reads_unwritten_psum(X)
    assert isinstance(info.value.original, UninitializedReadError) and info.value.launch_name == "reads_unwritten_psum"
    check_error(info.value.original, "memory.uninitialized_read", "PSUM", "never written", marker="uninit-psum")


def test_uninitialized_read_off(monkeypatch):
    monkeypatch.setenv("NKI_UNINITIALIZED_READ", "off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = reads_unwritten_psum(X)
    assert np.isnan(out).all()


def test_uninitialized_read_policy_is_checked(monkeypatch):
    monkeypatch.setenv("NKI_UNINITIALIZED_READ", "sometimes")
    with pytest.raises(NkiError, match="NKI_UNINITIALIZED_READ='sometimes'"):
        reads_unwritten_psum(X)


def test_accumulating_matmul_into_fresh_psum_warns():
    @nki.jit
    def accumulate_first(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        acc = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=t, moving=t, accumulate=True)  # acc-fresh
        nl.store(out, acc)
        return out

    with pytest.warns(RuntimeWarning) as record:
        accumulate_first(np.ones((128, 128), np.float32))
    messages = [str(w.message) for w in record if "undefined behaviour" in str(w.message)]
    assert len(messages) == 1 and f"{__file__}:{line_of('acc-fresh', __file__)}" in messages[0]
