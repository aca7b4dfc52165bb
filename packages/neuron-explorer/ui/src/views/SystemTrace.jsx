import { useCallback, useEffect, useMemo, useState } from "react";
import { api } from "../api.js";
import { Chart } from "../chart.jsx";
import { Timeline } from "../timeline.jsx";
import { paletteColor, pct, time } from "../format.js";

function Lanes({ pid, clock, onSelect, title, onRows }) {
  const [meta, setMeta] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api(`p/${pid}/system`, { clock, bins: 10 }).then(setMeta).catch((e) => setError(e.message));
  }, [pid, clock]);
  const fetchWindow = useCallback(async (start, end, bins) => {
    const w = await api(`p/${pid}/system`, { clock, start, end, bins });
    if (onRows) {
      const flat = [];
      for (const t of w.tracks) for (const r of t.rows || []) flat.push([w.track_names[t.track], ...r]);
      flat.sort((a, b) => (b[3] - b[2]) - (a[3] - a[2]));
      onRows(flat.slice(0, 25));
    }
    return w;
  }, [pid, clock, onRows]);
  // One color per operation name, so repeated ops read as one color along a lane.
  const colorOf = useCallback((t, row) => paletteColor(row ? [...String(row[3])].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) : t), []);
  const labelOf = useCallback((name, v) => `${name} (launch ${v[6]})`, []);
  if (error) return <div className="error">{error}</div>;
  if (!meta) return <div className="muted">loading...</div>;
  if (!meta.track_names.length) return <p className="muted">No {clock} events.</p>;
  return (
    <Timeline title={title} tracks={meta.track_names} range={meta.range} fetchWindow={fetchWindow} colorOf={colorOf}
      labelOf={labelOf} onSelect={onSelect} testId={`system-${clock}`} />
  );
}

function HostSamples({ pid }) {
  const [samples, setSamples] = useState(null);
  useEffect(() => { api(`p/${pid}/host`).then(setSamples).catch(() => setSamples({ cpu: [], memory: [] })); }, [pid]);
  const option = useMemo(() => samples && {
    animation: false,
    legend: { data: ["CPU %", "memory %"], top: 0 },
    grid: { left: 60, right: 30, top: 25, bottom: 25 },
    tooltip: { trigger: "axis" },
    xAxis: { type: "value", axisLabel: { formatter: (v) => time(v) } },
    yAxis: { type: "value", max: 100, name: "%" },
    series: [
      { name: "CPU %", type: "line", symbol: "none", data: samples.cpu },
      { name: "memory %", type: "line", symbol: "none", data: samples.memory },
    ],
  }, [samples]);
  if (!samples || (!samples.cpu.length && !samples.memory.length)) return null;
  return (
    <>
      <h3>Host CPU and memory (host clock)</h3>
      <Chart option={option} style={{ height: 160 }} testId="host-samples" />
    </>
  );
}

export function SystemTrace({ pid, nav }) {
  const [execution, setExecution] = useState(null);
  const [rows, setRows] = useState([]);
  const select = useCallback((launchId) => {
    api(`p/${pid}/execution/${launchId}`).then(setExecution);
  }, [pid]);
  return (
    <section data-testid="system-view">
      <Lanes pid={pid} clock="device" onSelect={select} onRows={setRows}
        title="Device executions per NeuronCore and queue (device clock)" />
      <Lanes pid={pid} clock="host" onSelect={select} title="Runtime calls per host thread (host clock)" />
      <HostSamples pid={pid} />
      <h3>Longest executions in view</h3>
      <table className="grid small" data-testid="executions-in-view">
        <thead><tr><th>launch</th><th>lane</th><th>name</th><th>duration</th></tr></thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r[1]} className="clickable" onClick={() => select(r[1])}>
              <td>{r[1]}</td><td>{r[0]}</td><td>{r[4]}</td><td>{time(r[3] - r[2])}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {execution && (
        <div className="detail" data-testid="execution-detail">
          <h3>{execution.name} <span className="muted">launch {execution.launch_id}</span></h3>
          <p>{execution.context}</p>
          <p>
            {execution.kind} on NeuronCore {execution.nc_idx}, queue {execution.queue}: {time(execution.execution_end_ts - execution.execution_start_ts)}
            {" "}of device time{execution.summary ? `, MFU ${pct(execution.summary.mfu_estimated_percent)}` : ""}
            {execution.error ? `, failed: ${execution.error}` : ""}
          </p>
          <div className="buttons">
            {execution.device_profiled && (
              <button data-testid="open-device-profile"
                onClick={() => nav.showInDevice([execution.execution_start_ts, execution.execution_end_ts], null)}>
                open device profile
              </button>
            )}
            <button onClick={() => nav.showDependencies("launch", execution.launch_id)}>dependencies</button>
          </div>
        </div>
      )}
    </section>
  );
}
