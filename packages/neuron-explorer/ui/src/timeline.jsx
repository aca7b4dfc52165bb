// A zoomable timeline of tracks, drawn with an ECharts custom series. The server answers each
// window with the rows themselves when they are few enough to draw, else with each track's busy
// fraction per pixel bin, so any profile size paints quickly; zooming (wheel, drag, slider) asks
// for the new window.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import * as echarts from "echarts/core";
import { Chart } from "./chart.jsx";
import { time } from "./format.js";

const BINS = 800;
const MARK = "#ff8c00";

function renderItem(params, api) {
  const track = api.value(0);
  const start = api.coord([api.value(1), track]);
  const end = api.coord([api.value(2), track]);
  const height = api.size([0, 1])[1] * 0.72;
  const shape = echarts.graphic.clipRectByRect(
    { x: start[0], y: start[1] - height / 2, width: Math.max(end[0] - start[0], 1), height },
    { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height },
  );
  if (!shape) return null;
  const kind = api.value(3);
  const marked = api.value(5) === 1;
  const style = {
    fill: marked ? MARK : api.visual("color"),
    opacity: kind === 1 ? 0.2 + 0.8 * api.value(4) : 0.95,
    stroke: marked ? "#a35200" : null,
  };
  return { type: "rect", transition: [], shape, style };
}

export function Timeline({ tracks, range, fetchWindow, colorOf, labelOf, onSelect, zoomTo, onPainted, title, hbm, testId }) {
  const [windowRange, setWindowRange] = useState(zoomTo || range);
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const timer = useRef(null);
  const request = useRef(0);
  const painted = useRef(false);

  useEffect(() => {
    if (zoomTo) setWindowRange(zoomTo);
  }, [zoomTo && zoomTo[0], zoomTo && zoomTo[1]]);

  useEffect(() => {
    const id = ++request.current;
    fetchWindow(windowRange[0], windowRange[1], BINS)
      .then((w) => id === request.current && (setData(w), setError(null)))
      .catch((e) => setError(e.message));
  }, [windowRange[0], windowRange[1], fetchWindow]);

  const items = useMemo(() => {
    if (!data) return [];
    const out = [];
    for (const entry of data.tracks) {
      const t = entry.track;
      if (entry.rows) {
        for (const r of entry.rows) out.push({ value: [t, r[1], r[2], 0, 0, r[4] ? 1 : 0, r[0], r[3]], itemStyle: { color: colorOf(t, r) } });
      } else if (entry.busy) {
        const width = (data.end - data.start) / data.bins;
        const marked = new Set(entry.marked_bins || []);
        entry.busy.forEach((b, i) => {
          if (b > 0 || marked.has(i)) {
            const s = data.start + i * width;
            out.push({ value: [t, s, s + width, 1, b, marked.has(i) ? 1 : 0, -1, -1], itemStyle: { color: colorOf(t, null) } });
          }
        });
      }
    }
    return out;
  }, [data, colorOf]);

  const option = useMemo(() => {
    const showHbm = hbm && data && data.hbm && data.hbm.length > 0;
    const width = data ? (data.end - data.start) / data.bins : 1;
    const grids = showHbm
      ? [{ left: 170, right: 30, top: 10, height: 60 }, { left: 170, right: 30, top: 95, bottom: 60 }]
      : [{ left: 170, right: 30, top: 10, bottom: 60 }];
    const main = grids.length - 1;
    const xAxes = grids.map((_, i) => ({
      type: "value", gridIndex: i, min: range[0], max: range[1], scale: true,
      axisLabel: { show: i === main, formatter: (v) => time(v - range[0]) },
      splitLine: { show: i === main },
    }));
    const series = [{
      type: "custom", name: title, renderItem, xAxisIndex: main, yAxisIndex: showHbm ? 2 : 0, data: items,
      encode: { x: [1, 2], y: 0 }, progressive: 0, animation: false,
    }];
    const yAxes = [];
    if (showHbm) {
      yAxes.push({ type: "value", gridIndex: 0, name: "HBM GB/s", nameTextStyle: { fontSize: 10 }, splitNumber: 2 });
      yAxes.push({ type: "value", gridIndex: 0, name: "on-chip %", nameTextStyle: { fontSize: 10 }, splitNumber: 2, max: 100,
        position: "right" });
      const line = (name, values, axis, extra = {}) => ({
        type: "line", name, xAxisIndex: 0, yAxisIndex: axis, step: "start", symbol: "none", animation: false,
        data: (values || []).map((v, i) => [data.start + i * width, v]), ...extra,
      });
      series.push(line("HBM GB/s", data.hbm, 0, { areaStyle: { opacity: 0.3 } }));
      series.push(line("SBUF % full", data.sbuf, 1));
      series.push(line("PSUM % full", data.psum, 1));
    }
    yAxes.push({ type: "category", gridIndex: main, data: tracks, inverse: true, axisLabel: { fontSize: 11, width: 160, overflow: "truncate" } });
    const legend = showHbm ? { data: ["HBM GB/s", "SBUF % full", "PSUM % full"], top: 0, right: 40, textStyle: { fontSize: 10 } } : undefined;
    return {
      animation: false,
      grid: grids,
      legend,
      xAxis: xAxes,
      yAxis: yAxes,
      dataZoom: [
        { type: "inside", xAxisIndex: grids.map((_, i) => i), filterMode: "weakFilter", startValue: windowRange[0], endValue: windowRange[1] },
        { type: "slider", xAxisIndex: grids.map((_, i) => i), filterMode: "weakFilter", startValue: windowRange[0], endValue: windowRange[1],
          labelFormatter: (v) => time(v - range[0]), height: 20, bottom: 15 },
      ],
      tooltip: {
        trigger: "item",
        formatter: (p) => {
          if (p.seriesType !== "custom") return `${p.seriesName} at ${time(p.value[0] - range[0])}: ${p.value[1]}`;
          const v = p.value;
          if (v[3] === 1) return `${tracks[v[0]]}<br/>busy ${(v[4] * 100).toFixed(0)}% of ${time(v[2] - v[1])}`;
          return `${labelOf(v[7], v)}<br/>${tracks[v[0]]}<br/>${time(v[1] - range[0])} + ${time(v[2] - v[1])}`;
        },
      },
      series,
    };
  }, [items, tracks, range, windowRange, hbm, data, labelOf, title]);

  const onEvents = useMemo(() => ({
    click: (e) => {
      if (e.seriesType === "custom" && e.value[3] === 0 && onSelect) onSelect(e.value[6], e.value);
    },
    datazoom: (_e, chart) => {
      const dz = chart.getOption().dataZoom[0];
      clearTimeout(timer.current);
      timer.current = setTimeout(() => setWindowRange([dz.startValue, dz.endValue]), 150);
    },
    finished: () => {
      if (data && !painted.current) {
        painted.current = true;
        if (onPainted) onPainted();
      }
    },
  }), [onSelect, data, onPainted]);

  const resetZoom = useCallback(() => setWindowRange(range), [range]);
  const height = Math.max(260, tracks.length * 26 + (hbm ? 180 : 90));
  return (
    <div className="timeline" data-testid={testId}>
      <div className="toolbar">
        <span>{title}</span>
        <span className="muted">
          window {time(windowRange[0] - range[0])} - {time(windowRange[1] - range[0])}
          {data ? (data.detail ? " - every row drawn" : " - busy fraction per pixel (zoom in for rows)") : " - loading"}
        </span>
        <button onClick={resetZoom}>reset zoom</button>
      </div>
      {error && <div className="error">{error}</div>}
      <Chart option={option} onEvents={onEvents} style={{ height }} testId={testId && `${testId}-chart`} />
      {data && data.detail && (
        <span className="muted" data-testid={testId && `${testId}-rows`}>{items.length} rows in view</span>
      )}
    </div>
  );
}
