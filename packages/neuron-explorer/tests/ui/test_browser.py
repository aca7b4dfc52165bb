"""The web UI in a real headless browser (Debian's chromium driven by Playwright): a real profile,
every view clicked through, what each shows checked, screenshots kept in tests/artifacts/."""

import os
import re
import shutil
from pathlib import Path

import pytest
from explorer_helpers import buffers_for, capture, chain_program
from neuron_explorer import open_profile
from neuron_explorer.server import Explorer, ExplorerServer

CHROMIUM = os.environ.get("NEURON_EXPLORER_CHROMIUM", "/usr/bin/chromium")
# A closed network refuses Chromium's background connections; without these flags it keeps trying.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        raise RuntimeError(f"the UI tests need Chromium at {CHROMIUM} (apt-get install chromium); .ci/run installs it")
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def server(mixed_profile, tmp_path_factory):
    program = chain_program()
    other = capture(tmp_path_factory.mktemp("other"),
                    lambda rt: [rt.device(0).launch(program, buffers_for(program, i), name="aten::exp") for i in range(3)])
    srv = ExplorerServer(Explorer([mixed_profile, open_profile(other.session_dir)]), port=0, token="ui-test").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def page(server):
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)  # the token URL: sets the cookie every API call then carries
        page.errors = errors
        yield page
        browser.close()
    assert not errors, errors


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"ui_{name}.png"), full_page=True)


def go(page, server, view, pid=0):
    page.goto(f"http://127.0.0.1:{server.port}/#/{view}?p={pid}")


def test_summary(page, server, mixed_profile):
    go(page, server, "summary")
    expect(page.get_by_test_id("card-MFU")).to_contain_text("%")
    mfu = mixed_profile.summary["mfu_estimated_percent"]
    expect(page.get_by_test_id("card-MFU")).to_contain_text(f"{mfu:.2f}%")
    expect(page.get_by_test_id("top-ops")).to_contain_text(mixed_profile.top_ops(1)[0]["node_name"])
    expect(page.get_by_test_id("opcodes")).to_contain_text("MATMUL")
    expect(page.get_by_test_id("engine-busy-chart").locator("canvas")).to_have_count(1)
    shot(page, "summary")


def test_device_trace_zoom_select_and_follow_links(page, server, mixed_profile):
    go(page, server, "device")
    page.wait_for_function("document.body.dataset.devicePainted === '1'", timeout=30_000)
    timeline = page.get_by_test_id("device-timeline")
    expect(timeline).to_contain_text("every row drawn")
    total = mixed_profile.table("Instruction").num_rows
    expect(page.get_by_test_id("device-timeline-rows")).to_have_text(f"{total} rows in view")
    shot(page, "device_trace")

    box = page.get_by_test_id("device-timeline-chart").bounding_box()
    before = timeline.locator(".toolbar .muted").inner_text()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.6)
    page.mouse.wheel(0, -600)  # zoom in around the pointer
    expect(timeline.locator(".toolbar .muted")).not_to_have_text(before, timeout=10_000)
    expect(page.get_by_test_id("device-timeline-rows")).not_to_have_text(f"{total} rows in view", timeout=10_000)
    page.get_by_role("button", name="reset zoom").first.click()
    expect(page.get_by_test_id("device-timeline-rows")).to_have_text(f"{total} rows in view", timeout=10_000)

    first = page.get_by_test_id("rows-in-view").locator("tbody tr").first
    opcode = first.locator("td").nth(2).inner_text()
    first.click()
    detail = page.get_by_test_id("instruction-detail")
    expect(detail.locator("h3")).to_contain_text(opcode)
    expect(detail).to_contain_text("operation")

    link = detail.get_by_test_id("goto-source")
    file_name, line = re.search(r"source: (\S+):(\d+)", link.inner_text()).groups()
    link.click()
    expect(page.get_by_test_id("source-view")).to_be_visible()
    selected = page.locator(".code .line.selected")
    expect(selected).to_have_count(1)
    expect(selected).to_have_attribute("data-line", line)
    source = Path(next(r["nki_source_location"] for r in mixed_profile.table("Instruction").to_pylist()
                       if r["nki_source_location"] and r["nki_source_location"].rsplit(":", 1)[0].endswith(file_name)
                       ).rsplit(":", 1)[0])
    expect(selected.locator(".text")).to_have_text(source.read_text().splitlines()[int(line) - 1])
    expect(selected.locator(".deco")).to_contain_text("inst")
    shot(page, "source")
    page.get_by_test_id("highlight-lines").click()
    expect(page.get_by_test_id("highlight-banner")).to_contain_text("highlighting lines:")


def test_dependency_chain_of_an_instruction(page, server, mixed_profile):
    rows = mixed_profile.table("Instruction", filters=[("hlo_name", "=", "aten::exp")]).to_pylist()
    go(page, server, "dependencies")
    page.get_by_test_id("deps-input").fill(str(rows[-1]["id"]))
    page.get_by_role("button", name="show").click()
    upstream = page.get_by_test_id("deps-upstream")
    expect(upstream.locator("tbody tr")).to_have_count(3)
    expect(upstream).to_contain_text("TENSOR_TENSOR")
    expect(upstream).to_contain_text("FLOW_DEPENDENCE")
    expect(page.get_by_test_id("deps-downstream")).to_contain_text("DMA_TRIGGER")
    expect(page.get_by_test_id("deps-graph").locator("canvas")).to_have_count(1)
    shot(page, "dependencies")


def test_system_trace_opens_an_executions_device_profile(page, server):
    go(page, server, "system")
    table = page.get_by_test_id("executions-in-view")
    expect(table.locator("tbody tr").first).to_be_visible(timeout=20_000)
    expect(page.get_by_test_id("system-host")).to_contain_text("Runtime calls")
    shot(page, "system_trace")
    table.locator("tbody tr").first.click()
    detail = page.get_by_test_id("execution-detail")
    expect(detail).to_contain_text("launch")
    detail.get_by_test_id("open-device-profile").click()
    expect(page.get_by_test_id("device-view")).to_be_visible()
    expect(page.get_by_test_id("device-timeline-rows")).to_have_text(re.compile(r"\d+ rows in view"), timeout=20_000)


def test_hierarchy_drills_from_op_to_instruction_groups(page, server):
    go(page, server, "hierarchy")
    view = page.get_by_test_id("hierarchy-view")
    op = view.locator("tr.level-op", has_text="scale_add")
    op.get_by_role("button", name="+").click()
    graph = view.locator("tr.level-graph").first
    expect(graph).to_contain_text("scale_add")
    graph.get_by_role("button", name="+").click()
    groups = view.get_by_test_id("instruction-group")
    expect(groups.first).to_be_visible()
    expect(view).to_contain_text("ACTIVATE")
    expect(view).to_contain_text("kernels.py")
    shot(page, "hierarchy")
    graph.get_by_role("button", name="highlight in device trace").click()
    expect(page.get_by_test_id("highlight-banner")).to_contain_text("highlighting node:")


def test_side_by_side_comparison(page, server, mixed_profile):
    go(page, server, "compare")
    page.get_by_test_id("compare-B").select_option("1")
    metrics = page.get_by_test_id("compare-metrics")
    expect(metrics).to_contain_text("mfu_estimated_percent")
    expect(page.get_by_test_id("compare-ops")).to_contain_text("aten::exp")
    expect(page.get_by_test_id("compare-chart").locator("canvas")).to_have_count(1)
    shot(page, "compare")


def test_a_neff_given_on_the_command_line_opens_at_its_first_execution(page, server, mixed_profile):
    chain = next(e for e in mixed_profile.table("ExecutionInfo").to_pylist() if e["name"] == "aten::exp")
    page.goto(f"http://127.0.0.1:{server.port}/?neff=chain#/device?p=0")
    page.wait_for_function("document.body.dataset.devicePainted === '1'", timeout=30_000)
    rows = mixed_profile.table("Instruction", filters=[("launch_id", "=", chain["launch_id"])]).num_rows
    expect(page.get_by_test_id("device-timeline-rows")).to_have_text(f"{rows} rows in view", timeout=10_000)
