import { useEffect, useRef, useState } from "react";
import { api } from "../api.js";
import { count, time } from "../format.js";

export function Source({ pid, nav, target }) {
  const [files, setFiles] = useState(null);
  const [file, setFile] = useState(null);
  const [fileId, setFileId] = useState(target ? target.file_id : null);
  const [selected, setSelected] = useState(target ? [target.line, target.line] : null);
  const [error, setError] = useState(null);
  const lineRefs = useRef({});

  useEffect(() => {
    api(`p/${pid}/sources`).then((f) => {
      setFiles(f);
      if (fileId === null && f.length) setFileId(f.sort((a, b) => b.instructions - a.instructions)[0].id);
    }).catch((e) => setError(e.message));
  }, [pid]);
  useEffect(() => {
    if (fileId !== null) api(`p/${pid}/source/${fileId}`).then(setFile).catch((e) => setError(e.message));
  }, [pid, fileId]);
  useEffect(() => {
    if (file && selected && lineRefs.current[selected[0]]) lineRefs.current[selected[0]].scrollIntoView({ block: "center" });
  }, [file]);

  const clickLine = (n, e) => {
    if (e.shiftKey && selected) setSelected([Math.min(selected[0], n), Math.max(selected[1], n)]);
    else setSelected([n, n]);
  };
  const highlight = () => nav.showInDevice(null, `lines:${fileId}:${selected[0]}-${selected[1]}`);

  if (error) return <div className="error">{error}</div>;
  if (!files) return <div className="muted">loading...</div>;
  if (!files.length) return <p className="muted">No source locations in this profile.</p>;
  const chosen = selected ? Object.entries(file ? file.lines : {}).filter(([l]) => +l >= selected[0] && +l <= selected[1])
    .reduce((a, [, v]) => a + v.count, 0) : 0;
  return (
    <section className="source-view" data-testid="source-view">
      <aside>
        <h3>Files</h3>
        <ul>
          {files.map((f) => (
            <li key={f.id} className={f.id === fileId ? "active" : ""}>
              <a href="#" onClick={(e) => { e.preventDefault(); setFileId(f.id); setSelected(null); }}>{f.name.split("/").pop()}</a>
              <span className="muted"> {count(f.instructions)}</span>
            </li>
          ))}
        </ul>
      </aside>
      <div className="code-pane">
        {file && (
          <>
            <div className="toolbar">
              <span title={file.name}>{file.name}</span>
              {selected && (
                <button data-testid="highlight-lines" onClick={highlight} disabled={!chosen}>
                  highlight {count(chosen)} instructions of lines {selected[0]}-{selected[1]}
                </button>
              )}
            </div>
            {file.text === null ? (
              <div className="error" data-testid="source-missing">{file.problem}</div>
            ) : (
              <pre className="code" data-testid="source-code">
                {file.text.split("\n").map((text, i) => {
                  const n = i + 1;
                  const stats = file.lines[n];
                  const isSel = selected && n >= selected[0] && n <= selected[1];
                  return (
                    <div key={n} ref={(el) => (lineRefs.current[n] = el)} className={`line${isSel ? " selected" : ""}${stats ? " hot" : ""}`}
                      onClick={(e) => clickLine(n, e)} data-line={n}>
                      <span className="ln">{n}</span>
                      <span className="deco">{stats ? `${count(stats.count)} inst, ${time(stats.time_ns)}` : ""}</span>
                      <span className="text">{text || " "}</span>
                    </div>
                  );
                })}
              </pre>
            )}
          </>
        )}
      </div>
    </section>
  );
}
