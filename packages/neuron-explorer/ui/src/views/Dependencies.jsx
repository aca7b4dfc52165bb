import { useEffect, useMemo, useState } from "react";
import { api } from "../api.js";
import { Chart } from "../chart.jsx";
import { time } from "../format.js";

function label(row, key) {
  if (!row) return key;
  if (row.opcode) return `${row.opcode} #${row.id} (${row.timeline_track})`;
  if (row.queue_name) return `DMA ${row.source} -> ${row.dest}`;
  return `${row.name} ${row.event_type || ""}`;
}

export function Dependencies({ pid, nav, selection }) {
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [input, setInput] = useState(selection && selection.table === "Instruction" ? String(selection.id) : "");
  const target = selection || null;

  useEffect(() => {
    if (!target) return;
    setError(null);
    const path = target.table === "launch" ? `p/${pid}/deps/launch/${target.id}` : `p/${pid}/deps/${target.table}/${target.id}`;
    api(path, { depth: 4 }).then(setData).catch((e) => setError(e.message));
  }, [pid, target && target.table, target && target.id]);

  const graph = useMemo(() => {
    if (!data || !data.rows) return null;
    const rootKey = `${data.root.table}:${data.root.id}`;
    const nodes = new Map([[rootKey, { name: rootKey, value: label(data.rows[rootKey], rootKey), x: 0, y: 0 }]]);
    const links = [];
    const place = (edges, dir) => {
      const perLevel = {};
      for (const e of edges) {
        const key = `${e.table}:${e.id}`;
        const from = `${e.from_table}:${e.from_id}`;
        if (!nodes.has(key)) {
          const k = (perLevel[e.level] = (perLevel[e.level] || 0) + 1);
          nodes.set(key, { name: key, value: label(data.rows[key], key), x: dir * e.level * 200, y: k * 50 });
        }
        links.push(dir < 0 ? { source: key, target: from, value: e.type } : { source: from, target: key, value: e.type });
      }
    };
    place(data.upstream, -1);
    place(data.downstream, 1);
    return {
      animation: false,
      tooltip: { formatter: (p) => (p.dataType === "edge" ? p.data.value : p.data.value) },
      series: [{
        type: "graph", layout: "none", roam: true, symbolSize: 14, edgeSymbol: ["none", "arrow"],
        label: { show: true, position: "right", formatter: (p) => p.data.value, fontSize: 10 },
        data: [...nodes.values()].map((n) => ({ ...n, itemStyle: { color: n.name === rootKey ? "#ff8c00" : "#5b8def" } })),
        links,
      }],
    };
  }, [data]);

  const table = (title, edges) => (
    <>
      <h3>{title}</h3>
      <table className="grid small" data-testid={`deps-${title.split(" ")[0].toLowerCase()}`}>
        <thead><tr><th>level</th><th>row</th><th>dependency</th><th>gap</th></tr></thead>
        <tbody>
          {edges.map((e, i) => {
            const key = `${e.table}:${e.id}`;
            return (
              <tr key={i}>
                <td>{e.level}</td><td>{label(data.rows[key], key)}</td><td>{e.type}</td><td>{time(e.gap_ns)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {!edges.length && <p className="muted">none</p>}
    </>
  );

  return (
    <section data-testid="dependencies-view">
      <form onSubmit={(e) => { e.preventDefault(); if (input) nav.select("Instruction", Number(input)); }}>
        Instruction id <input value={input} onChange={(e) => setInput(e.target.value)} data-testid="deps-input" />
        <button type="submit">show</button>
        <span className="muted"> (or pick an instruction in the device trace, or an execution in the system trace)</span>
      </form>
      {error && <div className="error">{error}</div>}
      {!target && <p className="muted">Nothing selected.</p>}
      {data && data.rows && (
        <>
          <Chart option={graph} style={{ height: 320 }} testId="deps-graph" />
          {table("Upstream (what it waited for)", data.upstream)}
          {table("Downstream (what waited for it)", data.downstream)}
        </>
      )}
      {data && data.execution && (
        <div data-testid="launch-deps">
          <h3>Execution {data.execution.name} (launch {data.execution.launch_id})</h3>
          <p>issued by: {data.issued_by.map((e) => `${e.event_type} on thread ${e.thread_id}`).join(", ") || "-"}</p>
          <h4>Before it on queue {data.execution.queue}</h4>
          <ul>{data.upstream.map((r) => <li key={r.launch_id}>{r.name} (launch {r.launch_id}) ends {time(data.execution.execution_start_ts - r.execution_end_ts)} before</li>)}</ul>
          <h4>After it</h4>
          <ul>{data.downstream.map((r) => <li key={r.launch_id}>{r.name} (launch {r.launch_id})</li>)}</ul>
        </div>
      )}
    </section>
  );
}
