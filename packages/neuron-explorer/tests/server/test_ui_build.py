"""The UI's built assets ship in the package and were built from the sources that are committed."""

from pathlib import Path

from neuron_explorer.server.build_info import STATIC_DIR, shipped_digest, sources_digest

UI_SOURCES = Path(__file__).resolve().parents[2] / "ui"


def test_the_shipped_build_is_the_build_of_the_committed_sources():
    assert (STATIC_DIR / "index.html").is_file() and list((STATIC_DIR / "assets").glob("*.js"))
    assert shipped_digest() == sources_digest(UI_SOURCES), (
        "packages/neuron-explorer/ui changed without a rebuild: run `npm ci && npm run build` there and commit "
        "src/neuron_explorer/server/static")


def test_the_shipped_page_loads_nothing_from_the_network():
    html = (STATIC_DIR / "index.html").read_text()
    assert "http://" not in html and "https://" not in html
    for asset in (STATIC_DIR / "assets").iterdir():
        text = asset.read_text(errors="replace")
        assert "fonts.googleapis" not in text and "cdn." not in text, asset.name
