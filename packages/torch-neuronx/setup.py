"""Builds the C++ shim (torch_neuronx._C) with the normal install.

One translation unit against torch 2.13's headers; about 30 s on 2 cores. Everything else in the
package is Python.
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    ext_modules=[
        CppExtension(
            "torch_neuronx._C",
            ["csrc/neuron_shim.cpp"],
            extra_compile_args=["-O2", "-std=c++20"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
)
