import { StrictMode, useCallback, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { api } from "./api.js";
import { Profiles } from "./views/Profiles.jsx";
import { Summary } from "./views/Summary.jsx";
import { DeviceTrace } from "./views/DeviceTrace.jsx";
import { SystemTrace } from "./views/SystemTrace.jsx";
import { Hierarchy } from "./views/Hierarchy.jsx";
import { Dependencies } from "./views/Dependencies.jsx";
import { Source } from "./views/Source.jsx";
import { Compare } from "./views/Compare.jsx";
import "./style.css";

const VIEWS = [
  ["summary", "Summary"], ["device", "Device trace"], ["system", "System trace"], ["hierarchy", "Hierarchy"],
  ["dependencies", "Dependencies"], ["source", "Source"], ["compare", "Compare"],
];

function readHash() {
  const [view, query] = window.location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query || "");
  return { view: view || "profiles", pid: params.get("p") || "0" };
}

function App() {
  const [route, setRoute] = useState(readHash());
  const [profiles, setProfiles] = useState(null);
  const [error, setError] = useState(null);
  // Shared between views: the selected row, what to highlight, where the device trace should zoom.
  const [selection, setSelection] = useState(null); // {table: "Instruction"|"launch", id}
  const [highlight, setHighlight] = useState(null); // "node:3", "lines:1:10-12", "opcode:MATMUL"
  const [zoom, setZoom] = useState(null); // [start, end]
  const [sourceTarget, setSourceTarget] = useState(null); // {file_id, line}

  useEffect(() => {
    const onHash = () => setRoute(readHash());
    window.addEventListener("hashchange", onHash);
    api("profiles").then(setProfiles).catch((e) => setError(e.message));
    return () => window.removeEventListener("hashchange", onHash);
  }, []);

  const go = useCallback((view, pid = route.pid) => {
    window.location.hash = `#/${view}?p=${pid}`;
  }, [route.pid]);

  const nav = {
    go,
    select: (table, id) => setSelection({ table, id }),
    showDependencies: (table, id) => { setSelection({ table, id }); go("dependencies"); },
    showInDevice: (range, spec) => { setZoom(range); if (spec !== undefined) setHighlight(spec); go("device"); },
    showSource: (loc) => { setSourceTarget(loc); go("source"); },
    setHighlight,
  };

  if (error) return <div className="error page">Cannot reach the neuron-explorer server: {error}</div>;
  if (!profiles) return <div className="page muted">loading profiles...</div>;
  const current = profiles.find((p) => p.id === route.pid) || profiles[0];
  const view = route.view;
  return (
    <div className="app">
      <header>
        <a className="brand" href="#/profiles">Neuron Explorer</a>
        <span className="profile-name" data-testid="profile-name">{current.name}</span>
        <nav>
          {VIEWS.map(([key, label]) => (
            <a key={key} href={`#/${key}?p=${current.id}`} className={view === key ? "active" : ""} data-testid={`nav-${key}`}>
              {label}
            </a>
          ))}
        </nav>
      </header>
      <main>
        {view === "profiles" && <Profiles profiles={profiles} go={go} />}
        {view === "summary" && <Summary pid={current.id} nav={nav} />}
        {view === "device" && (
          <DeviceTrace pid={current.id} nav={nav} highlight={highlight} zoom={zoom} selection={selection} />
        )}
        {view === "system" && <SystemTrace pid={current.id} nav={nav} />}
        {view === "hierarchy" && <Hierarchy pid={current.id} nav={nav} />}
        {view === "dependencies" && <Dependencies pid={current.id} nav={nav} selection={selection} />}
        {view === "source" && <Source pid={current.id} nav={nav} target={sourceTarget} />}
        {view === "compare" && <Compare profiles={profiles} pid={current.id} />}
      </main>
    </div>
  );
}

createRoot(document.getElementById("root")).render(<StrictMode><App /></StrictMode>);
