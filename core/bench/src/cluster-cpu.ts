/** CPU use of the cluster benchmark's processes over a measured window, and what it says limited a figure. */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { readCpuSeconds as cpu } from './proc-stats';
import type { Progress, ScenarioResult } from './scenario';

/** CPU over a measured window, % of one core; null when unreadable or the window was too short to sample. */
export interface CpuUse {
  readonly nodeA: number | null;
  readonly nodeB: number | null;
  readonly nats: number | null;
  /** The whole generator process, every thread. */
  readonly generator: number | null;
  /** Busiest generator event loop, %. */
  readonly generatorLoop: number | null;
  /** Everything else the machine ran meanwhile (other work on a shared machine): /proc/stat busy time minus the above. */
  readonly others: number | null;
}

export interface Pids {
  readonly nodeA: number;
  readonly nodeB: number;
  readonly nats: number;
}

/**
 * CPU of the processes over a run's measured window, marked by the run's progress ticks (once a
 * second): from the first tick in `measure` to the first in `stopping`. The tick lands up to 1 s
 * into the window, so it covers most of it, all of it in steady load.
 */
export class CpuWindow {
  private begin: {
    t: number;
    a: number | null;
    b: number | null;
    n: number | null;
    machine: number | null;
    self: NodeJS.CpuUsage;
  } | null = null;
  private use: CpuUse | null = null;

  constructor(private readonly pids: Pids) {}

  readonly onProgress = (p: Progress): void => {
    if (p.phase === 'measure' && this.begin === null)
      this.begin = {
        t: performance.now(),
        a: cpu(this.pids.nodeA),
        b: cpu(this.pids.nodeB),
        n: cpu(this.pids.nats),
        machine: machineBusySeconds(),
        self: process.cpuUsage(),
      };
    else if (p.phase === 'stopping' && this.use === null) this.end();
  };

  /** Closes the window (if no `stopping` tick did) when the run it follows has ended. */
  close(): void {
    if (this.use === null) this.end();
  }

  /**
   * The reading, with the exact figures of the runs where they have them: the CPU of each run's
   * target (its `pid`) and of the generator, over that run's own measured window.
   */
  result(runs: readonly { result: ScenarioResult; pid: number }[]): CpuUse {
    this.close();
    const exact = (pid: number): number | null => {
      const m = runs.find((r) => r.pid === pid)?.result.metrics.brokerCpu;
      return m === undefined ? null : m.value;
    };
    const loops = runs.flatMap((r) => r.result.generator?.eventLoopPercent ?? []);
    const generator = runs.find((r) => r.result.generator !== undefined)?.result.generator?.cpuPercent;
    const use = this.use!;
    return {
      nodeA: exact(this.pids.nodeA) ?? use.nodeA,
      nodeB: exact(this.pids.nodeB) ?? use.nodeB,
      nats: use.nats,
      generator: generator ?? use.generator,
      generatorLoop: loops.length === 0 ? null : Math.max(...loops),
      others: use.others,
    };
  }

  private end(): void {
    const b = this.begin;
    if (b === null) {
      this.use = { nodeA: null, nodeB: null, nats: null, generator: null, generatorLoop: null, others: null };
      return;
    }
    const s = (performance.now() - b.t) / 1000;
    const pct = (before: number | null, now: number | null): number | null =>
      before === null || now === null || s <= 0 ? null : ((now - before) / s) * 100;
    const self = process.cpuUsage(b.self);
    const use = {
      nodeA: pct(b.a, cpu(this.pids.nodeA)),
      nodeB: pct(b.b, cpu(this.pids.nodeB)),
      nats: pct(b.n, cpu(this.pids.nats)),
      generator: s > 0 ? ((self.user + self.system) / 1e6 / s) * 100 : null,
      generatorLoop: null,
    };
    const machine = pct(b.machine, machineBusySeconds());
    this.use = { ...use, others: machine === null ? null : othersOf(machine, use) };
  }
}

/** Busy CPU seconds of the whole machine since boot (every core: /proc/stat minus idle and iowait), or null off Linux. */
function machineBusySeconds(): number | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    if (fields.length < 8 || fields.some((f) => !Number.isFinite(f))) return null;
    const [user, nice, system, _idle, _iowait, irq, softirq, steal] = fields as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/** USER_HZ, as proc-stats.ts reads it. */
const CLOCK_TICKS = 100;

function othersOf(machine: number, use: Omit<CpuUse, 'others'>): number {
  const ours = (use.nodeA ?? 0) + (use.nodeB ?? 0) + (use.nats ?? 0) + (use.generator ?? 0);
  return Math.max(0, machine - ours);
}

/** Share of a core above which a process is what limits a saturated figure. */
const SATURATED = 90;

/** What limited a run, read from its CPU: a saturated process, the machine's cores, or neither. */
export function limitOf(use: CpuUse, cores: number, otherwise: string): string {
  const parts: [string, number | null][] = [
    ['node A', use.nodeA],
    ['node B', use.nodeB],
    ['nats-server', use.nats],
    ['generator', use.generator],
    ['other work', use.others],
  ];
  const known = parts.filter((p): p is [string, number] => p[1] !== null && p[1] >= 1);
  const total = known.reduce((n, p) => n + p[1], 0);
  const busy = known.filter(([name, v]) => v >= SATURATED && name !== 'generator' && name !== 'other work');
  const out: string[] = busy.map(([name, v]) => `${name} at ${Math.round(v)} % of a core`);
  if (use.generatorLoop !== null && use.generatorLoop >= SATURATED)
    out.push(`a generator event loop at ${Math.round(use.generatorLoop)} %`);
  if (known.length > 0 && total >= cores * SATURATED)
    out.push(`all ${cores} cores busy (${Math.round(total)} % in total: ${known.map(([n, v]) => `${n} ${Math.round(v)}`).join(', ')})`);
  return out.length > 0 ? out.join('; ') : otherwise;
}
