"""Builds the C++ shim (torch_neuronx._C) with the normal install.

The shim is split by concern (csrc/runtime: allocator, host allocator, hooks, guard, stream,
event, generator; csrc/aten: the empty kernels; csrc/profiler: torch.profiler's PrivateUse1 stubs and
Kineto activity profiler; csrc/Module.cpp: the Python module) and compiled
against torch 2.13's headers; about 40 s on 2 cores. Everything else in the package is Python.
"""

from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, include_paths

SOURCES = sorted(str(p) for p in Path("csrc").rglob("*.cpp"))
# csrc/profiler includes Kineto's headers as Kineto's own code does (<IActivityProfiler.h>): torch
# ships them in include/kineto.
KINETO_INCLUDE = [str(Path(p) / "kineto") for p in include_paths() if (Path(p) / "kineto").is_dir()]

setup(
    ext_modules=[
        CppExtension(
            "torch_neuronx._C",
            SOURCES,
            include_dirs=KINETO_INCLUDE,
            extra_compile_args=["-O2", "-std=c++20"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
)
