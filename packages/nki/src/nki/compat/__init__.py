"""Run other people's NKI kernels against their own references and report what works.

    python -m nki.compat PATH... [--label PATH=owner/repo@commit] [--markdown docs/nki_compatibility.md]

Every ``.py`` file under the paths is a candidate. A file with pytest tests (``test_*``
functions, ``Test*`` classes, unittest cases) runs as its tests; any other file with an
``if __name__ == "__main__":`` block runs as a script. Each file runs in its own process, with a
time limit per unit, and the repository's source folders on ``sys.path`` (the file's folder, the
path given, and ``src/`` with the folders below it).

Each unit (a test, or a script) ends as one of:

* ``ok``       - it ran and every comparison it made (``assert``, ``np.allclose``,
                 ``np.testing.assert_*``, ``torch.allclose``, ``torch.testing.assert_close``) held;
* ``wrong``    - it ran and a comparison failed: a result differs from its reference;
* ``rejected`` - nki refused the kernel: the hardware rule and the kernel line are reported;
* ``crash``    - anything else raised (a missing name, an unsupported call form, ...), with the
                 exception and the innermost line of the unit's own code;
* ``timeout``  - the unit ran past its time limit;
* ``skipped``  - the unit skipped itself (e.g. needs a device we do not model);
* ``no-check`` - a script ran to the end without comparing anything to a reference.

with the simulated device time of the NKI launches it made and its wall time.
"""
