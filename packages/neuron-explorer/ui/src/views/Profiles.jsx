import { count, pct, time } from "../format.js";

export function Profiles({ profiles, go }) {
  return (
    <section>
      <h2>Profiles</h2>
      <table className="grid" data-testid="profiles-table">
        <thead><tr><th>name</th><th>device time</th><th>instructions</th><th>executions</th><th>MFU</th><th>session</th></tr></thead>
        <tbody>
          {profiles.map((p) => (
            <tr key={p.id}>
              <td><a href={`#/summary?p=${p.id}`} onClick={() => go("summary", p.id)}>{p.name}</a></td>
              <td>{time(p.device_time_ns)}</td><td>{count(p.instruction_count)}</td><td>{count(p.executions)}</td>
              <td>{pct(p.mfu)}</td><td className="muted">{p.session_dir}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {profiles.length > 1 && <p><a href={`#/compare?p=0`}>Compare two profiles side by side</a></p>}
    </section>
  );
}
