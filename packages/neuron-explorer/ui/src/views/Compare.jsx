import { useEffect, useMemo, useState } from "react";
import { api } from "../api.js";
import { Chart } from "../chart.jsx";
import { count, time } from "../format.js";

function show(metric, v) {
  if (v === null || v === undefined) return "-";
  if (metric === "total_time") return time(v * 1e9);
  if (metric.endsWith("percent")) return `${v.toFixed(2)}%`;
  return count(v);
}

export function Compare({ profiles, pid }) {
  const [a, setA] = useState(pid);
  const [b, setB] = useState(profiles.length > 1 ? profiles.find((p) => p.id !== pid).id : pid);
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => { api("compare", { a, b }).then(setData).catch((e) => setError(e.message)); }, [a, b]);
  const chart = useMemo(() => {
    if (!data) return null;
    const ops = data.ops.slice(0, 12);
    return {
      animation: false,
      legend: { data: ["A", "B"] },
      grid: { left: 180, right: 20, top: 30, bottom: 20 },
      tooltip: { trigger: "axis" },
      yAxis: { type: "category", data: ops.map((o) => o.name), inverse: true },
      xAxis: { type: "value", name: "device us" },
      series: [
        { name: "A", type: "bar", data: ops.map((o) => +(o.a_time_ns / 1e3).toFixed(3)) },
        { name: "B", type: "bar", data: ops.map((o) => +(o.b_time_ns / 1e3).toFixed(3)) },
      ],
    };
  }, [data]);
  const picker = (value, set, name) => (
    <label>{name} <select value={value} onChange={(e) => set(e.target.value)} data-testid={`compare-${name}`}>
      {profiles.map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
    </select></label>
  );
  return (
    <section data-testid="compare-view">
      <div className="toolbar">{picker(a, setA, "A")} {picker(b, setB, "B")}</div>
      {error && <div className="error">{error}</div>}
      {data && (
        <div className="split">
          <div>
            <table className="grid" data-testid="compare-metrics">
              <thead><tr><th>metric</th><th>A: {data.a.name}</th><th>B: {data.b.name}</th><th>B / A</th></tr></thead>
              <tbody>
                {data.metrics.map((m) => (
                  <tr key={m.metric}>
                    <td>{m.metric}</td><td>{show(m.metric, m.a)}</td><td>{show(m.metric, m.b)}</td>
                    <td>{m.a ? `${(m.b / m.a).toFixed(3)}x` : "-"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div>
            <Chart option={chart} style={{ height: 360 }} testId="compare-chart" />
            <table className="grid small" data-testid="compare-ops">
              <thead><tr><th>operation</th><th>A</th><th>B</th><th>B - A</th></tr></thead>
              <tbody>
                {data.ops.map((o) => (
                  <tr key={o.name}><td>{o.name}</td><td>{time(o.a_time_ns)}</td><td>{time(o.b_time_ns)}</td><td>{time(o.delta_ns)}</td></tr>
                ))}
              </tbody>
            </table>
          </div>
        </div>
      )}
    </section>
  );
}
