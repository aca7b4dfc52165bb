from .access_pattern import HBM, PSUM, SBUF, AccessPattern, hbm, onchip
from .hbm import Hbm, HbmAllocation, MemoryStats
from .onchip import OnChipMemory

__all__ = ["AccessPattern", "HBM", "SBUF", "PSUM", "hbm", "onchip", "Hbm", "HbmAllocation", "MemoryStats", "OnChipMemory"]
