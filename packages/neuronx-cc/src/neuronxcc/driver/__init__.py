"""The ``neuronx-cc`` command line (``neuronxcc.driver.cli:main``)."""
