import { writeFileSync } from 'node:fs';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import { checkRun, emptyStats, type CheckResult, type CheckStats } from './checker';
import { ClientDriver } from './client-driver';
import { now, sleep, within } from './clock';
import { readCorpus, reproduceCommand, writeCorpusEntry, type CorpusEntry } from './corpus';
import type { NodeAction, NodeEvent, Problem, RunRecord, Schedule, StorageKind } from './model';
import { generateSchedule, summarize, type ClusterGenerateOptions } from './schedule';
import { ClusterTarget } from './cluster-target';
import { SingleNodeTarget, type Target } from './target';

/**
 * Runs schedules against a target and checks them: the setup (connect, subscribe), the fault
 * phase (publishers, client actions and node faults at their times), the settle (faults cleared,
 * publishers stopped, connected clients stay connected until nothing happens for a second), then
 * the drain (every persistent client reconnected, until every required message arrived or nothing
 * new arrived for a while), then the check.
 */

/** Bounds of the phases around the fault phase. */
const SETUP_MS = 8000;
const DRAIN_MAX_MS = 45_000;
/**
 * On a cluster: a backlog built up while a node was away reaches a session at the speed of its
 * inbox reads from JetStream (about 130 msg/s in the runs here), so the drain may take minutes.
 */
const CLUSTER_DRAIN_MAX_MS = 150_000;
const DRAIN_QUIET_MS = 1500;
/** While a due will has not arrived: a departed node's wills come 10-15 s after it went silent. */
const WILL_QUIET_MS = 20_000;
/** The settle before the drain ends after this long without a client event. */
const SETTLE_QUIET_MS = 1000;
const SETTLE_MAX_MS = 6000;
/** A moment after the drain for late duplicates. */
const LINGER_MS = 300;

export interface ScheduleOutcome {
  readonly schedule: Schedule;
  readonly record: RunRecord;
  readonly result: CheckResult;
  /** What fails the schedule. */
  readonly problems: readonly Problem[];
  readonly faults: ReadonlyMap<string, number>;
  readonly wallMs: number;
}

async function runNodeActions(
  target: Target,
  actions: readonly NodeAction[],
  t0: number,
  faultEnd: number,
  log: NodeEvent[],
): Promise<void> {
  for (const a of actions) {
    const wait = t0 + a.at - Date.now();
    if (wait > 0) await sleep(wait);
    if (Date.now() >= faultEnd - 100) return;
    const cluster = target.cluster;
    switch (a.kind) {
      case 'kill':
        log.push({ t: now(), node: a.node, type: 'kill' });
        await target.kill(a.node);
        await sleep(a.downMs);
        await target.restart(a.node);
        log.push({ t: now(), node: a.node, type: 'restart' });
        break;
      case 'storage-fail':
      case 'storage-lose': {
        const fault = a.kind === 'storage-fail' ? 'fail' : 'lose';
        log.push({ t: now(), node: a.node, type: a.kind });
        await target.setStorageFault(a.node, fault);
        await sleep(Math.min(a.forMs, faultEnd - Date.now()));
        await target.setStorageFault(a.node, undefined);
        log.push({ t: now(), node: a.node, type: 'storage-ok' });
        break;
      }
      case 'pause':
        if (cluster === undefined) throw new Error('a pause needs a cluster target');
        log.push({ t: now(), node: a.node, type: 'pause' });
        cluster.pause(a.node);
        await sleep(a.forMs);
        cluster.resume(a.node);
        log.push({ t: now(), node: a.node, type: 'resume' });
        break;
      case 'partition':
        if (cluster === undefined) throw new Error('a partition needs a cluster target');
        log.push({ t: now(), node: a.node, type: 'partition' });
        cluster.partition(a.node, true);
        await sleep(a.forMs);
        cluster.partition(a.node, false);
        log.push({ t: now(), node: a.node, type: 'heal' });
        break;
      case 'nats-kill':
        if (cluster === undefined) throw new Error('a NATS fault needs a cluster target');
        log.push({ t: now(), node: -1, type: 'nats-kill', server: a.server });
        await cluster.killNats(a.server);
        await sleep(a.downMs);
        await cluster.restartNats(a.server);
        log.push({ t: now(), node: -1, type: 'nats-up', server: a.server });
        break;
      case 'nats-restart': {
        if (cluster === undefined) throw new Error('a NATS fault needs a cluster target');
        const servers = [...Array(cluster.natsServers).keys()];
        log.push({ t: now(), node: -1, type: 'nats-restart' });
        await Promise.all(servers.map((i) => cluster.killNats(i)));
        await sleep(a.downMs);
        await Promise.all(servers.map((i) => cluster.restartNats(i)));
        log.push({ t: now(), node: -1, type: 'nats-up' });
        break;
      }
    }
  }
}

/** Node fault kinds counted in the figures (as NodeEvent types). */
const FAULT_EVENTS = new Set<NodeEvent['type']>([
  'kill',
  'storage-fail',
  'storage-lose',
  'pause',
  'partition',
  'nats-kill',
  'nats-restart',
]);

/** How long a fresh subscriber may wait for a message from another node after the faults. */
const FRESH_ROUTE_MS = 20_000;

/**
 * After the faults (cluster): a fresh subscriber on each node receives a fresh QoS 1 message
 * published on each other node (sent again every 500 ms until it arrives, for 20 s at most).
 */
async function freshRoutes(target: Target, tenant: string): Promise<Problem[]> {
  const pairs: [number, number][] = [];
  for (let on = 0; on < target.nodeCount; on++) for (let from = 0; from < target.nodeCount; from++) if (on !== from) pairs.push([on, from]);
  const results = await Promise.all(
    pairs.map(async ([on, from]): Promise<Problem | undefined> => {
      const name = `fresh${on}${from}`;
      const topic = `fresh/${on}-${from}`;
      const started = Date.now();
      const connect = async (node: number, id: string): Promise<MqttClient | undefined> => {
        const port = target.port(node);
        if (port === undefined) return undefined;
        const client = mqtt.connect({
          host: '127.0.0.1',
          port,
          clientId: `${tenant}-${id}`,
          username: `${tenant}/${id}`,
          protocolVersion: 5,
          reconnectPeriod: 0,
          connectTimeout: 12_000,
        });
        client.on('error', () => undefined);
        const ok = await within(new Promise<void>((r) => client.once('connect', () => r())), 13_000);
        if (ok) return client;
        client.end(true);
        return undefined;
      };
      let sub: MqttClient | undefined;
      let pub: MqttClient | undefined;
      try {
        let got = false;
        while (Date.now() - started < FRESH_ROUTE_MS && !got) {
          sub ??= await connect(on, name);
          pub ??= await connect(from, `${name}p`);
          if (sub === undefined || pub === undefined) {
            await sleep(500);
            continue;
          }
          const s = sub;
          s.on('message', () => (got = true));
          const granted = await new Promise<number>((r) =>
            s.subscribe(topic, { qos: 1 }, (err, g) => r(err !== null && err !== undefined ? 0x80 : (g?.[0]?.qos ?? 0x80))),
          );
          if (granted >= 0x80) {
            sub.end(true);
            sub = undefined;
            await sleep(500);
            continue;
          }
          while (!got && Date.now() - started < FRESH_ROUTE_MS && pub.connected) {
            pub.publish(topic, `fresh|${on}|${from}`, { qos: 1 });
            await sleep(500);
          }
          if (!got && !pub.connected) pub = undefined;
        }
        if (got) return undefined;
        return {
          kind: 'routes',
          summary: `a fresh subscriber on node ${on} got no QoS 1 message published on node ${from} within ${FRESH_ROUTE_MS / 1000} s after the faults`,
          details: [
            `  subscriber ${sub !== undefined ? 'connected' : 'could not connect'}, publisher ${pub !== undefined ? 'connected' : 'could not connect'}`,
          ],
        };
      } finally {
        sub?.end(true);
        pub?.end(true);
      }
    }),
  );
  return results.filter((p): p is Problem => p !== undefined);
}

/** Schedules run by this process (it names their tenants). */
let runs = 0;

export async function runSchedule(target: Target, schedule: Schedule): Promise<ScheduleOutcome> {
  const started = Date.now();
  // A tenant of its own, also when a schedule runs again on the same broker (a replay).
  const tenant = `${schedule.tenant}-${(++runs).toString(36)}`;
  if (Object.keys(schedule.settings).length > 0) await target.setTenantSettings(tenant, schedule.settings);
  const drainMax = target.nodeCount > 1 ? CLUSTER_DRAIN_MAX_MS : DRAIN_MAX_MS;
  const deadline = Date.now() + SETUP_MS + schedule.durationMs + drainMax + 10_000;
  const ctx = { tenant, target, deadline };
  const drivers = schedule.clients.map((spec) => new ClientDriver(spec, ctx));
  const nodes: NodeEvent[] = [];
  const extra: Problem[] = [];
  let drainCut = false;
  const record = (t0: number, faultEnd: number, settleStart: number, drainStart: number, end: number): RunRecord => ({
    ...(drainCut ? { drainCut } : {}),
    schedule,
    t0,
    faultEnd,
    settleStart,
    drainStart,
    end,
    clients: drivers.map((d) => d.record),
    nodes,
    tenant,
    broker: target.brokerEvents(tenant),
  });

  // Setup: everyone connects and subscribes.
  const setupUntil = Date.now() + SETUP_MS;
  const joined = await Promise.all(drivers.map((d) => d.start()));
  joined.forEach((ok, i) => {
    if (!ok) extra.push({ kind: 'drain', summary: `${schedule.clients[i]!.name} could not connect at the start`, details: [] });
  });
  while (Date.now() < setupUntil && !drivers.every((d) => d.subscribed)) await sleep(20);

  // Fault phase.
  const t0 = now();
  const faultEnd = t0 + schedule.durationMs;
  for (const d of drivers) d.startPublishing();
  const acting = drivers.map((d) =>
    d.act(
      schedule.actions.filter((a) => a.client === d.spec.name),
      t0,
      faultEnd,
    ),
  );
  const nodeActing = runNodeActions(target, schedule.nodeActions, t0, faultEnd, nodes);
  await sleep(faultEnd - now());
  await Promise.all(drivers.map((d) => d.stopPublishing()));
  await Promise.all([...acting, nodeActing]);

  // Drain: faults cleared, nodes up, persistent clients back; the others leave.
  await target.clearFaults?.();
  for (let n = 0; n < target.nodeCount; n++) {
    await target.setStorageFault(n, undefined);
    if (target.port(n) === undefined) {
      await target.restart(n);
      nodes.push({ t: now(), node: n, type: 'restart' });
    }
  }
  // Settle: connected clients keep their connections; what the broker holds for them should flow now.
  const settleStart = now();
  const settleUntil = Date.now() + SETTLE_MAX_MS;
  let seen = -1;
  let still = Date.now();
  while (Date.now() < settleUntil) {
    const count = drivers.reduce((n, d) => n + d.record.events.length, 0);
    if (count !== seen) {
      seen = count;
      still = Date.now();
    } else if (Date.now() - still >= SETTLE_QUIET_MS) break;
    await sleep(100);
  }
  const drainStart = now();
  await Promise.all(drivers.map((d) => (d.spec.persistent ? d.reconnectForDrain() : d.finish())));
  const drainUntil = Date.now() + drainMax;
  let delivered = -1;
  let quietSince = Date.now();
  for (;;) {
    const partial = checkRun(record(t0, faultEnd, settleStart, drainStart, now()));
    if (partial.outstanding === 0) break;
    if (Date.now() >= drainUntil) {
      drainCut = true;
      break;
    }
    const count = drivers.reduce((n, d) => n + d.record.events.length, 0);
    if (count !== delivered) {
      delivered = count;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= (partial.willsOutstanding > 0 ? WILL_QUIET_MS : DRAIN_QUIET_MS)) break;
    await sleep(200);
  }
  await sleep(LINGER_MS);
  await Promise.all(drivers.map((d) => d.finish()));
  const end = now();

  // Cluster: every node serves fresh subscribers with messages from every other node.
  if (target.nodeCount > 1) extra.push(...(await freshRoutes(target, tenant)));
  const full = record(t0, faultEnd, settleStart, drainStart, end);
  const result = checkRun(full);
  const trouble = target.trouble(started).map((text): Problem => ({ kind: 'broker', summary: text, details: [] }));
  const faults = new Map<string, number>();
  for (const d of drivers) for (const [k, n] of d.faults) faults.set(k, (faults.get(k) ?? 0) + n);
  for (const n of nodes) if (FAULT_EVENTS.has(n.type)) faults.set(n.type, (faults.get(n.type) ?? 0) + 1);
  const all = [...extra, ...trouble, ...result.problems];
  return {
    schedule,
    record: full,
    result,
    problems: all,
    faults,
    wallMs: Date.now() - started,
  };
}

/** A readable report of a schedule's problems. */
export function formatProblems(o: Pick<ScheduleOutcome, 'schedule' | 'problems'>, maxDetails = 60): string {
  const lines = [
    `${o.problems.length} problem(s) in schedule ${o.schedule.seed}:${o.schedule.index} (${o.schedule.storage} storage)`,
    `  replay: ${reproduceCommand(o.schedule)}`,
    ...summarize(o.schedule).map((l) => `  ${l}`),
  ];
  for (const p of o.problems.slice(0, 10)) {
    lines.push(`- [${p.kind}] ${p.summary}`);
    for (const d of p.details.slice(0, maxDetails)) lines.push(`    ${d}`);
    if (p.details.length > maxDetails) lines.push(`    ... ${p.details.length - maxDetails} more lines`);
  }
  if (o.problems.length > 10) lines.push(`... and ${o.problems.length - 10} more problems`);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Campaigns: many schedules, one target per storage, the figures.

/** The figures of cluster schedules by their cluster fault (docs/cluster.md § What a failure loses). */
export interface FaultFigures {
  schedules: number;
  acknowledged: number;
  lost: number;
  duplicates: number;
  unavailableMs: number;
  /** The longest unavailability of one schedule. */
  maxUnavailableMs: number;
  problems: number;
}

export interface Figures extends CheckStats {
  byFault: Map<string, FaultFigures>;
  schedules: number;
  faults: Map<string, number>;
  problems: number;
  failedSchedules: string[];
  started: number;
}

export function emptyFigures(): Figures {
  return {
    ...emptyStats(),
    schedules: 0,
    byFault: new Map(),
    faults: new Map(),
    problems: 0,
    failedSchedules: [],
    started: Date.now(),
  };
}

function addStats(f: Figures, s: CheckStats): void {
  f.published += s.published;
  for (const q of [0, 1, 2] as const) f.publishedByQos[q] += s.publishedByQos[q];
  f.acknowledged += s.acknowledged;
  f.refused += s.refused;
  f.delivered += s.delivered;
  f.required += s.required;
  f.excusedByDrops += s.excusedByDrops;
  f.dropsReported += s.dropsReported;
  f.lost += s.lost;
  f.undrained += s.undrained;
  f.duplicates += s.duplicates;
  f.unavailableMs += s.unavailableMs;
  f.willsDue += s.willsDue;
  f.willsReceived += s.willsReceived;
}

export function formatFigures(f: Figures): string {
  const faults = [...f.faults].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`);
  return [
    `schedules run: ${f.schedules}`,
    `messages published: ${f.published} (QoS 0 ${f.publishedByQos[0]}, QoS 1 ${f.publishedByQos[1]}, QoS 2 ${f.publishedByQos[2]})`,
    `QoS 1/2 acknowledged: ${f.acknowledged}, refused: ${f.refused}`,
    `deliveries to applications: ${f.delivered}`,
    `required deliveries checked: ${f.required} (missing within reported drops: ${f.excusedByDrops}; drops reported: ${f.dropsReported})`,
    `faults injected: ${faults.join(', ') || 'none'}`,
    ...(f.byFault.size > 0
      ? [
          `QoS 1/2 lost: ${f.lost}, not delivered when the drain hit its bound with deliveries still arriving: ${f.undrained}, delivered more than once: ${f.duplicates}; wills due ${f.willsDue}, received ${f.willsReceived}`,
          'by cluster fault (schedules, acknowledged, lost, duplicates, unavailable seconds in all / the most in one schedule, problems):',
          ...[...f.byFault].map(
            ([k, x]) =>
              `  ${k}: ${x.schedules} schedules, ${x.acknowledged} acknowledged, ${x.lost} lost, ${x.duplicates} duplicates, ` +
              `${(x.unavailableMs / 1000).toFixed(1)} s / ${(x.maxUnavailableMs / 1000).toFixed(1)} s unavailable, ${x.problems} problems`,
          ),
        ]
      : []),
    `problems found: ${f.problems}${f.failedSchedules.length > 0 ? ` in ${f.failedSchedules.join(', ')}` : ''}`,
    `wall time: ${((Date.now() - f.started) / 1000).toFixed(1)} s`,
  ].join('\n');
}

export interface CampaignOptions {
  readonly storages: readonly StorageKind[];
  /** Write failing generated schedules to the corpus. */
  readonly writeCorpus: boolean;
  readonly corpusDir?: string;
  readonly log: (line: string) => void;
  /** A target is replaced by a fresh one after this many schedules (its data and logs grow). */
  readonly recycleAfter?: number;
  /** Called with every schedule's outcome. */
  readonly onOutcome?: (o: ScheduleOutcome) => void;
  /** Whether a failing generated schedule goes to the corpus (default: every one, when `writeCorpus`). */
  readonly keepInCorpus?: (o: ScheduleOutcome) => boolean;
  /** The cluster's shape and fault lengths for generated schedules of the `nats` storage (cluster targets). */
  readonly cluster?: ClusterGenerateOptions;
}

/** One target per storage, used by schedules one at a time (storage `nats`: a cluster target). */
class Lane {
  private target: Target | undefined;
  /** The cluster shape of the current target. */
  private shape = '';
  private used = 0;
  private dirty = false;

  constructor(
    readonly storage: StorageKind,
    private readonly recycleAfter: number,
    private readonly log: (line: string) => void,
  ) {}

  /** Runs a schedule on this lane's target; `expectProblems`: a self-test, whose problems keep nothing. */
  async run(schedule: Schedule, expectProblems = false): Promise<ScheduleOutcome> {
    const shape = schedule.cluster !== undefined ? `${schedule.cluster.nodes}/${schedule.cluster.natsServers}` : '';
    if (this.target !== undefined && (this.used >= this.recycleAfter || shape !== this.shape)) await this.close();
    if (this.target === undefined) {
      this.target =
        schedule.cluster !== undefined
          ? new ClusterTarget({ nodes: schedule.cluster.nodes, natsServers: schedule.cluster.natsServers })
          : new SingleNodeTarget(this.storage);
      this.shape = shape;
      try {
        await this.target.start();
      } catch (err) {
        const t = this.target;
        this.target = undefined;
        await t.stop(true);
        throw err;
      }
      this.used = 0;
    }
    this.used++;
    const outcome = await runSchedule(this.target, schedule);
    this.target.forget(outcome.record.tenant);
    if (outcome.problems.length > 0 && !expectProblems) {
      this.dirty = true;
      const file = path.join(this.target.dir, `${outcome.record.tenant}.json`);
      writeFileSync(file, JSON.stringify(outcome.record));
      this.log(`kept for a look: the broker log ${this.target.logFile}, the clients' records ${file}`);
    }
    return outcome;
  }

  async close(): Promise<void> {
    const t = this.target;
    this.target = undefined;
    await t?.stop(this.dirty);
    this.dirty = false;
  }
}

/** A cluster campaign's default: 2 nodes, 1 NATS server, pauses and partitions up to 30 s. */
export const DEFAULT_CLUSTER: ClusterGenerateOptions = { nodes: 2, natsServers: 1, maxFaultMs: 30_000 };

export class Campaign {
  readonly figures = emptyFigures();
  private readonly lanes = new Map<StorageKind, Lane>();

  constructor(private readonly opts: CampaignOptions) {
    for (const s of opts.storages) this.lanes.set(s, new Lane(s, opts.recycleAfter ?? 25, opts.log));
  }

  private lane(storage: StorageKind): Lane {
    let lane = this.lanes.get(storage);
    if (lane === undefined) this.lanes.set(storage, (lane = new Lane(storage, this.opts.recycleAfter ?? 25, this.opts.log)));
    return lane;
  }

  private account(o: ScheduleOutcome): void {
    this.opts.onOutcome?.(o);
    const f = this.figures;
    f.schedules++;
    addStats(f, o.result.stats);
    for (const [k, n] of o.faults) f.faults.set(k, (f.faults.get(k) ?? 0) + n);
    f.problems += o.problems.length;
    if (o.schedule.cluster !== undefined) {
      const kind = o.schedule.nodeActions[0]?.kind ?? 'none';
      const x = f.byFault.get(kind) ?? {
        schedules: 0,
        acknowledged: 0,
        lost: 0,
        duplicates: 0,
        unavailableMs: 0,
        maxUnavailableMs: 0,
        problems: 0,
      };
      const s = o.result.stats;
      x.schedules++;
      x.acknowledged += s.acknowledged;
      x.lost += s.lost;
      x.duplicates += s.duplicates;
      x.unavailableMs += s.unavailableMs;
      x.maxUnavailableMs = Math.max(x.maxUnavailableMs, s.unavailableMs);
      x.problems += o.problems.length;
      f.byFault.set(kind, x);
    }
    if (o.problems.length > 0) f.failedSchedules.push(`${o.schedule.storage} ${o.schedule.seed}:${o.schedule.index}`);
  }

  /** Replays corpus entries; returns the reports of those that fail again. */
  async replayCorpus(entries: readonly { file: string; entry: CorpusEntry }[]): Promise<string[]> {
    const failures: string[] = [];
    for (const { file, entry } of entries) {
      const o = await this.lane(entry.storage).run(entry.schedule);
      this.account(o);
      this.opts.log(`corpus ${file}: ${o.problems.length === 0 ? 'passes' : `${o.problems.length} problem(s)`}`);
      if (o.problems.length > 0) failures.push(`${file}\n${formatProblems(o)}`);
    }
    return failures;
  }

  /** Runs one schedule that is meant to fail (a self-test of the checker): not in the figures. */
  selfTest(schedule: Schedule): Promise<ScheduleOutcome> {
    return this.lane(schedule.storage).run(schedule, true);
  }

  /** The corpus files of this campaign's storages. */
  corpus(): { file: string; entry: CorpusEntry }[] {
    return readCorpus(this.opts.corpusDir).filter((e) => this.lanes.has(e.entry.storage));
  }

  /**
   * Generated schedules of `seed` for `seconds` (each storage's lane in parallel), or the one
   * schedule `only`. Returns the reports of failing schedules.
   */
  async runSeed(seed: number, seconds: number, only?: number, maxFailures = 3): Promise<string[]> {
    const failures: string[] = [];
    const until = Date.now() + seconds * 1000;
    await Promise.all(
      [...this.lanes.values()].map(async (lane) => {
        for (let index = only ?? 0; ; index++) {
          if (only !== undefined ? index > only : Date.now() >= until) return;
          if (failures.length >= maxFailures) return;
          const schedule =
            lane.storage === 'nats'
              ? generateSchedule(seed, index, 'nats', { cluster: this.opts.cluster ?? DEFAULT_CLUSTER })
              : generateSchedule(seed, index, lane.storage);
          const o = await lane.run(schedule);
          this.account(o);
          const s = o.result.stats;
          this.opts.log(
            `${lane.storage} ${seed}:${index}: ${s.published} published, ${s.acknowledged} acknowledged, ${s.delivered} delivered, ` +
              `${s.required} required, faults ${[...o.faults].map(([k, n]) => `${k}×${n}`).join(' ') || 'none'}, ` +
              `${o.problems.length} problem(s), ${(o.wallMs / 1000).toFixed(1)} s`,
          );
          if (o.problems.length > 0) {
            const file =
              this.opts.writeCorpus && only === undefined && (this.opts.keepInCorpus?.(o) ?? true)
                ? writeCorpusEntry(schedule, o.problems, this.opts.corpusDir)
                : '(not written)';
            failures.push(`${formatProblems(o)}\n  corpus: ${file}`);
          }
        }
      }),
    );
    return failures;
  }

  async close(): Promise<void> {
    await Promise.all([...this.lanes.values()].map((l) => l.close()));
  }
}
