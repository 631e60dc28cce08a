/** The comparison table: one row per headline metric, one column per broker, then ratios. */
import type { BrokerName } from './broker-process';
import type { Metric, ScenarioResult } from './scenario';

/** The outcome of one scenario against one broker. */
export interface Cell {
  readonly scenario: string;
  readonly broker: BrokerName;
  readonly result?: ScenarioResult;
  readonly error?: string;
}

const ERROR_WIDTH = 30;

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  const abs = Math.abs(value);
  if (abs >= 100) return Math.round(value).toLocaleString('en-US');
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

function errorText(error: string, full: boolean): string {
  const text = `error: ${error}`;
  return full || text.length <= ERROR_WIDTH ? text : `${text.slice(0, ERROR_WIDTH - 1)}…`;
}

function ratio(a: Metric | undefined, b: Metric | undefined): string {
  if (a === undefined || b === undefined || b.value === 0 || !Number.isFinite(a.value) || !Number.isFinite(b.value)) return '—';
  return `${(a.value / b.value).toFixed(2)}×`;
}

export interface Row {
  readonly cells: readonly string[];
}

/**
 * Columns separated by two spaces under a header and a rule. `right[i]` right-aligns column i
 * (default: the first two columns left, the others right).
 */
export function renderTable(header: readonly string[], rows: readonly Row[], right?: readonly boolean[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r.cells[i] ?? '').length)));
  const isRight = (i: number): boolean => right?.[i] ?? i >= 2;
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (isRight(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map((r) => line(r.cells))].join('\n');
}

/**
 * Renders the comparison: metric rows (with "higher/lower is better"), one column per broker,
 * and Bifro/aedes, Bifro/mosquitto ratios when those brokers ran. Failed cells say why.
 */
export function renderComparison(scenarios: readonly string[], brokers: readonly BrokerName[], cells: readonly Cell[]): string {
  const find = (scenario: string, broker: BrokerName): Cell | undefined =>
    cells.find((c) => c.scenario === scenario && c.broker === broker);
  const ratioCols = (['aedes', 'mosquitto'] as const).filter((b) => brokers.includes('bifro') && brokers.includes(b));
  const header = ['metric', 'unit', ...brokers, ...ratioCols.map((b) => `bifro/${b}`)];
  const rows: Row[] = [];
  for (const scenario of scenarios) {
    const keys: string[] = [];
    for (const b of brokers) for (const k of find(scenario, b)?.result?.headline ?? []) if (!keys.includes(k)) keys.push(k);
    if (keys.length === 0) keys.push('');
    for (const key of keys) {
      const metricOf = (b: BrokerName): Metric | undefined => (key === '' ? undefined : find(scenario, b)?.result?.metrics[key]);
      const sample = brokers.map(metricOf).find((m) => m !== undefined);
      const label = sample === undefined ? scenario : sample.label;
      const unit = sample === undefined ? '' : `${sample.unit} (${sample.better === 'higher' ? '↑' : '↓'})`;
      const values = brokers.map((b) => {
        const cell = find(scenario, b);
        if (cell === undefined) return '—';
        if (cell.error !== undefined) return errorText(cell.error, false);
        const m = metricOf(b);
        return m === undefined ? '—' : formatValue(m.value);
      });
      const ratios = ratioCols.map((b) => ratio(metricOf('bifro'), metricOf(b)));
      rows.push({ cells: [label, unit, ...values, ...ratios] });
    }
  }
  return renderTable(header, rows);
}

/**
 * CPU use during each measured window: broker and generator (whole process) as % of one core,
 * and the busiest generator event loop (worker thread) in %.
 */
export function renderCpu(scenarios: readonly string[], brokers: readonly BrokerName[], cells: readonly Cell[]): string {
  const rows: Row[] = [];
  for (const scenario of scenarios) {
    const values = brokers.map((b) => {
      const m = cells.find((c) => c.scenario === scenario && c.broker === b)?.result?.metrics;
      if (m === undefined || m.generatorCpu === undefined) return '—';
      const broker = m.brokerCpu === undefined ? '?' : `${Math.round(m.brokerCpu.value)}%`;
      const busy = m.generatorBusy === undefined ? '' : ` (${Math.round(m.generatorBusy.value)}%)`;
      return `${broker} / ${Math.round(m.generatorCpu.value)}%${busy}`;
    });
    if (values.some((v) => v !== '—')) rows.push({ cells: [scenario, '', ...values] });
  }
  if (rows.length === 0) return '';
  return renderTable(['CPU broker / generator (busiest worker loop)', '', ...brokers], rows);
}

/** Full error messages and notes, one line each. */
export function renderNotes(cells: readonly Cell[]): string {
  const lines: string[] = [];
  for (const c of cells) {
    if (c.error !== undefined) lines.push(`${c.scenario} × ${c.broker}: ${errorText(c.error, true)}`);
    for (const n of c.result?.notes ?? []) lines.push(`${c.scenario} × ${c.broker}: ${n}`);
  }
  return lines.join('\n');
}
