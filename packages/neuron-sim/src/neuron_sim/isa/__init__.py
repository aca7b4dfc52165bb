"""The NeuronCore instruction set. Import instruction classes from here."""

from .accumulators import RangeSelect, SelectReduce, TensorScalarCumulative, TensorTensorScan
from .base import ENGINE_READS, ENGINE_WRITES, ENGINES, OPCODES, Instruction
from .control import LoopEnd, LoopStart, RegisterLoad, RegisterSet, RegisterStore, loop_structure
from .dma import DmaCopy, DmaIndirect, DmaInstruction, DmaTranspose
from .gpsimd import AffineSelect, Iota, LocalGather, PartitionReduce
from .rng import Dropout, RandomFill, RandomWords, SetRngSeed
from .scalar_engine import Activation
from .search import FindIndex8, MatchReplace8, Max8, SequenceBounds
from .sync import Barrier, SemaphoreSignal, SemaphoreWait
from .tensor_engine import Matmul, Transpose
from .vector import (
    BnAggr,
    BnStats,
    CopyPredicated,
    Memset,
    Reciprocal,
    ScalarTensorTensor,
    Select,
    StreamShuffle,
    TensorCopy,
    TensorReduce,
    TensorScalar,
    TensorTensor,
)

__all__ = [
    "ENGINES", "ENGINE_READS", "ENGINE_WRITES", "OPCODES", "Instruction",
    "DmaInstruction", "DmaCopy", "DmaIndirect", "DmaTranspose",
    "Matmul", "Transpose",
    "TensorTensor", "TensorScalar", "ScalarTensorTensor", "TensorReduce", "TensorCopy", "CopyPredicated",
    "Select", "Memset", "Reciprocal", "BnStats", "BnAggr", "StreamShuffle",
    "Activation",
    "Iota", "AffineSelect", "PartitionReduce", "LocalGather",
    "TensorScalarCumulative", "TensorTensorScan", "SelectReduce", "RangeSelect",
    "Max8", "FindIndex8", "MatchReplace8", "SequenceBounds", "SetRngSeed", "RandomFill", "Dropout", "RandomWords",
    "SemaphoreSignal", "SemaphoreWait", "Barrier",
    "RegisterSet", "RegisterLoad", "RegisterStore", "LoopStart", "LoopEnd", "loop_structure",
]
