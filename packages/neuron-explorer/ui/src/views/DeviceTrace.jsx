import { useCallback, useEffect, useMemo, useState } from "react";
import { api } from "../api.js";
import { Timeline } from "../timeline.jsx";
import { bytes, count, engineColor, time } from "../format.js";

export function DeviceTrace({ pid, nav, highlight, zoom, selection }) {
  const [info, setInfo] = useState(null);
  const [error, setError] = useState(null);
  const [rows, setRows] = useState([]);
  const [detail, setDetail] = useState(null);

  const [initialZoom, setInitialZoom] = useState(null);
  useEffect(() => {
    api(`p/${pid}/device/tracks`).then((i) => {
      // `neuron-explorer view -n x.neff -s session` opens at the first execution of that NEFF
      const neff = new URLSearchParams(window.location.search).get("neff");
      const first = neff && i.executions.find((e) => e.neff_name && e.neff_name.startsWith(`${neff}_`));
      if (first) setInitialZoom([first.execution_start_ts, first.execution_end_ts]);
      setInfo(i);
    }).catch((e) => setError(e.message));
  }, [pid]);

  const select = useCallback((id) => {
    nav.select("Instruction", id);
    api(`p/${pid}/instruction/${id}`).then(setDetail).catch((e) => setError(e.message));
  }, [pid]);

  useEffect(() => {
    if (selection && selection.table === "Instruction") select(selection.id);
  }, []);

  const fetchWindow = useCallback(async (start, end, bins) => {
    const w = await api(`p/${pid}/device/window`, { start, end, bins, highlight });
    const flat = [];
    for (const t of w.tracks) for (const r of t.rows || []) flat.push([t.track, ...r]);
    flat.sort((a, b) => (b[3] - b[2]) - (a[3] - a[2]));
    setRows(flat.slice(0, 40));
    return w;
  }, [pid, highlight]);

  const tracks = useMemo(() => (info ? info.tracks.map((t) => `nc${t.nc} ${t.track}`) : []), [info]);
  const colorOf = useCallback((t) => engineColor(info && info.tracks[t].engine), [info]);
  const labelOf = useCallback((op) => (info && op >= 0 ? info.opcodes[op] : ""), [info]);
  const onPainted = useCallback(() => {
    document.body.dataset.devicePainted = "1";
    performance.mark("device-trace-painted");
  }, []);

  if (error) return <div className="error">{error}</div>;
  if (!info) return <div className="muted">loading tracks...</div>;
  if (!info.tracks.length) {
    return <div className="muted" data-testid="device-empty">This profile has no instruction traces (capture with a device profile).</div>;
  }
  const range = [info.start, info.end];
  return (
    <section data-testid="device-view">
      {highlight && (
        <div className="banner" data-testid="highlight-banner">
          highlighting {highlight} <button onClick={() => nav.setHighlight(null)}>clear</button>
        </div>
      )}
      <Timeline title={`${count(info.tracks.reduce((a, t) => a + t.rows, 0))} instructions on ${info.tracks.length} tracks`}
        tracks={tracks} range={range} zoomTo={zoom || initialZoom} fetchWindow={fetchWindow} colorOf={colorOf} labelOf={labelOf}
        onSelect={select} onPainted={onPainted} hbm testId="device-timeline" />
      <div className="split">
        <div>
          <h3>Longest instructions in view</h3>
          <table className="grid small" data-testid="rows-in-view">
            <thead><tr><th>id</th><th>track</th><th>opcode</th><th>start</th><th>duration</th></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r[1]} onClick={() => select(r[1])} className="clickable">
                  <td>{r[1]}</td><td>{tracks[r[0]]}</td><td>{info.opcodes[r[4]]}</td><td>{time(r[2] - range[0])}</td><td>{time(r[3] - r[2])}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {!rows.length && <p className="muted">Zoom in to list individual instructions.</p>}
        </div>
        <div>{detail && <InstructionDetail d={detail} nav={nav} range={range} />}</div>
      </div>
    </section>
  );
}

function InstructionDetail({ d, nav, range }) {
  const fields = [
    ["engine / track", `${d.engine} / ${d.timeline_track}`], ["start", time(d.start_ts - range[0])], ["duration", time(d.duration_ns)],
    ["waited", d.evt_wait_time_ns ? `${time(d.evt_wait_time_ns)} on ${d.waited_on}` : "no"], ["pc", d.pc],
    ["operation", d.hlo_name], ["HBM read / write", `${bytes(d.hbm_read_bytes)} / ${bytes(d.hbm_write_bytes)}`],
    ["SBUF read / write", `${bytes(d.sbuf_read_bytes)} / ${bytes(d.sbuf_write_bytes)}`],
    ["PSUM read / write", `${bytes(d.psum_read_bytes)} / ${bytes(d.psum_write_bytes)}`], ["FLOPs", count(d.raw_flops)],
    ["execution", d.execution ? `${d.execution.name} (launch ${d.launch_id}, ${d.execution.queue})` : d.launch_id],
  ];
  return (
    <div className="detail" data-testid="instruction-detail">
      <h3>{d.opcode} <span className="muted">#{d.id}</span></h3>
      <code className="operands">{d.operands}</code>
      <table className="kv"><tbody>{fields.map(([k, v]) => <tr key={k}><th>{k}</th><td>{v}</td></tr>)}</tbody></table>
      {d.dma_packets.length > 0 && (
        <p>DMA: {d.dma_packets.map((p) => `${p.source} -> ${p.dest} ${bytes(p.transfer_bytes)} in ${time(p.duration_ns)}`).join("; ")}</p>
      )}
      <div className="buttons">
        {d.source && (
          <button data-testid="goto-source" onClick={() => nav.showSource({ file_id: d.source.file_id, line: d.source.line })}>
            source: {d.source.name.split("/").pop()}:{d.source.line}
          </button>
        )}
        <button data-testid="goto-deps" onClick={() => nav.showDependencies("Instruction", d.id)}>dependencies</button>
      </div>
    </div>
  );
}
