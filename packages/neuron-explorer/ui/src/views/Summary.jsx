import { useEffect, useMemo, useState } from "react";
import { api } from "../api.js";
import { Chart } from "../chart.jsx";
import { bytes, count, engineColor, pct, time } from "../format.js";

const ENGINES = ["tensor", "vector", "scalar", "gpsimd", "sync"];

export function Summary({ pid, nav }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => { api(`p/${pid}/summary`).then(setData).catch((e) => setError(e.message)); }, [pid]);
  const busy = useMemo(() => {
    if (!data) return null;
    const s = data.summary;
    const names = [...ENGINES, "dma"];
    const values = names.map((e) => (e === "dma" ? s.dma_active_time_percent : s[`${e}_engine_active_time_percent`]) || 0);
    return {
      animation: false,
      grid: { left: 70, right: 20, top: 20, bottom: 30 },
      xAxis: { type: "category", data: names },
      yAxis: { type: "value", max: 100, name: "busy %" },
      tooltip: { trigger: "axis" },
      series: [{ type: "bar", data: values.map((v, i) => ({ value: +v.toFixed(2), itemStyle: { color: engineColor(names[i]) } })),
        label: { show: true, position: "top", formatter: (p) => `${p.value}%` } }],
    };
  }, [data]);
  if (error) return <div className="error">{error}</div>;
  if (!data) return <div className="muted">loading...</div>;
  const s = data.summary;
  const cards = [
    ["Device time", time((s.total_time || 0) * 1e9)], ["Instructions", count(s.instruction_count)],
    ["MFU", pct(s.mfu_estimated_percent)], ["HFU", pct(s.hfu_estimated_percent)], ["MBU", pct(s.mbu_estimated_percent)],
    ["Active", pct(s.total_active_time_percent)], ["HBM traffic", bytes((s.hbm_read_bytes || 0) + (s.hbm_write_bytes || 0))],
    ["DMA transfers", count(s.dma_transfer_count)],
  ];
  return (
    <section data-testid="summary-view">
      <div className="cards">
        {cards.map(([k, v]) => <div className="card" key={k} data-testid={`card-${k}`}><div className="k">{k}</div><div className="v">{v}</div></div>)}
      </div>
      <p className="muted">
        {data.metadata.instance_type}; schema {data.metadata.profile_schema_version}; {data.executions} device executions with
        instruction traces. Arithmetic intensity {s.mm_arithmetic_intensity?.toFixed(1)} FLOP/B against a ridge of{" "}
        {s.peak_flops_bandwidth_ratio?.toFixed(1)}: {s.mm_arithmetic_intensity >= s.peak_flops_bandwidth_ratio ? "compute" : "memory"} bound.
      </p>
      <h3>Engine busy time</h3>
      <Chart option={busy} style={{ height: 240 }} testId="engine-busy-chart" />
      <h3>Top operations by device time</h3>
      <table className="grid" data-testid="top-ops">
        <thead><tr><th>operation</th><th>launches</th><th>device time</th><th>MFU</th><th>MBU</th><th>tensor busy</th><th></th></tr></thead>
        <tbody>
          {data.top_ops.map((op) => (
            <tr key={op.id}>
              <td>{op.node_name}</td><td>{count(op.launch_count)}</td><td>{time(op.device_time_ns)}</td><td>{pct(op.mfu)}</td>
              <td>{pct(op.mbu)}</td><td>{time(op.active_time_tensor_ns)}</td>
              <td><button onClick={() => nav.go("hierarchy")}>hierarchy</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Opcodes</h3>
      <table className="grid" data-testid="opcodes">
        <thead><tr><th>engine</th><th>opcode</th><th>count</th><th>instruction time</th><th>active</th><th></th></tr></thead>
        <tbody>
          {data.opcodes.map((o) => (
            <tr key={`${o.engine}/${o.opcode}`}>
              <td>{o.engine}</td><td>{o.opcode}</td><td>{count(o.instruction_count)}</td><td>{time(o.instruction_time_ns)}</td>
              <td>{pct(o.active_time_percent)}</td>
              <td><button onClick={() => nav.showInDevice(null, `opcode:${o.opcode}`)}>highlight</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      {data.warnings.length > 0 && (
        <>
          <h3>Warnings</h3>
          <ul data-testid="warnings">{data.warnings.map((w, i) => <li key={i}><b>{w.category}</b>: {w.message}</li>)}</ul>
        </>
      )}
    </section>
  );
}
