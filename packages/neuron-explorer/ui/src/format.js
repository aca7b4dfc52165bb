export function time(ns) {
  if (ns === null || ns === undefined || Number.isNaN(ns)) return "-";
  const a = Math.abs(ns);
  if (a >= 1e9) return `${(ns / 1e9).toFixed(3)} s`;
  if (a >= 1e6) return `${(ns / 1e6).toFixed(3)} ms`;
  if (a >= 1e3) return `${(ns / 1e3).toFixed(3)} us`;
  return `${Math.round(ns)} ns`;
}

export function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return `${u ? v.toFixed(2) : v} ${units[u]}`;
}

export function pct(x) {
  return x === null || x === undefined ? "-" : `${x.toFixed(2)}%`;
}

export function count(n) {
  return n === null || n === undefined ? "-" : n.toLocaleString("en-US");
}

// One color per engine; opcodes get shades of their engine's color.
const ENGINE_COLORS = {
  tensor: "#d9534f", vector: "#5b8def", scalar: "#3fae6a", gpsimd: "#b36ae2", sync: "#e0a030", dma: "#7a8791",
};
export function engineColor(engine) {
  return ENGINE_COLORS[engine] || "#999";
}
const PALETTE = ["#5b8def", "#d9534f", "#3fae6a", "#e0a030", "#b36ae2", "#2bb3c0", "#e36fa8", "#8c6d31", "#7a8791", "#4c9a2a"];
export function paletteColor(i) {
  return PALETTE[i % PALETTE.length];
}
