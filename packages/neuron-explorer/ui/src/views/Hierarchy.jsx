import { Fragment, useEffect, useState } from "react";
import { api } from "../api.js";
import { count, pct, time } from "../format.js";

export function Hierarchy({ pid, nav }) {
  const [ops, setOps] = useState(null);
  const [open, setOpen] = useState({});
  const [groups, setGroups] = useState({});
  const [error, setError] = useState(null);
  useEffect(() => { api(`p/${pid}/hierarchy`).then(setOps).catch((e) => setError(e.message)); }, [pid]);

  const toggle = (node) => {
    setOpen((o) => ({ ...o, [node.id]: !o[node.id] }));
    if (node.level === "graph" && !groups[node.id]) {
      api(`p/${pid}/hierarchy/${node.id}/groups`).then((g) => setGroups((all) => ({ ...all, [node.id]: g })));
    }
  };
  const highlight = async (node) => {
    const r = await api(`p/${pid}/hierarchy/${node.id}/range`);
    nav.showInDevice(r.start !== null ? [r.start, r.end] : null, `node:${node.id}`);
  };

  if (error) return <div className="error">{error}</div>;
  if (!ops) return <div className="muted">loading...</div>;
  const row = (n, depth) => (
    <tr key={n.id} className={`level-${n.level}`} data-testid={`node-${n.id}`}>
      <td style={{ paddingLeft: 8 + depth * 18 }}>
        <button className="twisty" onClick={() => toggle(n)}>{open[n.id] ? "-" : "+"}</button> {n.node_name}
        <span className="muted"> ({n.level})</span>
      </td>
      <td>{count(n.launch_count)}</td><td>{time(n.device_time_ns)}</td><td>{pct(n.mfu)}</td><td>{pct(n.hfu)}</td><td>{pct(n.mbu)}</td>
      <td>{count(n.tensor_engine_instruction_count + n.vector_engine_instruction_count + n.scalar_engine_instruction_count +
        n.gpsimd_engine_instruction_count + n.sync_engine_instruction_count)}</td>
      <td><button onClick={() => highlight(n)}>highlight in device trace</button></td>
    </tr>
  );
  return (
    <section data-testid="hierarchy-view">
      <p className="muted">Framework operations, the device programs they launched, and each program's instructions grouped by
        source line and opcode.</p>
      <table className="grid">
        <thead><tr><th>node</th><th>launches</th><th>device time</th><th>MFU</th><th>HFU</th><th>MBU</th><th>engine instructions</th><th></th></tr></thead>
        <tbody>
          {ops.map((op) => (
            <Fragment key={op.id}>
              {row(op, 0)}
              {open[op.id] && op.children.map((g) => (
                <Fragment key={g.id}>
                  {row(g, 1)}
                  {open[g.id] && (groups[g.id] || []).map((grp, i) => (
                    <tr key={`${g.id}-${i}`} className="level-group" data-testid="instruction-group">
                      <td style={{ paddingLeft: 8 + 2 * 18 }}>
                        {grp.engine} {grp.opcode}{" "}
                        {grp.source ? <span className="muted">at {grp.source.split("/").pop()}</span> : null}
                      </td>
                      <td>{count(grp.count)}</td><td>{time(grp.time_ns)}</td><td colSpan={5}></td>
                    </tr>
                  ))}
                </Fragment>
              ))}
            </Fragment>
          ))}
        </tbody>
      </table>
    </section>
  );
}
