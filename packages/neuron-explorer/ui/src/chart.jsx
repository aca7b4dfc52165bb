// A React wrapper around an ECharts instance (canvas renderer, only the components we use).
import { useEffect, useRef } from "react";
import * as echarts from "echarts/core";
import { BarChart, CustomChart, GraphChart, LineChart } from "echarts/charts";
import { DataZoomComponent, GridComponent, LegendComponent, TooltipComponent, TitleComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([BarChart, CustomChart, GraphChart, LineChart, DataZoomComponent, GridComponent, LegendComponent,
  TooltipComponent, TitleComponent, CanvasRenderer]);

export function Chart({ option, onEvents = {}, style, onReady, notMerge = false, testId }) {
  const ref = useRef(null);
  const chart = useRef(null);
  const handlers = useRef(onEvents);
  handlers.current = onEvents;

  useEffect(() => {
    const instance = echarts.init(ref.current, null, { renderer: "canvas" });
    chart.current = instance;
    const names = ["click", "datazoom", "finished"];
    for (const name of names) instance.on(name, (e) => handlers.current[name] && handlers.current[name](e, instance));
    const observer = new ResizeObserver(() => instance.resize());
    observer.observe(ref.current);
    if (onReady) onReady(instance);
    return () => {
      observer.disconnect();
      instance.dispose();
    };
  }, []);

  useEffect(() => {
    if (chart.current && option) chart.current.setOption(option, { notMerge, lazyUpdate: false });
  }, [option, notMerge]);

  return <div ref={ref} className="chart" data-testid={testId} style={style} />;
}
