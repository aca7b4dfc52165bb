import pytest
from neuron_explorer.server import Explorer, ExplorerServer


@pytest.fixture(scope="package")
def server(mixed_profile, tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    (root / "elsewhere.py").write_text("secret = 1\n")
    srv = ExplorerServer(Explorer([mixed_profile, mixed_profile], [root]), port=0).start()
    yield srv
    srv.stop()
