import { caseSeed, Rng } from '../support/fuzz';
import type { ClientAction, ClientSpec, NodeAction, QoS, Schedule, StorageKind, SubSpec, Version } from './model';

/**
 * The schedule generator: from (seed, index, storage) a few seconds of clients and faults. One
 * tenant per schedule, so schedules can share a broker process. Every choice comes from the
 * seeded PRNG of test/support/fuzz.ts; the run itself (timing) varies.
 */

const TOPIC_POOL = ['a', 'b/x', 'b/y', 'c/x/z', 'c/y/z'];

/** Filters over the topics: exact ones, `+`, `#`. */
function filterChoices(topics: readonly string[]): string[] {
  const wild = ['#', 'b/+', '+/x', 'c/#', '+/+/z', 'c/+/z', '+'];
  const useful = wild.filter((f) => topics.some((t) => matches(f, t)));
  return [...topics, ...useful];
}

function matches(filter: string, topic: string): boolean {
  const f = filter.split('/');
  const t = topic.split('/');
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true;
    if (i >= t.length || (f[i] !== '+' && f[i] !== t[i])) return false;
  }
  return f.length === t.length;
}

export interface GenerateOptions {
  /** Node count of the target (clients and node faults pick one); 1 for the single-node target. */
  readonly nodes?: number;
  /**
   * A cluster schedule (storage `nats`): one cluster fault (a pause, a node `kill -9`, a NATS
   * server `kill -9`, all NATS restarted, a partition between a node and NATS) in a fault phase
   * long enough for it and a few seconds after it, will clients and a will watcher.
   */
  readonly cluster?: ClusterGenerateOptions;
}

export interface ClusterGenerateOptions {
  readonly nodes: number;
  /** 1 or 3. */
  readonly natsServers: number;
  /** Longest pause or partition, ms (at least 5000): 30 s in long runs, less in CI. */
  readonly maxFaultMs: number;
}

/** The kinds of cluster fault and their weights. */
const CLUSTER_FAULTS = ['pause', 'pause', 'partition', 'partition', 'kill', 'nats-kill', 'nats-restart'] as const;

/** One cluster fault, starting 1-3 s into the fault phase; how long it lasts. */
function clusterFault(rng: Rng, c: ClusterGenerateOptions): { action: NodeAction; lengthMs: number } {
  const at = rng.range(1000, 3000);
  const node = rng.int(c.nodes);
  let kind: (typeof CLUSTER_FAULTS)[number] = rng.pick(CLUSTER_FAULTS);
  // With one NATS server, killing it is restarting all of them.
  if (kind === 'nats-kill' && c.natsServers === 1) kind = 'nats-restart';
  const long = (): number => rng.range(5000, Math.max(5000, c.maxFaultMs));
  switch (kind) {
    case 'pause': {
      const forMs = long();
      return { action: { at, kind, node, forMs }, lengthMs: forMs };
    }
    case 'partition': {
      const forMs = long();
      return { action: { at, kind, node, forMs }, lengthMs: forMs };
    }
    case 'kill': {
      const downMs = rng.range(200, 3000);
      return { action: { at, kind, node, downMs }, lengthMs: downMs + 2000 };
    }
    case 'nats-kill': {
      const downMs = rng.range(2000, 6000);
      return { action: { at, kind, node: -1, server: rng.int(c.natsServers), downMs }, lengthMs: downMs + 1000 };
    }
    default: {
      const downMs = rng.range(5000, 6000);
      return { action: { at, kind: 'nats-restart', node: -1, downMs }, lengthMs: downMs + 1000 };
    }
  }
}

export function generateSchedule(seed: number, index: number, storage: StorageKind, opts: GenerateOptions = {}): Schedule {
  const rng = new Rng(caseSeed(seed, index));
  const cluster = opts.cluster;
  const nodes = cluster?.nodes ?? opts.nodes ?? 1;
  const tenant = `dc${(seed >>> 0).toString(36)}${storage[0]}${index}`;
  // A cluster fault first: the fault phase lasts until a few seconds after it.
  const major = cluster !== undefined ? clusterFault(rng, cluster) : undefined;
  const durationMs = major !== undefined ? major.action.at + major.lengthMs + rng.range(3000, 6000) : rng.range(2500, 4500);
  const topics = shuffle(rng, TOPIC_POOL).slice(0, rng.range(3, 4));
  const filters = filterChoices(topics);
  const version = (): Version => (rng.chance(0.5) ? 5 : 4);
  const node = (): number => rng.int(nodes);
  const clients: ClientSpec[] = [];
  const actions: ClientAction[] = [];

  const settings: Record<string, number | boolean> = {};
  if (rng.chance(0.35)) settings.SessionInboxSize = rng.pick([5, 10, 20, 50, 200]);
  if (rng.chance(0.3)) settings.QoS0DropOldest = true;

  /** Non-overlapping fault times for one client, each fault taking `length(kind)` ms. */
  const timeline = (n: number, pickOne: () => ClientAction): void => {
    let at = rng.range(0, 400);
    for (let i = 0; i < n && at < durationMs - 200; i++) {
      const a = { ...pickOne(), at } as ClientAction;
      actions.push(a);
      at += actionLength(a) + rng.range(150, 900);
    }
  };

  // Publishers: clean sessions, a window of QoS 1/2 in flight.
  const publishers = rng.range(1, 3);
  for (let i = 0; i < publishers; i++) {
    const name = `p${i}`;
    clients.push({
      name,
      clientId: `${tenant}-${name}`,
      node: node(),
      version: version(),
      persistent: false,
      expirySeconds: 0,
      subscriptions: [],
      publish: {
        topics: shuffle(rng, topics).slice(0, rng.range(1, topics.length)),
        qos: rng.pick<QoS[]>([[1], [2], [0, 1], [1, 2], [0, 1, 2], [1, 1, 2]]),
        window: rng.range(10, 50),
        pauseMs: rng.pick([1, 2, 3, 5]),
        seed: rng.int(2 ** 32),
      },
    });
    timeline(rng.pick([0, 0, 1, 2]), () => ({
      at: 0,
      client: name,
      kind: rng.pick(['disconnect', 'drop'] as const),
      offMs: rng.range(20, 400),
    }));
  }

  // Subscribers on ordinary filters: persistent (v5 long or short expiry, v3.1.1) and clean.
  const subscribers = rng.range(2, 4);
  for (let i = 0; i < subscribers; i++) {
    const name = `s${i}`;
    const v = version();
    const persistent = rng.chance(0.75);
    const shortExpiry = persistent && v === 5 && rng.chance(0.35);
    const expirySeconds = persistent && v === 5 ? (shortExpiry ? rng.range(1, 3) : 600) : 0;
    const subs: SubSpec[] = shuffle(rng, filters)
      .slice(0, rng.range(1, 3))
      .map((filter) => ({ filter, qos: rng.pick<QoS>([0, 1, 1, 2, 2]), noLocal: false }));
    clients.push({
      name,
      clientId: `${tenant}-${name}`,
      node: node(),
      version: v,
      persistent,
      expirySeconds,
      ...(v === 5 && rng.chance(0.5) ? { receiveMaximum: rng.pick([2, 5, 10, 20]) } : {}),
      subscriptions: subs,
    });
    const kinds: ClientAction['kind'][] = ['disconnect', 'drop', 'takeover', 'slow', 'slow'];
    if (shortExpiry) kinds.push('expire', 'expire', 'expire');
    let unsubscribed: SubSpec | undefined;
    timeline(rng.range(1, 4), () => {
      if (unsubscribed !== undefined && rng.chance(0.6)) {
        const sub = unsubscribed;
        unsubscribed = undefined;
        return { at: 0, client: name, kind: 'subscribe', sub };
      }
      if (unsubscribed === undefined && rng.chance(0.2)) {
        unsubscribed = rng.pick(subs);
        return { at: 0, client: name, kind: 'unsubscribe', filter: unsubscribed.filter };
      }
      const kind = rng.pick(kinds);
      switch (kind) {
        case 'disconnect':
        case 'drop':
          return { at: 0, client: name, kind, offMs: rng.pick([rng.range(20, 300), rng.range(300, 1500)]) };
        case 'expire':
          return {
            at: 0,
            client: name,
            kind: 'expire',
            how: rng.pick(['disconnect', 'drop'] as const),
            offMs: Math.max(100, expirySeconds * 1000 + rng.range(-700, 700)),
          };
        case 'slow':
          return { at: 0, client: name, kind: 'slow', forMs: rng.range(300, 1500) };
        default:
          return { at: 0, client: name, kind: 'takeover' };
      }
    });
  }

  // Shared groups of persistent members: $share (round robin) or $oshare (ordered).
  const groups = rng.pick([0, 0, 1, 1, 2]);
  for (let g = 0; g < groups; g++) {
    const share = rng.pick(['$share', '$oshare'] as const);
    const filter = `${share}/g${g}/${rng.pick(filters)}`;
    const qos = rng.pick<QoS>([1, 2]);
    const members = rng.range(2, 3);
    for (let m = 0; m < members; m++) {
      const name = `g${g}m${m}`;
      const v = version();
      clients.push({
        name,
        clientId: `${tenant}-${name}`,
        node: node(),
        version: v,
        persistent: true,
        expirySeconds: v === 5 ? 600 : 0,
        subscriptions: [{ filter, qos, noLocal: false }],
      });
      timeline(rng.range(0, 3), () => {
        const kind = rng.pick(['disconnect', 'drop', 'takeover', 'slow'] as const);
        if (kind === 'slow') return { at: 0, client: name, kind, forMs: rng.range(300, 1200) };
        if (kind === 'takeover') return { at: 0, client: name, kind };
        return { at: 0, client: name, kind, offMs: rng.range(20, 800) };
      });
    }
  }

  // A v5 client that publishes and subscribes with No Local on a filter its topics match.
  if (rng.chance(0.4)) {
    const name = 'n0';
    const persistent = rng.chance(0.5);
    const own = rng.pick(topics);
    const filter = rng.pick(filters.filter((f) => matches(f, own)));
    clients.push({
      name,
      clientId: `${tenant}-${name}`,
      node: node(),
      version: 5,
      persistent,
      expirySeconds: persistent ? 600 : 0,
      subscriptions: [{ filter, qos: rng.pick<QoS>([1, 2]), noLocal: true }],
      publish: {
        topics: [own],
        // A persistent publisher would have to resend its QoS 2 PUBLISH after a reconnect; it sticks to QoS 0/1.
        qos: persistent ? [0, 1] : [0, 1, 2],
        window: rng.range(5, 20),
        pauseMs: rng.pick([2, 5, 10]),
        seed: rng.int(2 ** 32),
      },
    });
    timeline(rng.range(0, 2), () =>
      rng.pick([
        { at: 0, client: name, kind: 'drop', offMs: rng.range(20, 400) } as const,
        { at: 0, client: name, kind: 'takeover' } as const,
      ]),
    );
  }

  // Cluster: will clients, each with one connection that ends (dropped, or with its node) or not,
  // and a persistent watcher of their wills.
  if (cluster !== undefined) {
    clients.push({
      name: 'wt',
      clientId: `${tenant}-wt`,
      node: node(),
      version: 5,
      persistent: true,
      expirySeconds: 600,
      subscriptions: [{ filter: 'will/#', qos: 2, noLocal: false }],
    });
    for (let i = rng.range(1, 3) - 1; i >= 0; i--) {
      const name = `w${i}`;
      const delaySeconds = rng.pick([0, 0, 1, 3]);
      clients.push({
        name,
        clientId: `${tenant}-${name}`,
        node: node(),
        version: 5,
        persistent: false,
        // A session that outlives its connection by more than the will delay, or none.
        expirySeconds: delaySeconds > 0 && rng.chance(0.5) ? 60 : 0,
        subscriptions: [],
        will: { delaySeconds },
      });
      if (rng.chance(0.5)) actions.push({ at: rng.range(300, durationMs - 300), client: name, kind: 'drop', offMs: 0 });
    }
  }

  // Node faults: kill -9 only with durable storage; storage write failures with both.
  const nodeActions: NodeAction[] = [];
  if (major !== undefined) nodeActions.push(major.action);
  else if (storage === 'level' && rng.chance(0.4)) {
    nodeActions.push({ at: rng.range(500, durationMs - 500), kind: 'kill', node: node(), downMs: rng.range(100, 600) });
  }
  for (let i = cluster !== undefined ? 0 : rng.pick([0, 0, 1, 1, 2]); i > 0; i--) {
    nodeActions.push({
      at: rng.range(200, durationMs - 300),
      kind: 'storage-fail',
      node: node(),
      forMs: rng.pick([rng.range(200, 600), rng.range(600, 2000)]),
    });
  }
  nodeActions.sort((a, b) => a.at - b.at);
  actions.sort((a, b) => a.at - b.at);

  return {
    seed,
    index,
    storage,
    tenant,
    settings,
    durationMs,
    topics,
    clients,
    actions,
    nodeActions,
    ...(cluster !== undefined
      ? { cluster: { nodes: cluster.nodes, natsServers: cluster.natsServers, maxFaultMs: cluster.maxFaultMs } }
      : {}),
  };
}

/** How long an action keeps its client busy (ms). */
export function actionLength(a: ClientAction): number {
  switch (a.kind) {
    case 'disconnect':
    case 'drop':
    case 'expire':
      return a.offMs + 100;
    case 'slow':
      return a.forMs;
    default:
      return 100;
  }
}

function shuffle<T>(rng: Rng, a: readonly T[]): T[] {
  const out = [...a];
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A few lines saying what a schedule does (for reports and the corpus). */
export function summarize(s: Schedule): string[] {
  const lines = [
    `schedule ${s.seed}:${s.index} on ${s.cluster !== undefined ? `${s.cluster.nodes} nodes and ${s.cluster.natsServers} NATS server(s), ` : ''}${s.storage} storage, tenant ${s.tenant}, ${s.durationMs} ms of faults, topics ${s.topics.join(' ')}` +
      (Object.keys(s.settings).length > 0 ? `, settings ${JSON.stringify(s.settings)}` : ''),
  ];
  for (const c of s.clients) {
    const kind = c.persistent ? (c.version === 5 ? `persistent (expiry ${c.expirySeconds} s)` : 'persistent') : 'clean';
    const subs = c.subscriptions.map((x) => `${x.filter} q${x.qos}${x.noLocal ? ' no-local' : ''}`).join(', ');
    const pub = c.publish ? ` publishes ${c.publish.topics.join(' ')} qos ${c.publish.qos.join('/')} window ${c.publish.window}` : '';
    const rm = c.receiveMaximum !== undefined ? ` receive-max ${c.receiveMaximum}` : '';
    const will = c.will !== undefined ? ` with a will (delay ${c.will.delaySeconds} s, session expiry ${c.expirySeconds} s)` : '';
    const at = s.cluster !== undefined ? ` on node ${c.node}` : '';
    lines.push(`  ${c.name}: v${c.version === 5 ? '5' : '3.1.1'} ${kind}${rm}${subs ? ` subscribes ${subs}` : ''}${pub}${will}${at}`);
  }
  for (const a of s.actions) lines.push(`  @${a.at} ms ${a.client} ${describeAction(a)}`);
  for (const a of s.nodeActions) lines.push(`  @${a.at} ms ${describeNodeAction(a)}`);
  return lines;
}

export function describeNodeAction(a: NodeAction): string {
  switch (a.kind) {
    case 'kill':
      return `node ${a.node} kill -9, down ${a.downMs} ms`;
    case 'storage-fail':
      return `node ${a.node} storage writes fail for ${a.forMs} ms`;
    case 'storage-lose':
      return `node ${a.node} inbox appends lost for ${a.forMs} ms`;
    case 'pause':
      return `node ${a.node} paused (SIGSTOP) for ${a.forMs} ms`;
    case 'partition':
      return `node ${a.node} cut off from NATS for ${a.forMs} ms`;
    case 'nats-kill':
      return `NATS server ${a.server} kill -9, down ${a.downMs} ms`;
    case 'nats-restart':
      return `every NATS server kill -9, down ${a.downMs} ms`;
  }
}

export function describeAction(a: ClientAction): string {
  switch (a.kind) {
    case 'disconnect':
    case 'drop':
      return `${a.kind}, back after ${a.offMs} ms`;
    case 'expire':
      return `expire (${a.how}), back after ${a.offMs} ms`;
    case 'slow':
      return `slow for ${a.forMs} ms`;
    case 'unsubscribe':
      return `unsubscribe ${a.filter}`;
    case 'subscribe':
      return `subscribe ${a.sub.filter} q${a.sub.qos}`;
    default:
      return a.kind;
  }
}
