import { randomInt } from 'node:crypto';
import { checkRun } from '../delivery/checker';
import { CORPUS_DIR } from '../delivery/corpus';
import { describeSeedRuns, parseSeed, seedRuns } from '../support/fuzz';
import type { ClientEvent, ClientRecord, RunRecord, Schedule, StorageKind } from '../delivery/model';
import { Campaign, formatFigures, type ScheduleOutcome } from '../delivery/runner';

/**
 * Standing defence (issue "Nothing acknowledged is lost"): the randomized delivery checker of
 * test/delivery (docs/delivery-checker.md). Real broker processes (level storage and memory
 * storage, each wrapped by the faulty-storage fixture), real MQTT.js clients, seeded schedules of
 * publishers, persistent, clean and shared subscribers and faults (DISCONNECT, dropped sockets,
 * takeovers, session expiry, slow consumers, unsubscribes, kill -9, storage write failures); the
 * invariants are checked over what the clients recorded. First the corpus
 * (test/fixtures/delivery-corpus/*.json) is replayed, then generated schedules run for the budget.
 * A failing generated schedule is written to the corpus.
 *
 * BIFRO_CHECK_SECONDS: the budget of generated schedules (default 25 s: 40 % a fixed seed, 60 % a
 * random one printed below), both storages side by side.
 * BIFRO_CHECK_SEED=<seed>: that seed for the whole budget; <seed>:<index>: that one schedule.
 * BIFRO_CHECK_STORAGE=level|memory: one storage only.
 */

const BUDGET_S = Number(process.env.BIFRO_CHECK_SECONDS ?? 25);
const FIXED_SEED = 0xd311_7e57;
const RANDOM_SEED = randomInt(2 ** 32);
const ENV = parseSeed(process.env.BIFRO_CHECK_SEED, 'BIFRO_CHECK_SEED');
const STORAGE = process.env.BIFRO_CHECK_STORAGE;
const STORAGES: StorageKind[] = STORAGE === 'level' || STORAGE === 'memory' ? [STORAGE] : ['level', 'memory'];

const RUNS = seedRuns(ENV, BUDGET_S, FIXED_SEED, RANDOM_SEED);
// Printed so a CI failure can be replayed: BIFRO_CHECK_SEED=<seed> (or <seed>:<index> from the report).
console.log(`49-delivery-checker seeds: ${describeSeedRuns(RUNS)} on ${STORAGES.join(' and ')} storage`);

/** A copy of a run with one client's events changed. */
function withEvents(run: RunRecord, client: string, change: (events: ClientEvent[]) => ClientEvent[]): RunRecord {
  return {
    ...run,
    clients: run.clients.map((c): ClientRecord => (c.spec.name === client ? { spec: c.spec, events: change([...c.events]) } : c)),
  };
}

describe('49 delivery checker', () => {
  const lines: string[] = [];
  const outcomes: ScheduleOutcome[] = [];
  const campaign = new Campaign({
    storages: STORAGES,
    writeCorpus: ENV === undefined,
    log: (line) => lines.push(line),
    onOutcome: (o) => outcomes.push(o),
  });

  afterAll(async () => {
    await campaign.close();
    console.log(`49-delivery-checker\n${lines.join('\n')}\n${formatFigures(campaign.figures)}`);
  }, 60_000);

  it('replays the corpus', async () => {
    const entries = campaign.corpus();
    const failures = await campaign.replayCorpus(entries);
    if (failures.length > 0) throw new Error(`${failures.length} corpus schedule(s) of ${CORPUS_DIR} fail:\n\n${failures.join('\n\n')}`);
  }, 300_000);

  for (const run of RUNS) {
    const title =
      run.only !== undefined
        ? `replays schedule ${run.seed}:${run.only}`
        : `runs schedules for ${run.seconds.toFixed(0)} s with seed ${run.seed} (BIFRO_CHECK_SEED=${run.seed} to replay)`;
    it(
      title,
      async () => {
        const before = campaign.figures.schedules;
        const failures = await campaign.runSeed(run.seed, run.seconds, run.only);
        if (failures.length > 0) throw new Error(`${failures.length} failing schedule(s):\n\n${failures.join('\n\n')}`);
        expect(campaign.figures.schedules).toBeGreaterThan(before);
      },
      (run.seconds + 120) * 1000,
    );
  }

  it('fails on a broker that acknowledges messages and loses them', async () => {
    // The faulty storage acknowledges inbox appends without storing them while the subscriber is away.
    const storage = STORAGES.includes('memory') ? 'memory' : STORAGES[0]!;
    const broken: Schedule = {
      seed: 0,
      index: 0,
      storage,
      tenant: 'selftest',
      settings: {},
      durationMs: 2500,
      topics: ['a'],
      clients: [
        {
          name: 'p0',
          clientId: 'selftest-p0',
          node: 0,
          version: 5,
          persistent: false,
          expirySeconds: 0,
          subscriptions: [],
          publish: { topics: ['a'], qos: [1], window: 10, pauseMs: 2, seed: 1 },
        },
        {
          name: 's0',
          clientId: 'selftest-s0',
          node: 0,
          version: 4,
          persistent: true,
          expirySeconds: 0,
          subscriptions: [{ filter: 'a', qos: 1, noLocal: false }],
        },
      ],
      actions: [{ at: 100, client: 's0', kind: 'disconnect', offMs: 1800 }],
      nodeActions: [{ at: 500, kind: 'storage-lose', node: 0, forMs: 700 }],
    };
    const o = await campaign.selfTest(broken);
    const lost = o.problems.filter((p) => p.kind === 'lost');
    expect(lost).toHaveLength(1);
    expect(lost[0]!.summary).toMatch(/^s0 #1: \d+ acknowledged QoS 1\/2 message\(s\) never delivered \(no drop reported\)/);
  }, 60_000);

  it('fails on a lost, a reordered and a duplicated delivery in the records of a real run', () => {
    const passing = outcomes.filter((o) => o.problems.length === 0 && o.result.stats.required > 0 && o.result.stats.dropsReported === 0);
    expect(passing.length).toBeGreaterThan(0);
    const found = new Set<string>();
    for (const o of passing) {
      for (const c of o.record.clients) {
        if (!c.spec.persistent) continue;
        const delivered = c.events.filter((e): e is Extract<ClientEvent, { type: 'deliver' }> => e.type === 'deliver' && e.qos > 0);
        // Lost: a delivered QoS 1/2 message taken out of the subscriber's record.
        for (const d of delivered.slice(0, 20)) {
          if (found.has('lost')) break;
          const run = withEvents(o.record, c.spec.name, (es) =>
            es.filter((e) => !((e.type === 'deliver' || e.type === 'recv') && e.msg === d.msg)),
          );
          if (checkRun(run).problems.some((p) => p.kind === 'lost')) found.add('lost');
        }
        // Duplicate: a QoS 2 delivery recorded twice.
        const q2 = delivered.find((d) => d.qos === 2);
        if (q2 !== undefined && !found.has('duplicate')) {
          const run = withEvents(o.record, c.spec.name, (es) => [...es, { ...q2, t: q2.t + 0.0005 }].sort((a, b) => a.t - b.t));
          if (checkRun(run).problems.some((p) => p.kind === 'duplicate')) found.add('duplicate');
        }
        // Out of order: the messages of two successive first receipts of one publisher and topic swapped.
        const recv = c.events.filter(
          (e): e is Extract<ClientEvent, { type: 'recv' }> => e.type === 'recv' && !e.dup && !e.topic.startsWith('$'),
        );
        for (let i = 1; i < recv.length && !found.has('order'); i++) {
          const [a, b] = [recv[i - 1]!, recv[i]!];
          if (a.topic !== b.topic || a.qos !== b.qos || a.msg.split(':')[0] !== b.msg.split(':')[0]) continue;
          const run = withEvents(o.record, c.spec.name, (es) =>
            es.map((e) => (e === a ? { ...a, msg: b.msg } : e === b ? { ...b, msg: a.msg } : e)),
          );
          if (checkRun(run).problems.some((p) => p.kind === 'order')) found.add('order');
        }
      }
      if (found.size === 3) break;
    }
    expect([...found].sort()).toEqual(['duplicate', 'lost', 'order']);
  });
});
