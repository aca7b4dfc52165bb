"""``neuronxcc`` is a namespace package shared with nki's ``neuronxcc.nki``."""

import importlib
import pathlib


def test_namespace_package_has_no_init():
    import neuronxcc

    assert getattr(neuronxcc, "__file__", None) is None
    for path in neuronxcc.__path__:
        assert not (pathlib.Path(path) / "__init__.py").exists()


def test_compiler_and_legacy_nki_import_side_by_side():
    compiler = importlib.import_module("neuronxcc.compiler")
    nki = importlib.import_module("neuronxcc.nki")
    assert callable(compiler.compile_graph) and callable(compiler.compile_neff)
    assert hasattr(nki, "jit")


def test_version():
    from neuronxcc.compiler import __version__

    assert __version__ == "2.32.0+sim"
