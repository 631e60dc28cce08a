// @ts-check
import uPlot from './vendor/uPlot.esm.js';
import { h, num } from './dom.js';

/** How much a plot shows: the 15 minutes the broker keeps. */
const WINDOW_S = 15 * 60;

/**
 * The two plots the overview and a tenant's page share. With one subscriber per message, in and out
 * are equal: "out" is dashed, so the "in" line under it still shows.
 */
export const MESSAGES_PLOT = {
  title: 'Messages per second',
  series: [
    { label: 'in', color: '--series-1' },
    { label: 'out', color: '--series-2', dash: [8, 6] },
  ],
};
export const CONNECTIONS_PLOT = { title: 'Connections', whole: true, series: [{ label: 'connections', color: '--series-3' }] };

/**
 * The steps between a value axis' ticks: 1, 2 and 5 times a power of ten (uPlot's own also has
 * 2.5, which made ticks such as 2.5 and 7.5). A plot of whole numbers (connections) steps by 1 at
 * least: no tick at 0.25 of a connection.
 */
const STEPS = [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9].flatMap((e) => [1, 2, 5].map((m) => Number(`${m}e${e}`)));
const WHOLE_STEPS = STEPS.filter((step) => step >= 1);

/**
 * Tick labels with as many decimals as the step between ticks has, so that each label is its
 * tick's value (0.25 and 0.75 were shown rounded, as 0.3 and 0.8).
 * @param {number[]} ticks
 * @param {number} step
 */
export function tickLabels(ticks, step) {
  const decimals = step >= 1 ? 0 : Math.ceil(-Math.log10(step) - 1e-9);
  const format = new Intl.NumberFormat(undefined, { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  return ticks.map((v) => format.format(v));
}

/** @param {string} name a CSS custom property of :root */
function css(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/**
 * A live line plot over the last 15 minutes, in a captioned figure. The caption shows the latest
 * values as text (for screen readers, and for anyone who wants the number, not the line); the
 * figure's `data-y-ticks` holds the value axis' labels as drawn.
 * @param {{ title: string, unit?: string, whole?: boolean, series: { label: string, color: string, dash?: number[] }[] }} spec
 */
export function liveChart(spec) {
  const now = h('span', { class: 'now', 'aria-live': 'off' }, '—');
  const box = h('div', { class: 'chart' });
  const figure = h('figure', { class: 'panel', 'data-points': '0' }, h('figcaption', {}, h('span', {}, spec.title), now), box);
  figure.setAttribute('aria-label', spec.title);
  /** @type {number[][]} */
  const data = [[], ...spec.series.map(() => [])];
  const text = css('--text');
  const grid = css('--line');
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  /** @type {uPlot.Options} */
  const options = {
    width: 400,
    height: 200,
    // At least the last minute, growing to the 15 minutes kept.
    scales: {
      x: { time: true, range: (_u, min, max) => [Math.min(min, max - 60), max] },
      y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] },
    },
    series: [
      {},
      ...spec.series.map((s) => ({
        label: s.label,
        stroke: css(s.color),
        width: 2,
        ...(s.dash ? { dash: s.dash } : {}),
        value: (/** @type {uPlot} */ _u, /** @type {number | null} */ v) => (v === null ? '—' : `${num(v)}${spec.unit ?? ''}`),
      })),
    ],
    axes: [
      { ...axis },
      {
        ...axis,
        size: 60,
        incrs: spec.whole ? WHOLE_STEPS : STEPS,
        values: (_u, ticks, _axis, _space, step) => {
          const labels = tickLabels(ticks, step);
          figure.dataset.yTicks = JSON.stringify(labels);
          return labels;
        },
      },
    ],
    // The caption holds the latest values; the legend only names the lines (a dashed line, dashed).
    legend: {
      show: true,
      live: false,
      markers: { dash: (_u, i) => (spec.series[i - 1]?.dash ? 'dashed' : 'solid') },
    },
    cursor: { drag: { x: false, y: false } },
  };
  const plot = new uPlot(options, /** @type {uPlot.AlignedData} */ (data), box);
  const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(200, box.clientWidth), height: 200 }));
  resize.observe(box);

  return {
    element: figure,
    /**
     * Adds points (t in ms, one array per series), drops those older than 15 minutes.
     * @param {number[]} t
     * @param {number[][]} values
     */
    add(t, values) {
      if (t.length === 0) return;
      data[0].push(...t.map((ms) => ms / 1000));
      values.forEach((v, i) => data[i + 1].push(...v));
      const cutoff = data[0][data[0].length - 1] - WINDOW_S;
      let drop = 0;
      while (drop < data[0].length && data[0][drop] < cutoff) drop++;
      if (drop > 0) for (const d of data) d.splice(0, drop);
      plot.setData(/** @type {uPlot.AlignedData} */ (data));
      const last = data[0].length - 1;
      now.textContent = spec.series.map((s, i) => `${s.label} ${num(data[i + 1][last])}${spec.unit ?? ''}`).join(' · ');
      figure.dataset.points = String(data[0].length);
      figure.dataset.last = JSON.stringify(spec.series.map((_, i) => data[i + 1][last]));
    },
    destroy() {
      resize.disconnect();
      plot.destroy();
    },
  };
}

/**
 * Polls a history route (`/api/v1/history`, `/api/v1/tenants/{t}/history`) every 2 s, asking only
 * for the points after the last one it has, and hands them to `each`.
 * @param {(since: number) => Promise<{ t: number[], series: Record<string, number[]> }>} fetchPoints
 * @param {(t: number[], series: Record<string, number[]>) => void} each
 * @param {(err: unknown) => void} onError
 */
export function pollHistory(fetchPoints, each, onError) {
  let since = 0;
  let stopped = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const tick = async () => {
    // A hidden tab asks nothing; the next visible poll gets what it missed (`since`).
    if (document.hidden) {
      timer = setTimeout(tick, 2000);
      return;
    }
    try {
      const p = await fetchPoints(since);
      if (stopped) return;
      if (p.t.length > 0) {
        since = p.t[p.t.length - 1];
        each(p.t, p.series);
      }
    } catch (err) {
      if (!stopped) onError(err);
    }
    if (!stopped) timer = setTimeout(tick, 2000);
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
