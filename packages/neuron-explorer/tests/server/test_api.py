"""The UI's JSON API over a real profile, the token, the static files, and what is never served."""

import json
import socket
import urllib.error
import urllib.request

import pytest
from neuron_explorer.server import Explorer, ExplorerServer, ServerError


def get(server, path, headers=None):
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def api(server, path):
    status, body, _ = get(server, f"/api/{path}")
    assert status == 200, body
    return json.loads(body)


def test_profiles_and_summary(server, mixed_profile):
    profiles = api(server, "profiles")
    assert [p["id"] for p in profiles] == ["0", "1"]
    s = api(server, "p/0/summary")
    assert s["summary"]["instruction_count"] == mixed_profile.table("Instruction").num_rows
    assert s["top_ops"][0]["device_time_ns"] >= s["top_ops"][-1]["device_time_ns"]


def test_device_window_draws_rows_when_few_and_bins_when_many(server, mixed_profile, monkeypatch):
    tracks = api(server, "p/0/device/tracks")
    names = [(t["nc"], t["track"]) for t in tracks["tracks"]]
    assert (0, "TensorMatrix") in names and (1, "Vector") in names
    assert names.index((0, "TensorMatrix")) < names.index((0, "qSyncIO0"))  # engines before DMA queues
    w = api(server, f"p/0/device/window?start={tracks['start']}&end={tracks['end']}&bins=100")
    assert w["detail"] and sum(len(t["rows"]) for t in w["tracks"]) == mixed_profile.table("Instruction").num_rows
    assert len(w["hbm"]) == len(w["sbuf"]) == len(w["psum"]) == 100
    peak_sbuf = max(mixed_profile.table("SbufUsage").column("avg_util_percent").to_pylist())
    assert 0 < max(w["sbuf"]) <= peak_sbuf + 1e-6 and max(w["hbm"]) > 0 and max(w["psum"]) > 0
    monkeypatch.setattr("neuron_explorer.server.timeline.DETAIL_ROWS", 10)  # as if the window held too many rows
    w = api(server, f"p/0/device/window?start={tracks['start']}&end={tracks['end']}&bins=100")
    assert not w["detail"] and all(len(t["busy"]) == 100 for t in w["tracks"])
    assert all(0 <= b <= 1 for t in w["tracks"] for b in t["busy"]) and max(max(t["busy"]) for t in w["tracks"]) > 0


def test_highlight_marks_the_rows_of_a_node_lines_or_opcode(server, mixed_profile):
    tracks = api(server, "p/0/device/tracks")
    ops = api(server, "p/0/hierarchy")
    mm = next(o for o in ops if o["node_name"] == "aten::mm")
    w = api(server, f"p/0/device/window?start={tracks['start']}&end={tracks['end']}&highlight=node:{mm['id']}")
    marked = {int(r[0]) for t in w["tracks"] for r in t["rows"] if r[4]}
    children = [c["id"] for c in mm["children"]]
    expected = mixed_profile.table("Instruction", columns=["id"], filters=[("framework_node_id", "in", children)])
    assert marked == set(expected.column("id").to_pylist()) and marked
    files = api(server, "p/0/sources")
    kernel = next(f for f in files if f["name"].endswith("kernels.py"))
    line = next(iter(api(server, f"p/0/source/{kernel['id']}")["lines"]))
    w = api(server, f"p/0/device/window?start={tracks['start']}&end={tracks['end']}&highlight=lines:{kernel['id']}:{line}-{line}")
    marked = {int(r[0]) for t in w["tracks"] for r in t["rows"] if r[4]}
    located = mixed_profile.table("Instruction", columns=["id", "nki_source_location"]).to_pylist()
    assert marked == {r["id"] for r in located if r["nki_source_location"] == f"{kernel['name']}:{line}"} and marked
    w = api(server, f"p/0/device/window?start={tracks['start']}&end={tracks['end']}&highlight=opcode:MATMUL")
    opcodes = tracks["opcodes"]
    assert {opcodes[int(r[3])] for t in w["tracks"] for r in t["rows"] if r[4]} == {"MATMUL"}
    status, body, _ = get(server, "/api/p/0/device/window?highlight=bogus:1")
    assert status == 400 and b"highlight must be" in body


def test_instruction_detail_links_source_execution_and_dma(server, mixed_profile):
    row = mixed_profile.table("Instruction", filters=[("opcode", "=", "DMA_COPY")]).to_pylist()[0]
    d = api(server, f"p/0/instruction/{row['id']}")
    assert d["operands"] == row["operands"] and d["execution"]["launch_id"] == row["launch_id"]
    assert d["source"]["line"] == int(row["nki_source_location"].rsplit(":", 1)[1])
    assert len(d["dma_packets"]) == 1
    assert get(server, "/api/p/0/instruction/99999999")[0] == 404


def test_system_windows_on_both_clocks(server, mixed_profile):
    device = api(server, "p/0/system?clock=device")
    assert any(n.startswith("NeuronCore 1") for n in device["track_names"])
    rows = [r for t in device["tracks"] for r in t["rows"]]
    assert len(rows) == mixed_profile.table("ExecutionInfo").num_rows
    host = api(server, "p/0/system?clock=host")
    assert all(n.startswith("thread ") for n in host["track_names"])
    assert get(server, "/api/p/0/system?clock=wall")[0] == 400
    launch = rows[0][0]
    ex = api(server, f"p/0/execution/{launch}")
    assert ex["launch_id"] == launch


def test_hierarchy_groups_and_range(server):
    ops = api(server, "p/0/hierarchy")
    graph = next(o for o in ops if o["node_name"] == "scale_add")["children"][0]
    groups = api(server, f"p/0/hierarchy/{graph['id']}/groups")
    assert {g["opcode"] for g in groups} >= {"DMA_COPY", "ACTIVATE", "TENSOR_TENSOR"}
    assert all(g["source"].rsplit(":", 1)[0].endswith("kernels.py") for g in groups)
    r = api(server, f"p/0/hierarchy/{graph['id']}/range")
    assert r["end"] > r["start"] and r["instructions"] == sum(g["count"] for g in groups)


def test_dependency_chains(server, mixed_profile):
    rows = mixed_profile.table("Instruction", filters=[("hlo_name", "=", "aten::exp")]).to_pylist()
    last = rows[-1]
    d = api(server, f"p/0/deps/Instruction/{last['id']}?depth=5")
    assert [e["level"] for e in d["upstream"]] == [1, 2, 3]
    assert [d["rows"][f"Instruction:{e['id']}"]["opcode"] for e in d["upstream"]] == ["TENSOR_TENSOR", "ACTIVATE", "DMA_COPY"]
    assert any(e["table"] == "DmaPacket" for e in d["downstream"])
    first = api(server, f"p/0/deps/Instruction/{rows[0]['id']}")
    assert first["upstream"] == [] and first["downstream"][0]["id"] in {r["id"] for r in rows} | {
        p["id"] for p in mixed_profile.table("DmaPacket").to_pylist()}
    launch = api(server, f"p/0/deps/launch/{last['launch_id']}")
    assert launch["issued_by"][0]["event_type"] == "nrt_execute" and launch["upstream"]
    assert get(server, "/api/p/0/deps/Summary/1")[0] == 400


def test_sources_are_served_from_the_profile_with_line_statistics(server):
    files = api(server, "p/0/sources")
    kernel = next(f for f in files if f["name"].endswith("kernels.py"))
    assert kernel["captured"] and kernel["instructions"] > 0
    src = api(server, f"p/0/source/{kernel['id']}")
    assert src["served_from"] == "profile" and "def scale_add" in src["text"]
    line_of = {n + 1: text for n, text in enumerate(src["text"].splitlines())}
    assert src["lines"] and all("nisa." in line_of[int(n)] or "nl." in line_of[int(n)] for n in src["lines"])
    assert get(server, "/api/p/0/source/999")[0] == 404


def test_nothing_outside_the_ui_and_profile_is_served(server):
    for path in ("/../../../../etc/passwd", "/assets/../../app.py", "/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2fetc%2fpasswd"):
        status, body, _ = get(server, path)
        assert status in (403, 404) and b"root:" not in body, path
    status, body, headers = get(server, "/")
    assert status == 200 and b'<div id="root">' in body and headers["Content-Type"].startswith("text/html")
    assert get(server, "/api/nope")[0] == 404 and get(server, "/api/p/7/summary")[0] == 404


def test_a_token_is_required_when_set(mixed_profile):
    srv = ExplorerServer(Explorer([mixed_profile]), port=0, token="s3cret").start()
    try:
        assert get(srv, "/api/profiles")[0] == 403
        assert get(srv, "/")[0] == 403
        status, _, headers = get(srv, "/?token=s3cret")
        assert status == 200 and "neuron_explorer_token=s3cret" in headers["Set-Cookie"]
        assert get(srv, "/api/profiles", {"Cookie": "neuron_explorer_token=s3cret"})[0] == 200
        assert get(srv, "/api/profiles", {"X-Explorer-Token": "s3cret"})[0] == 200
        assert get(srv, "/api/profiles", {"X-Explorer-Token": "wrong"})[0] == 403
        assert srv.url.endswith("?token=s3cret") and srv.host == "127.0.0.1"
    finally:
        srv.stop()


def test_a_port_in_use_is_a_clear_error(mixed_profile):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"):
            ExplorerServer(Explorer([mixed_profile]), port=port)


def test_compare(server):
    c = api(server, "compare?a=0&b=1")
    assert c["a"]["id"] == "0" and c["b"]["id"] == "1"
    assert all(m["a"] == m["b"] for m in c["metrics"])
    assert all(o["delta_ns"] == 0 for o in c["ops"]) and c["ops"]
