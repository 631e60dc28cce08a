import { randomInt } from 'node:crypto';
import { checkRun } from '../delivery/checker';
import { CORPUS_DIR } from '../delivery/corpus';
import type { ClientEvent, ClientRecord, Problem, RunRecord } from '../delivery/model';
import { Campaign, formatFigures, type ScheduleOutcome } from '../delivery/runner';
import { describeSeedRuns, parseSeed, seedRuns } from '../support/fuzz';

/**
 * The delivery checker on a cluster (docs/delivery-checker.md § Cluster): real `bifro start`
 * nodes with a `cluster` section on a real nats-server (storage-nats), each reaching NATS through
 * a TCP proxy of the test; seeded schedules of the single-node checker's clients plus will
 * clients and a will watcher, each with one cluster fault: a node paused (SIGSTOP, past the 7 s
 * lease or not), a node `kill -9` and restart, NATS `kill -9` and restart, a node cut off from
 * NATS by its proxy. Clients fail over to the next node as fleets do. Checked: every acknowledged
 * QoS 1/2 message delivered, QoS 2 once, one node serving a session at a time (from the clients
 * and from the nodes' events and lease lines), wills once, and fresh subscribers on every node
 * served from every other node after the faults. First the corpus's cluster schedules, then one
 * generated schedule with a fixed seed and one with a random seed printed below.
 *
 * BIFRO_CLUSTER_CHECK_SECONDS: the budget of generated schedules (default 10 s: each seed runs
 * one schedule, 25-35 s with its fault). BIFRO_CHECK_SEED=<seed>[:<index>], BIFRO_CHECK_NODES
 * (2), BIFRO_CHECK_NATS (1), BIFRO_CHECK_MAX_FAULT_SECONDS (9: the longest pause or partition).
 */

const BUDGET_S = Number(process.env.BIFRO_CLUSTER_CHECK_SECONDS ?? 10);
const FIXED_SEED = 0xc105_7e57;
const RANDOM_SEED = randomInt(2 ** 32);
const ENV = parseSeed(process.env.BIFRO_CHECK_SEED, 'BIFRO_CHECK_SEED');
const CLUSTER = {
  nodes: Number(process.env.BIFRO_CHECK_NODES ?? 2),
  natsServers: Number(process.env.BIFRO_CHECK_NATS ?? 1),
  maxFaultMs: Number(process.env.BIFRO_CHECK_MAX_FAULT_SECONDS ?? 9) * 1000,
};

const RUNS = seedRuns(ENV, BUDGET_S, FIXED_SEED, RANDOM_SEED);
console.log(
  `53-cluster-delivery-checker seeds: ${describeSeedRuns(RUNS)} on ${CLUSTER.nodes} nodes, ${CLUSTER.natsServers} NATS server(s), faults up to ${CLUSTER.maxFaultMs / 1000} s`,
);

/**
 * Broker bugs the checker found that are not fixed yet (docs/delivery-checker.md § Found so far):
 * reported in the output and counted by `npm run check:delivery -- --cluster`, but not failing
 * this CI test. Remove an entry with the broker fix.
 *
 * - A will published around a restart of every NATS server does not reach the watcher's
 *   persistent QoS 2 subscription (test/fixtures/delivery-corpus-open/nats-3960147-14.json,
 *   nats-bdb29-10.json).
 * - A will published by a node whose registry write ending the session did not land (NATS just
 *   back, the lease about to run out) is published again when the node takes its lease back and
 *   "takes back" the sessions still registered to it (test/fixtures/delivery-corpus-open/nats-27bde1c4-0.json).
 * - A CONNECT that reached a node while it held its lease and then waited for the registry (NATS
 *   down) is accepted after the lease ran out: the node serves a client without its lease
 *   (test/fixtures/delivery-corpus-open/nats-4a958a77-3.json).
 * - QoS 1/2 messages acknowledged in the first moments after a node came back (resumed from a
 *   pause, restarted after kill -9) are lost: forwarded to the resumed node before it took back
 *   its fenced sessions (test/fixtures/delivery-corpus-open/nats-3960147-19.json), published on a
 *   restarted node before it restored its own sessions (a shared group's members there:
 *   nats-3960147-21.json), or sent to the routes a resumed node wrote again for sessions another
 *   node had adopted (nats-3960147-17.json). Only a loss whose every message was acknowledged
 *   within 2 s after a node came back counts as this bug; any other loss fails the test.
 * - A session whose client's CONNECT reached a node before the session's expiry but waited for
 *   the registry (NATS down) expires meanwhile: Session Present 0 (`session-lost`,
 *   nats-3960147-0.json). Only with a NATS fault in the run.
 * - After all NATS servers were restarted, a fresh subscriber on one node was not served from
 *   the other within 20 s (`routes`, nats-1fe9ba-12.json). Only with a NATS fault in the run.
 * - Right after a node resumed from a pause, QoS 1/2 messages acknowledged for a live session
 *   reach it only at its next reconnect (`stalled`). The cause found (the NATS storage's inbox
 *   read following the appends) is fixed and its schedule is in the corpus; kept open until a
 *   longer run shows no other cause.
 */
function knownOpen(p: Problem, record: RunRecord): boolean {
  if (p.kind === 'lease' || p.kind === 'stalled') return true;
  if (p.kind === 'session-lost' || p.kind === 'routes')
    return record.nodes.some((n) => n.type === 'nats-restart' || n.type === 'nats-kill');
  if (p.kind === 'lost') {
    const back = record.nodes.filter((n) => n.type === 'resume' || n.type === 'restart').map((n) => n.t);
    return p.acks !== undefined && p.acks.length > 0 && p.acks.every((a) => back.some((t) => a >= t && a <= t + BACK_WINDOW_MS));
  }
  return (
    p.kind === 'will' &&
    /published its will \(willDistributed\) but it never reached the watcher|arrived \d+ times|the nodes published its will \d+ times/.test(
      p.summary,
    )
  );
}

/** The window after a node came back in which a loss is the open bug above. */
const BACK_WINDOW_MS = 2000;

/** A copy of a run with one client's events changed. */
function withEvents(run: RunRecord, client: string, change: (events: ClientEvent[]) => ClientEvent[]): RunRecord {
  return {
    ...run,
    clients: run.clients.map((c): ClientRecord => (c.spec.name === client ? { spec: c.spec, events: change([...c.events]) } : c)),
  };
}

describe('53 cluster delivery checker', () => {
  const lines: string[] = [];
  const outcomes: ScheduleOutcome[] = [];
  const campaign = new Campaign({
    storages: ['nats'],
    writeCorpus: ENV === undefined,
    log: (line) => lines.push(line),
    onOutcome: (o) => outcomes.push(o),
    // A schedule failing only on an open bug is not written to the corpus (it would fail the next replay).
    keepInCorpus: (o) => o.problems.some((p) => !knownOpen(p, o.record)),
    cluster: CLUSTER,
  });

  afterAll(async () => {
    await campaign.close();
    console.log(`53-cluster-delivery-checker\n${lines.join('\n')}\n${formatFigures(campaign.figures)}`);
  }, 60_000);

  /**
   * The outcomes since `seen` judged: open bugs printed, any other problem fails the test (a
   * schedule kept for a fixed bug may still meet an open one: timing differs between runs).
   */
  function judge(seen: number, failures: readonly string[], what: string): void {
    const mine = outcomes.slice(seen);
    const open = mine.flatMap((o) =>
      o.problems.filter((p) => knownOpen(p, o.record)).map((p) => `${o.schedule.seed}:${o.schedule.index} [${p.kind}] ${p.summary}`),
    );
    if (open.length > 0) console.log(`53-cluster-delivery-checker: known open broker bug(s), not failing this test:\n${open.join('\n')}`);
    const failing = mine.filter((o) => o.problems.some((p) => !knownOpen(p, o.record)));
    if (failing.length > 0) throw new Error(`${failing.length} failing ${what}:\n\n${failures.join('\n\n')}`);
  }

  it('replays the corpus of cluster schedules', async () => {
    const seen = outcomes.length;
    const failures = await campaign.replayCorpus(campaign.corpus());
    judge(seen, failures, `corpus schedule(s) of ${CORPUS_DIR}`);
  }, 600_000);

  for (const run of RUNS) {
    const title =
      run.only !== undefined
        ? `replays cluster schedule ${run.seed}:${run.only}`
        : `runs cluster schedules for ${run.seconds.toFixed(0)} s with seed ${run.seed} (BIFRO_CHECK_SEED=${run.seed} to replay)`;
    it(
      title,
      async () => {
        const before = campaign.figures.schedules;
        const seen = outcomes.length;
        const failures = await campaign.runSeed(run.seed, run.seconds, run.only);
        judge(seen, failures, 'schedule(s)');
        expect(campaign.figures.schedules).toBeGreaterThan(before);
      },
      // A schedule of 20-35 s, and a drain of up to 150 s when a backlog is slow.
      (run.seconds + 300) * 1000,
    );
  }

  it('fails on two owners and a will twice in the records of a real run', () => {
    const passing = outcomes.filter((o) => o.problems.every((p) => knownOpen(p, o.record)));
    expect(passing.length).toBeGreaterThan(0);
    const found = new Set<string>();
    for (const o of passing) {
      for (const c of o.record.clients) {
        // Two owners: a PUBLISH the client got is read again on its connection 1 after a later connection's CONNACK.
        const acks = c.events.filter((e): e is Extract<ClientEvent, { type: 'connack' }> => e.type === 'connack' && e.reason === 0);
        const recv = c.events.find((e): e is Extract<ClientEvent, { type: 'recv' }> => e.type === 'recv' && e.conn === acks[0]?.conn);
        const later = acks.find((a) => a.conn > (acks[0]?.conn ?? Infinity));
        if (recv !== undefined && later !== undefined && !found.has('two-owners')) {
          const run = withEvents(o.record, c.spec.name, (es) => [...es, { ...recv, t: later.t + 500 }].sort((a, b) => a.t - b.t));
          if (checkRun(run).problems.some((p) => p.kind === 'two-owners')) found.add('two-owners');
        }
        // A will twice: the watcher's delivery of a will recorded again.
        const will = c.events.find(
          (e): e is Extract<ClientEvent, { type: 'deliver' }> => e.type === 'deliver' && e.msg.startsWith('?will|'),
        );
        if (will !== undefined && !found.has('will')) {
          const run = withEvents(o.record, c.spec.name, (es) => [...es, { ...will, t: will.t + 1 }].sort((a, b) => a.t - b.t));
          if (checkRun(run).problems.some((p) => p.kind === 'will')) found.add('will');
        }
      }
    }
    // A run without a will that fired, or a client with one connection only, has nothing to change.
    expect(found.size).toBeGreaterThan(0);
  });
});
