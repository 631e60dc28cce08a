import type { BrokerEvent, ClientEvent, ClientRecord, NodeEvent, Problem, QoS, RunRecord, SubSpec } from './model';
import { parseFilter, topicMatches } from './model';

/** A cluster node's lease (docs/cluster.md § Leases). */
const LEASE_MS = 7000;

/**
 * The invariants, checked over what the clients recorded (and the drop events the broker
 * reported). Times are the clients' own (one process, one clock): a SUBACK received before a
 * PUBLISH was sent was in force when the broker routed it; an UNSUBSCRIBE sent after a PUBACK
 * arrived came after the routing.
 *
 * 1. An acknowledged QoS 1/2 message reaches every persistent session that had a matching
 *    subscription with granted QoS ≥ 1 (SUBACK before the PUBLISH was sent, no UNSUBSCRIBE of it
 *    sent before the acknowledgement), did not end, and was resumed in the drain; a shared group
 *    of persistent members: at least one member. QoS 2 (delivered at QoS 2): once per session
 *    (per group).
 * 2. Per session, publisher connection, topic and delivery QoS, first receipts of PUBLISH come in
 *    publishing order (ordinary subscriptions and $oshare; not $share).
 * 3. Nothing reaches a session through a filter it had unsubscribed (UNSUBACK before the PUBLISH
 *    was sent), from before the session existed, or back to a No Local subscriber.
 * 4. A persistent session misses at most as many messages as the broker reported dropped for it.
 * 5. (Kill -9) is 1 across restarts: acknowledged before the kill is acknowledged.
 * And a persistent session is not lost before its expiry, nor kept well past it.
 */

export interface Message {
  readonly key: string;
  readonly publisher: string;
  readonly seq: number;
  readonly topic: string;
  readonly qos: QoS;
  /** The publisher's connection that sent it. */
  readonly conn: number;
  readonly sentAt: number;
  ackAt?: number;
  /** Reason code of the first acknowledgement. */
  ackReason?: number;
}

interface Interval {
  readonly filter: string;
  readonly qos: number;
  readonly noLocal: boolean;
  readonly start: number;
  end: number;
  /** The SUBSCRIBE that opened it (operations are numbered in sending order). */
  readonly op?: number;
}

type Recv = Extract<ClientEvent, { type: 'recv' }>;
type Deliver = Extract<ClientEvent, { type: 'deliver' }>;

/** One session of a client: from a CONNACK that started it to the one that started the next. */
export interface Incarnation {
  readonly client: ClientRecord;
  readonly n: number;
  readonly start: number;
  readonly conns: Set<number>;
  /** Subscriptions surely in force: from SUBACK (granted < 0x80) to the UNSUBSCRIBE sent. */
  readonly sure: Interval[];
  /** Subscriptions possibly in force: from SUBSCRIBE sent to UNSUBACK received. */
  readonly maybe: Interval[];
  readonly recv: Recv[];
  readonly deliver: Deliver[];
  /** Its connections: CONNECT sent, CONNACK, the client starting to leave, close. */
  readonly online: { conn: number; connect: number; from: number; leave: number; to: number }[];
  /** Persistent, the client's last session, and resumed (CONNACK) in the drain. */
  survives: boolean;
}

export interface CheckStats {
  published: number;
  publishedByQos: [number, number, number];
  acknowledged: number;
  refused: number;
  delivered: number;
  /** (session or group, message) pairs the invariants required. */
  required: number;
  /** Required but missing, within the drops the broker reported. */
  excusedByDrops: number;
  dropsReported: number;
  /** Acknowledged QoS 1/2 messages a session (a group) was owed and never got, beyond reported drops. */
  lost: number;
  /** Owed and not delivered when the drain ended at its bound with deliveries still arriving (not counted as lost). */
  undrained: number;
  /** Deliveries of a QoS 1/2 message to a session beyond its first (QoS 1 may repeat; QoS 2 may not). */
  duplicates: number;
  /**
   * Unavailability, ms of the fault phase and the settle: the union of the times some client
   * wanted a connection and had no CONNACK (from a connection lost without the client leaving, or
   * from a failed attempt, to the next CONNACK) and the times a publisher's QoS 1/2 publishes were
   * refused (from a refusal to its next acceptance).
   */
  unavailableMs: number;
  /** Wills due (cluster will clients), and wills the watcher received. */
  willsDue: number;
  willsReceived: number;
}

export interface CheckResult {
  readonly problems: Problem[];
  readonly stats: CheckStats;
  /** Required deliveries (and due wills) still missing beyond the reported drops (the drain waits for 0). */
  readonly outstanding: number;
  /** Due wills not received yet (the drain waits for them longer than for quiet). */
  readonly willsOutstanding: number;
}

const DROP_TYPES = new Set(['qos1Dropped', 'qos2Dropped']);
/**
 * The broker's event log is written asynchronously: a `kill -9` loses the lines of the last few
 * milliseconds, while the PUBACKs of the same moment may have gone out. A drop is taken as
 * unlogged only for a message acknowledged this close before a kill, to a session whose drops
 * were being reported just before it (its queue bound was in effect).
 */
const UNLOGGED_BEFORE_KILL_MS = 20;
const DROPPING_BEFORE_KILL_MS = 100;
/** Driver faults after which the client's connection is going away. */
const LEAVING = new Set(['disconnect', 'drop', 'expire-disconnect', 'expire-drop', 'drain', 'takeover']);
/** Expiry is checked with this much slack (the broker's timer wheel, process scheduling). */
const EXPIRY_EARLY_SLACK_MS = 500;
const EXPIRY_LATE_SLACK_MS = 2000;
const MAX_LISTED = 5;
/** The key of a will payload (`will|<client>|<connection>`, not a message of the schedule). */
const WILL_KEY = '?will|';
/**
 * One owner per session, seen by a client: a PUBLISH read on an older connection this long after
 * a newer connection's CONNACK was read. The client reads both sockets in one event loop: bytes
 * the old node wrote before it let go may be read just after the new CONNACK.
 */
export const CLIENT_OWNER_SLACK_MS = 100;
/**
 * One owner per session, seen by the nodes: a node's events are stamped when emitted, a
 * disconnect's when the socket closed, which may be a little after the node let the session go.
 */
export const NODE_OWNER_SLACK_MS = 100;
/** A session that received something this close to the end of the run was still being delivered to. */
const FLOWING_AT_END_MS = 2000;
/** A will after a DISCONNECT the client sent is allowed this close to a cluster fault (the node may never have read it). */
const BYE_FAULT_MS = 12_000;
/** Node events of a cluster fault: start and end. */
const FAULT_START = new Set<NodeEvent['type']>(['kill', 'pause', 'partition', 'nats-kill', 'nats-restart']);
const FAULT_END = new Set<NodeEvent['type']>(['restart', 'resume', 'heal', 'nats-up']);
/** Broker event groups: a client connected to a node, and one of the ways it left it. */
const CONNECTED_GROUP = 'clientConnected';
const DISCONNECTED_GROUP = 'clientDisconnected';
/** A session that received something this close to the drain was not stalled. */
const STILL_MS = 900;

/** Stats with every count at zero (a run's before it is checked, a campaign's before any run). */
export function emptyStats(): CheckStats {
  return {
    published: 0,
    publishedByQos: [0, 0, 0],
    acknowledged: 0,
    refused: 0,
    delivered: 0,
    required: 0,
    excusedByDrops: 0,
    dropsReported: 0,
    lost: 0,
    undrained: 0,
    duplicates: 0,
    unavailableMs: 0,
    willsDue: 0,
    willsReceived: 0,
  };
}

export function checkRun(run: RunRecord): CheckResult {
  return new Checker(run).check();
}

class Checker {
  readonly problems: Problem[] = [];
  readonly messages = new Map<string, Message>();
  readonly incarnations: Incarnation[] = [];
  readonly byClient = new Map<string, Incarnation[]>();
  readonly stats: CheckStats = emptyStats();
  outstanding = 0;
  willsOutstanding = 0;

  constructor(readonly run: RunRecord) {}

  check(): CheckResult {
    this.collectMessages();
    for (const c of this.run.clients) this.buildIncarnations(c);
    this.checkReceipts();
    this.checkDuplicates();
    this.checkRequired();
    this.countDuplicates();
    if (this.run.schedule.cluster !== undefined) {
      this.checkClientOwners();
      this.checkNodeOwners();
      this.checkWills();
      this.stats.unavailableMs = unavailableMs(this.run);
    }
    return { problems: this.problems, stats: this.stats, outstanding: this.outstanding, willsOutstanding: this.willsOutstanding };
  }

  private rel(t: number | undefined): string {
    return t === undefined ? '-' : `+${(t - this.run.t0).toFixed(1)} ms`;
  }

  private describeMessage(m: Message): string {
    const ack =
      m.ackAt !== undefined
        ? `${m.qos === 1 ? 'PUBACK' : 'PUBREC'} 0x${(m.ackReason ?? 0).toString(16).padStart(2, '0')} at ${this.rel(m.ackAt)}`
        : m.ackReason !== undefined
          ? `refused 0x${m.ackReason.toString(16)}`
          : 'not acknowledged';
    return `message ${m.key} (topic ${m.topic}, QoS ${m.qos}) sent by ${m.publisher} on connection ${m.conn} at ${this.rel(m.sentAt)}, ${ack}`;
  }

  private describeSession(inc: Incarnation): string {
    const s = inc.client.spec;
    const kind = s.persistent
      ? s.version === 5
        ? `v5 persistent, expiry ${s.expirySeconds} s`
        : 'v3.1.1 persistent'
      : `v${s.version === 5 ? 5 : '3.1.1'} clean`;
    const subs = inc.maybe.map(
      (iv) => `${iv.filter} q${iv.qos}${iv.noLocal ? ' nl' : ''} [${this.rel(iv.start)}..${iv.end === Infinity ? '' : this.rel(iv.end)}]`,
    );
    return `session ${s.name} #${inc.n} (${kind}; started ${this.rel(inc.start)}; connections ${[...inc.conns].join(',')}; subscriptions ${subs.join(', ') || 'none'})`;
  }

  /** What the session's client saw between `from` and `to`, and the node faults then. */
  private around(inc: Incarnation, from: number, to: number, m?: Message): string[] {
    const lines: string[] = [];
    const seen = inc.client.events
      .filter((e) => e.t >= from && e.t <= to && e.type !== 'recv' && e.type !== 'deliver')
      .map((e) => `  ${this.rel(e.t)} ${inc.client.spec.name} ${describeEvent(e)}`);
    lines.push(...seen.slice(0, 20));
    if (seen.length > 20) lines.push(`  ... ${seen.length - 20} more events`);
    if (m !== undefined) {
      // First receipts of the same publisher and topic around it.
      const near = inc.recv
        .map((r) => ({ r, msg: this.messages.get(r.msg) }))
        .filter(
          (x) => x.msg !== undefined && x.msg.publisher === m.publisher && x.msg.topic === m.topic && Math.abs(x.msg.seq - m.seq) <= 8,
        )
        .map((x) => `${x.msg!.seq}${x.r.dup ? 'd' : ''}@c${x.r.conn}`);
      lines.push(`  ${inc.client.spec.name} received ${m.publisher}'s ${m.topic} seqs near ${m.seq}: ${near.join(' ') || 'none'}`);
    }
    for (const n of this.run.nodes.filter((n) => n.t >= from - 1000 && n.t <= to + 1000))
      lines.push(`  ${this.rel(n.t)} node ${n.node} ${n.type}`);
    return lines;
  }

  private collectMessages(): void {
    for (const c of this.run.clients) {
      if (c.spec.publish === undefined) continue;
      for (const e of c.events) {
        if (e.type === 'publish' && !this.messages.has(e.msg)) {
          const [publisher, seq] = splitKey(e.msg);
          this.messages.set(e.msg, { key: e.msg, publisher, seq, topic: e.topic, qos: e.qos, conn: e.conn, sentAt: e.t });
          this.stats.published++;
          this.stats.publishedByQos[e.qos]++;
        } else if (e.type === 'ack') {
          const m = this.messages.get(e.msg);
          if (m === undefined || m.ackReason !== undefined) continue;
          m.ackReason = e.reason;
          if (e.reason < 0x80) {
            m.ackAt = e.t;
            this.stats.acknowledged++;
          } else this.stats.refused++;
        }
      }
    }
  }

  private buildIncarnations(c: ClientRecord): void {
    const spec = c.spec;
    const list: Incarnation[] = [];
    this.byClient.set(spec.name, list);
    const connInc = new Map<number, Incarnation>();
    const connectAt = new Map<number, number>();
    const openConns = new Set<number>();
    let lastClose = -Infinity;
    const ops = new Map<number, { inc: Incarnation; subs: readonly SubSpec[]; filters: readonly string[]; t: number }>();
    /** When an UNSUBSCRIBE of a filter was last sent. */
    const unsubscribed = new Map<string, number>();
    let cur: Incarnation | undefined;
    let drainConnack = false;
    for (const e of c.events) {
      switch (e.type) {
        case 'connect':
          connectAt.set(e.conn, e.t);
          break;
        case 'connack': {
          if (e.reason !== 0) break;
          const at = connectAt.get(e.conn) ?? e.t;
          if (cur !== undefined && spec.persistent) this.checkContinuity(c, cur, e, at, openConns, lastClose);
          if (!spec.persistent || !e.sessionPresent || cur === undefined) {
            if (spec.persistent && e.sessionPresent && cur === undefined)
              this.problems.push({
                kind: 'session-present',
                summary: `${spec.name}: Session Present 1 on its first connection (a new client id)`,
                details: [`  ${this.rel(e.t)} connection ${e.conn}`],
              });
            cur = {
              client: c,
              n: list.length + 1,
              start: e.t,
              conns: new Set(),
              sure: [],
              maybe: [],
              recv: [],
              deliver: [],
              online: [],
              survives: false,
            };
            list.push(cur);
            this.incarnations.push(cur);
          }
          cur.conns.add(e.conn);
          cur.online.push({ conn: e.conn, connect: at, from: e.t, leave: Infinity, to: Infinity });
          connInc.set(e.conn, cur);
          openConns.add(e.conn);
          if (e.t >= this.run.drainStart) drainConnack = true;
          break;
        }
        case 'close': {
          if (openConns.delete(e.conn)) lastClose = e.t;
          const span = connInc.get(e.conn)?.online.find((o) => o.conn === e.conn && o.to === Infinity);
          if (span !== undefined) {
            span.to = e.t;
            span.leave = Math.min(span.leave, e.t);
          }
          break;
        }
        case 'fault': {
          const span = connInc.get(e.conn)?.online.find((o) => o.conn === e.conn && o.to === Infinity);
          if (span !== undefined && LEAVING.has(e.fault)) span.leave = Math.min(span.leave, e.t);
          break;
        }
        case 'subscribe': {
          const inc = connInc.get(e.conn);
          if (inc === undefined) break;
          for (const s of e.subs) inc.maybe.push({ filter: s.filter, qos: s.qos, noLocal: s.noLocal, start: e.t, end: Infinity, op: e.op });
          ops.set(e.op, { inc, subs: e.subs, filters: e.subs.map((s) => s.filter), t: e.t });
          break;
        }
        case 'suback': {
          const op = ops.get(e.op);
          if (op === undefined) break;
          op.subs.forEach((s, i) => {
            const g = e.granted[i] ?? 0x80;
            if (g >= 0x80) return;
            // An UNSUBSCRIBE sent after this SUBSCRIBE and before its SUBACK: the subscription may be gone already.
            if ((unsubscribed.get(s.filter) ?? -Infinity) > op.t) return;
            // The same filter again replaces the subscription.
            for (const iv of op.inc.sure) if (iv.filter === s.filter && iv.end === Infinity) iv.end = e.t;
            op.inc.sure.push({ filter: s.filter, qos: g, noLocal: s.noLocal, start: e.t, end: Infinity });
          });
          break;
        }
        case 'unsubscribe': {
          const inc = connInc.get(e.conn);
          if (inc === undefined) break;
          for (const iv of inc.sure) if (e.filters.includes(iv.filter) && iv.end === Infinity) iv.end = e.t;
          for (const f of e.filters) unsubscribed.set(f, e.t);
          ops.set(e.op, { inc, subs: [], filters: e.filters, t: e.t });
          break;
        }
        case 'unsuback': {
          const op = ops.get(e.op);
          if (op === undefined) break;
          // A refused UNSUBSCRIBE (0x80 and above) leaves the subscription. It ends only what was
          // subscribed before it was sent: the broker handles a connection's packets in order, so a
          // SUBSCRIBE of the same filter sent after it subscribes again, whenever the acks come.
          const gone = op.filters.filter((_, i) => (e.reasons[i] ?? 0) < 0x80);
          for (const iv of op.inc.maybe)
            if (gone.includes(iv.filter) && iv.end === Infinity && (iv.op === undefined || iv.op < e.op) && iv.start < e.t) iv.end = e.t;
          break;
        }
        case 'recv':
          connInc.get(e.conn)?.recv.push(e);
          break;
        case 'deliver': {
          const inc = connInc.get(e.conn);
          if (inc !== undefined) {
            inc.deliver.push(e);
            this.stats.delivered++;
          }
          break;
        }
        default:
          break;
      }
    }
    if (cur !== undefined && spec.persistent && drainConnack && list[list.length - 1] === cur) {
      // Resumed in the drain: the last CONNACK belongs to it.
      cur.survives = [...cur.conns].some((conn) => {
        const ack = c.events.find((e) => e.type === 'connack' && e.conn === conn && e.reason === 0);
        return ack !== undefined && ack.t >= this.run.drainStart;
      });
    }
    if (spec.persistent && this.run.drainStart > 0 && this.run.end > this.run.drainStart && !drainConnack)
      this.problems.push({
        kind: 'drain',
        summary: `${spec.name}: could not reconnect in the drain`,
        details: c.events
          .filter((e) => e.t >= this.run.drainStart)
          .slice(0, 10)
          .map((e) => `  ${this.rel(e.t)} ${describeEvent(e)}`),
      });
  }

  /** A persistent session's resume: Session Present must agree with its expiry. */
  private checkContinuity(
    c: ClientRecord,
    cur: Incarnation,
    ack: Extract<ClientEvent, { type: 'connack' }>,
    connectAt: number,
    openConns: Set<number>,
    lastClose: number,
  ): void {
    const spec = c.spec;
    const expiryMs = spec.version === 5 ? spec.expirySeconds * 1000 : Infinity;
    const stillOpen = [...openConns].some((conn) => cur.conns.has(conn));
    // A CONNECT sent to a paused node reaches the broker when the node resumes (the kernel only queued it).
    const connect = c.events.find((e) => e.type === 'connect' && e.conn === ack.conn);
    const arrived = this.resumedAfter(connect?.type === 'connect' ? (connect.node ?? spec.node) : spec.node, connectAt);
    const offline = stillOpen ? 0 : arrived - lastClose;
    const node = spec.node;
    if (!ack.sessionPresent && offline < expiryMs - EXPIRY_EARLY_SLACK_MS && !this.nodeLostWhileOpen(c, cur, lastClose)) {
      this.problems.push({
        kind: 'session-lost',
        summary:
          `${spec.name}: Session Present 0 after ${stillOpen ? 'a takeover (the session was connected)' : `${offline.toFixed(0)} ms offline`}, ` +
          `below its expiry of ${spec.version === 5 ? `${spec.expirySeconds} s` : 'MaxSessionExpirySeconds'}: the session was lost`,
        details: [this.describeSession(cur), ...this.around(cur, Math.min(lastClose, connectAt) - 500, ack.t + 200)],
      });
      return;
    }
    if (ack.sessionPresent && !stillOpen && expiryMs !== Infinity) {
      const restart = this.lastNodeEvent(node, 'restart', connectAt);
      const from = Math.max(lastClose, restart ?? -Infinity);
      const late = connectAt - from - expiryMs;
      const killed =
        this.run.nodes.some((n) => n.node === node && n.type === 'kill' && n.t >= lastClose && n.t <= connectAt) ||
        // A cluster fault: the session's owner may have had no lease (paused, cut off) and nobody ran its expiry meanwhile.
        (this.run.schedule.cluster !== undefined &&
          this.faultSpans().some(([from, to]) => from <= connectAt && to >= lastClose - LEASE_MS));
      const storageFault = this.storageFaultBetween(node, from + expiryMs - 1000, connectAt);
      if (late > EXPIRY_LATE_SLACK_MS && !killed && !storageFault)
        this.problems.push({
          kind: 'session-outlived',
          summary: `${spec.name}: Session Present 1 after ${(connectAt - from).toFixed(0)} ms offline, ${late.toFixed(0)} ms past its expiry of ${spec.expirySeconds} s`,
          details: [this.describeSession(cur), ...this.around(cur, lastClose - 200, ack.t + 200)],
        });
    }
  }

  /**
   * Cluster: the node of the session's last connection was paused, cut off or killed while that
   * connection was open. The cluster then took the session for disconnected (its node's lease
   * lapsed, or it was declared departed and the session adopted) well before the client saw its
   * connection close, and the session's expiry ran from then: the client's own offline time says
   * nothing about it.
   */
  private nodeLostWhileOpen(c: ClientRecord, cur: Incarnation, lastClose: number): boolean {
    if (this.run.schedule.cluster === undefined) return false;
    const span = cur.online.find((o) => o.to === lastClose);
    if (span === undefined) return false;
    const connect = c.events.find((e) => e.type === 'connect' && e.conn === span.conn);
    const node = connect?.type === 'connect' ? connect.node : undefined;
    return this.run.nodes.some(
      (n) => n.node === node && (n.type === 'pause' || n.type === 'partition' || n.type === 'kill') && n.t >= span.from && n.t <= span.to,
    );
  }

  /** `t`, or when node `node` was paused at `t`, the time it resumed. */
  private resumedAfter(node: number, t: number): number {
    let pausedAt: number | undefined;
    for (const n of this.run.nodes) {
      if (n.node !== node) continue;
      if (n.type === 'pause' && n.t <= t) pausedAt = n.t;
      else if (n.type === 'resume' && pausedAt !== undefined) {
        if (n.t >= t) return n.t;
        pausedAt = undefined;
      }
    }
    return t;
  }

  private lastNodeEvent(node: number, type: NodeEvent['type'], before: number): number | undefined {
    let t: number | undefined;
    for (const n of this.run.nodes) if (n.node === node && n.type === type && n.t <= before) t = n.t;
    return t;
  }

  private storageFaultBetween(node: number, from: number, to: number): boolean {
    let failingSince: number | undefined;
    for (const n of this.run.nodes) {
      if (n.node !== node) continue;
      if (n.type === 'storage-fail') failingSince = n.t;
      if (n.type === 'storage-ok' && failingSince !== undefined) {
        if (failingSince <= to && n.t >= from) return true;
        failingSince = undefined;
      }
    }
    return failingSince !== undefined && failingSince <= to;
  }

  /** Invariants 2 and 3, and the topic and QoS of each receipt. */
  private checkReceipts(): void {
    for (const inc of this.incarnations) {
      const name = inc.client.spec.name;
      const firsts = new Set<string>();
      const lastSeq = new Map<string, { seq: number; r: Recv }>();
      const inversions = new Map<string, { m: Message; r: Recv; prev: Message; prevRecv: Recv }[]>();
      // One problem per kind and session: the first case in detail, and how many there were.
      const grouped = new Map<string, { p: Problem; n: number }>();
      const add = (p: Problem): void => {
        const g = grouped.get(p.kind);
        if (g === undefined) grouped.set(p.kind, { p, n: 1 });
        else g.n++;
      };
      for (const r of inc.recv) {
        // Wills (cluster schedules) are checked on their own.
        if (r.msg.startsWith(WILL_KEY)) continue;
        const m = this.messages.get(r.msg);
        if (m === undefined) {
          add({
            kind: 'wrong-topic',
            summary: `${name}: received a PUBLISH that is no message of this schedule (${r.msg})`,
            details: [this.describeSession(inc), `  ${this.rel(r.t)} on connection ${r.conn}, topic ${r.topic}`],
          });
          continue;
        }
        if (r.topic !== m.topic)
          add({
            kind: 'wrong-topic',
            summary: `${name}: ${m.key} arrived with topic ${r.topic}, published to ${m.topic}`,
            details: [this.describeMessage(m), this.describeSession(inc)],
          });
        const windowEnd = m.ackAt ?? r.t;
        const possible = inc.maybe.filter((iv) => topicMatches(iv.filter, m.topic) && iv.start <= windowEnd && iv.end >= m.sentAt);
        if (possible.length === 0) {
          const ended = inc.maybe.filter((iv) => topicMatches(iv.filter, m.topic) && iv.end < m.sentAt);
          const before = m.sentAt < inc.start;
          add({
            kind: before ? 'before-session' : 'after-unsubscribe',
            summary: before
              ? `${name}: session #${inc.n} (started ${this.rel(inc.start)}) received ${m.key}, published at ${this.rel(m.sentAt)} before the session existed`
              : ended.length > 0
                ? `${name}: received ${m.key} through ${ended.map((iv) => iv.filter).join(', ')}, unsubscribed (UNSUBACK at ${this.rel(ended[0]!.end)}) before it was published`
                : `${name}: received ${m.key} without a subscription matching ${m.topic} when it was published`,
            details: [
              this.describeMessage(m),
              this.describeSession(inc),
              `  received at ${this.rel(r.t)} on connection ${r.conn} (QoS ${r.qos}${r.dup ? ', DUP' : ''}, packet id ${r.packetId})`,
              ...this.around(inc, m.sentAt - 300, r.t + 100),
            ],
          });
        } else {
          if (m.publisher === name && possible.every((iv) => iv.noLocal))
            add({
              kind: 'no-local',
              summary: `${name}: received its own ${m.key} through No Local subscription ${possible.map((iv) => iv.filter).join(', ')}`,
              details: [this.describeMessage(m), this.describeSession(inc), `  received at ${this.rel(r.t)} on connection ${r.conn}`],
            });
          const most = Math.min(m.qos, Math.max(...possible.map((iv) => iv.qos)));
          if (r.qos > most)
            add({
              kind: 'wrong-qos',
              summary: `${name}: ${m.key} (QoS ${m.qos}) delivered at QoS ${r.qos}, above min(message QoS, granted QoS) = ${most}`,
              details: [this.describeMessage(m), this.describeSession(inc)],
            });
        }
        // Order of first receipts, except through $share only.
        if (firsts.has(m.key)) continue;
        firsts.add(m.key);
        if (!inc.maybe.some((iv) => parseFilter(iv.filter).share !== '$share' && topicMatches(iv.filter, m.topic))) continue;
        const key = `${m.publisher}#${m.conn}|${m.topic}|${r.qos}`;
        const last = lastSeq.get(key);
        if (last !== undefined && m.seq < last.seq) {
          const list = inversions.get(key) ?? [];
          list.push({ m, r, prev: this.messages.get(`${m.publisher}:${last.seq}`)!, prevRecv: last.r });
          inversions.set(key, list);
        }
        if (last === undefined || m.seq > last.seq) lastSeq.set(key, { seq: m.seq, r });
      }
      for (const { p, n } of grouped.values())
        this.problems.push(n === 1 ? p : { ...p, summary: `${p.summary} (and ${n - 1} more like it)` });
      for (const list of inversions.values()) this.reportOrder(inc, list);
    }
  }

  /** One problem per session and (publisher connection, topic, delivery QoS): the first inversion, and how many. */
  private reportOrder(inc: Incarnation, list: { m: Message; r: Recv; prev: Message; prevRecv: Recv }[]): void {
    const { m, r, prev, prevRecv } = list[0]!;
    const name = inc.client.spec.name;
    // Whether the late message was published while the session was offline (before the CONNACK of
    // the connection the earlier one arrived on): queued, then overtaken.
    const span = (conn: number): { from: number } => inc.online.find((o) => o.conn === conn) ?? { from: -Infinity };
    const offline = (x: { m: Message; prevRecv: Recv }): string =>
      x.m.sentAt < span(x.prevRecv.conn).from ? ` before the CONNACK of connection ${x.prevRecv.conn}` : '';
    this.problems.push({
      kind: 'order',
      summary:
        `${name}: ${m.key} first arrived after ${prev.key} (${m.publisher}'s topic ${m.topic}, delivery QoS ${r.qos}): out of publishing order` +
        (list.length > 1 ? `; ${list.length} messages of this publisher, topic and QoS arrived after a later one` : ''),
      details: [
        this.describeMessage(m),
        this.describeMessage(prev),
        this.describeSession(inc),
        `  ${prev.key} first received at ${this.rel(prevRecv.t)} on connection ${prevRecv.conn}${prevRecv.dup ? ' (DUP)' : ''}; ${m.key} at ${this.rel(r.t)} on connection ${r.conn}${r.dup ? ' (DUP)' : ''}`,
        `  late ones: ${list
          .slice(0, 12)
          .map(
            (x) =>
              `${x.m.seq} (sent ${this.rel(x.m.sentAt)}${offline(x)}) after ${x.prev.seq} (sent ${this.rel(x.prev.sentAt)}, received on connection ${x.prevRecv.conn})`,
          )
          .join(', ')}${list.length > 12 ? ' …' : ''}`,
        ...this.around(inc, Math.min(prev.sentAt, m.sentAt) - 200, r.t + 100, m),
      ],
    });
  }

  /**
   * A QoS 2 message its publisher, a clean session, never got acknowledged: the client sends it
   * again on its next connection (MQTT.js does), which for the broker is a new message of a new
   * session. Exactly once holds within a session [MQTT-4.3.3]; a copy delivered from the first
   * attempt (a storage write after the delivery failed, or the connection died) and one from the
   * second are both right.
   */
  private resentAsNew(key: string): boolean {
    const m = this.messages.get(key);
    if (m === undefined || m.ackAt !== undefined) return false;
    const publisher = this.run.clients.find((c) => c.spec.name === m.publisher);
    return publisher !== undefined && !publisher.spec.persistent;
  }

  /** QoS 2 exactly once: per session, and per shared group. */
  private checkDuplicates(): void {
    for (const inc of this.incarnations) {
      const counts = new Map<string, Deliver[]>();
      // Wills are counted by the will check.
      for (const d of inc.deliver) if (d.qos === 2 && !d.msg.startsWith(WILL_KEY)) counts.set(d.msg, [...(counts.get(d.msg) ?? []), d]);
      const twice = [...counts].filter(([key, ds]) => ds.length > 1 && !this.resentAsNew(key));
      if (twice.length > 0) {
        const [key, ds] = twice[0]!;
        const m = this.messages.get(key);
        this.problems.push({
          kind: 'duplicate',
          summary:
            `${inc.client.spec.name}: QoS 2 message ${key} delivered ${ds.length} times to one session` +
            (twice.length > 1
              ? ` (${twice.length} QoS 2 messages more than once: ${twice
                  .slice(0, 8)
                  .map(([k]) => k)
                  .join(', ')}${twice.length > 8 ? ' …' : ''})`
              : ''),
          details: [
            ...(m ? [this.describeMessage(m)] : []),
            this.describeSession(inc),
            ...ds.map((d) => `  delivered at ${this.rel(d.t)} on connection ${d.conn}`),
            ...inc.recv
              .filter((r) => r.msg === key)
              .map((r) => `  PUBLISH received at ${this.rel(r.t)} on connection ${r.conn}${r.dup ? ' DUP' : ''} packet id ${r.packetId}`),
            ...(m ? this.around(inc, ds[0]!.t - 300, ds[ds.length - 1]!.t + 100) : []),
          ],
        });
      }
    }
    for (const [group, members] of this.groups()) {
      const seen = new Map<string, { inc: Incarnation; d: Deliver }[]>();
      for (const inc of members) for (const d of inc.deliver) if (d.qos === 2) seen.set(d.msg, [...(seen.get(d.msg) ?? []), { inc, d }]);
      for (const [key, ds] of seen) {
        const sessions = new Set(ds.map((x) => x.inc));
        if (sessions.size < 2 || this.resentAsNew(key)) continue; // one session twice is reported above
        this.problems.push({
          kind: 'duplicate',
          summary: `${group}: QoS 2 message ${key} delivered to ${sessions.size} members`,
          details: ds.map((x) => `  ${x.inc.client.spec.name} #${x.inc.n} at ${this.rel(x.d.t)} on connection ${x.d.conn}`),
        });
      }
    }
  }

  /** Shared groups (the whole `$share/g/filter`) and the incarnations that ever subscribed to each. */
  private groups(): Map<string, Incarnation[]> {
    const groups = new Map<string, Incarnation[]>();
    for (const inc of this.incarnations)
      for (const iv of inc.maybe) {
        if (parseFilter(iv.filter).share === undefined) continue;
        const list = groups.get(iv.filter) ?? [];
        if (!list.includes(inc)) list.push(inc);
        groups.set(iv.filter, list);
      }
    return groups;
  }

  /**
   * Missing messages whose drop may have gone unlogged: acknowledged within
   * {@link UNLOGGED_BEFORE_KILL_MS} before a kill of the node, while the broker was reporting
   * drops for the client.
   */
  private unloggedDrops(clientId: string, missing: readonly { m: Message }[]): number {
    const kills = this.run.nodes.filter((n) => n.type === 'kill');
    if (kills.length === 0) return 0;
    const dropTimes = this.run.broker.filter((e: BrokerEvent) => e.clientId === clientId && DROP_TYPES.has(e.type)).map((e) => e.eventTime);
    const dropping = kills.filter((k) => dropTimes.some((t) => t <= k.t && t >= k.t - DROPPING_BEFORE_KILL_MS));
    return missing.filter(({ m }) => dropping.some((k) => m.ackAt! <= k.t && m.ackAt! >= k.t - UNLOGGED_BEFORE_KILL_MS)).length;
  }

  /** Drops the broker reported for a client since `since`. */
  private drops(clientId: string, since: number): number {
    const dropOldest = this.run.schedule.settings.QoS0DropOldest === true;
    return this.run.broker.filter(
      (e: BrokerEvent) =>
        e.clientId === clientId && e.eventTime >= since - 1000 && (DROP_TYPES.has(e.type) || (dropOldest && e.type === 'qos0Dropped')),
    ).length;
  }

  /** Invariants 1 and 4. */
  private checkRequired(): void {
    const acked = [...this.messages.values()].filter((m) => m.ackAt !== undefined && m.qos > 0);
    for (const inc of this.incarnations) {
      if (!inc.survives) continue;
      const name = inc.client.spec.name;
      const delivered = new Set(inc.deliver.map((d) => d.msg));
      const missing: { m: Message; iv: Interval }[] = [];
      const required: Message[] = [];
      for (const m of acked) {
        const cover = inc.sure.find(
          (iv) =>
            parseFilter(iv.filter).share === undefined &&
            iv.qos >= 1 &&
            topicMatches(iv.filter, m.topic) &&
            iv.start < m.sentAt &&
            iv.end > m.ackAt! &&
            !(iv.noLocal && m.publisher === name),
        );
        if (cover === undefined) continue;
        this.stats.required++;
        required.push(m);
        if (!delivered.has(m.key)) missing.push({ m, iv: cover });
      }
      const reported = this.drops(inc.client.spec.clientId, inc.start);
      this.stats.dropsReported += reported;
      this.report(missing, reported + this.unloggedDrops(inc.client.spec.clientId, missing), [inc], `${name} #${inc.n}`);
      this.checkStalled(inc, required);
    }
    for (const [group, members] of this.groups()) {
      const filter = parseFilter(group).filter;
      const delivered = new Set(members.flatMap((inc) => inc.deliver.map((d) => d.msg)));
      const missing: { m: Message; iv: Interval; inc: Incarnation }[] = [];
      for (const m of acked) {
        if (!topicMatches(filter, m.topic)) continue;
        let cover: { iv: Interval; inc: Incarnation } | undefined;
        let excused = false;
        for (const inc of members) {
          for (const iv of inc.maybe)
            if (iv.filter === group && iv.start <= m.ackAt! && iv.end >= m.sentAt && (!inc.survives || !inc.client.spec.persistent))
              excused = true;
          const sure = inc.sure.find((iv) => iv.filter === group && iv.qos >= 1 && iv.start < m.sentAt && iv.end > m.ackAt!);
          if (sure !== undefined && inc.survives) cover ??= { iv: sure, inc };
        }
        if (cover === undefined || excused) continue;
        this.stats.required++;
        if (!delivered.has(m.key)) missing.push({ m, ...cover });
      }
      const allowance = members.reduce((n, inc) => n + this.drops(inc.client.spec.clientId, inc.start), 0);
      this.report(missing, allowance, members, `group ${group}`);
    }
  }

  /**
   * Liveness: a session connected (and reading) through the whole settle got no required message
   * it was owed from before the settle only after its reconnect in the drain.
   */
  private checkStalled(inc: Incarnation, required: readonly Message[]): void {
    const { settleStart, drainStart } = this.run;
    if (!(settleStart > 0 && drainStart > settleStart)) return;
    const span = inc.online.find((o) => o.from <= settleStart && o.leave >= drainStart);
    if (span === undefined) return;
    // Still receiving at the end of the settle (a backlog on its way): not stalled.
    if (inc.recv.some((r) => r.conn === span.conn && r.t >= drainStart - STILL_MS)) return;
    const first = new Map<string, Deliver>();
    for (const d of inc.deliver) if (!first.has(d.msg)) first.set(d.msg, d);
    const late = required.filter((m) => m.ackAt! < settleStart && (first.get(m.key)?.t ?? -Infinity) >= drainStart);
    if (late.length === 0) return;
    const m = late[0]!;
    const d = first.get(m.key)!;
    // Where the flow stopped on that connection, and the QoS 2 PUBLISH it got but never saw released.
    const delivered = inc.deliver.filter((x) => x.conn === span.conn);
    const last = delivered.length > 0 ? delivered[delivered.length - 1]! : undefined;
    const released = new Set(delivered.map((x) => x.msg));
    const unreleased = inc.recv.filter((r) => r.conn === span.conn && r.qos === 2 && !released.has(r.msg));
    const stop = last?.t ?? span.from;
    this.problems.push({
      kind: 'stalled',
      summary:
        `${inc.client.spec.name} #${inc.n}: ${late.length} acknowledged message(s) it was owed reached it only after its reconnect in the drain, ` +
        `although connection ${span.conn} stayed open through ${(drainStart - settleStart).toFixed(0)} ms of settle without a fault ` +
        `(e.g. ${late
          .slice(0, MAX_LISTED)
          .map((x) => x.key)
          .join(', ')})`,
      details: [
        this.describeMessage(m),
        this.describeSession(inc),
        `  settle ${this.rel(settleStart)} .. ${this.rel(drainStart)}; ${m.key} delivered at ${this.rel(d.t)} on connection ${d.conn}`,
        `  connection ${span.conn}: last delivery ${last !== undefined ? `${last.msg} at ${this.rel(last.t)}` : 'none'}, nothing after it for ${(drainStart - stop).toFixed(0)} ms` +
          (unreleased.length > 0
            ? `; QoS 2 PUBLISH received there and never released (no PUBREL): ${unreleased
                .slice(0, 8)
                .map((r) => `${r.msg} (id ${r.packetId}, ${this.rel(r.t)})`)
                .join(', ')}`
            : ''),
        ...this.around(inc, stop - 300, stop + 300),
        ...this.around(inc, settleStart - 500, drainStart + 500),
      ],
    });
  }

  /** QoS 1/2 deliveries beyond the first of a message to one session (the figures; QoS 2 ones are problems above). */
  private countDuplicates(): void {
    for (const inc of this.incarnations) {
      const seen = new Set<string>();
      for (const d of inc.deliver) {
        if (d.qos === 0 || d.msg.startsWith(WILL_KEY)) continue;
        if (seen.has(d.msg)) this.stats.duplicates++;
        else seen.add(d.msg);
      }
    }
  }

  /**
   * At most one node serves a session at any moment, seen by its client: once a newer connection
   * of a client id got its CONNACK, no PUBLISH arrives on an older one (after
   * {@link CLIENT_OWNER_SLACK_MS} for the client's own read order).
   */
  private checkClientOwners(): void {
    for (const c of this.run.clients) {
      const connack = new Map<number, number>();
      const nodeOf = new Map<number, number | undefined>();
      for (const e of c.events) {
        if (e.type === 'connect') nodeOf.set(e.conn, e.node);
        if (e.type === 'connack' && e.reason === 0 && !connack.has(e.conn)) connack.set(e.conn, e.t);
      }
      const late: { r: Recv; newer: number; at: number }[] = [];
      for (const e of c.events) {
        if (e.type !== 'recv') continue;
        let newer: { conn: number; at: number } | undefined;
        for (const [conn, at] of connack)
          if (conn > e.conn && at < e.t - CLIENT_OWNER_SLACK_MS && (newer === undefined || at < newer.at)) newer = { conn, at };
        if (newer !== undefined) late.push({ r: e, newer: newer.conn, at: newer.at });
      }
      if (late.length === 0) continue;
      const { r, newer, at } = late[0]!;
      const inc = this.incarnations.find((i) => i.client === c && i.conns.has(r.conn)) ?? this.incarnations.find((i) => i.client === c);
      this.problems.push({
        kind: 'two-owners',
        summary:
          `${c.spec.name}: PUBLISH ${r.msg} arrived on connection ${r.conn} (node ${nodeOf.get(r.conn) ?? '?'}) at ${this.rel(r.t)}, ` +
          `${(r.t - at).toFixed(0)} ms after connection ${newer} (node ${nodeOf.get(newer) ?? '?'}) got its CONNACK: two nodes served the session` +
          (late.length > 1 ? ` (${late.length} such PUBLISH)` : ''),
        details: inc !== undefined ? [this.describeSession(inc), ...this.around(inc, at - 2000, r.t + 200)] : [],
      });
    }
  }

  /**
   * At most one node serves a client id at any moment, seen by the nodes: per node, from its
   * `clientConnected` event until its connections of the client id are gone (a `clientDisconnected`
   * group event) or its lease ran out (its log says when), whichever is first; these intervals of
   * two nodes must not overlap by more than {@link NODE_OWNER_SLACK_MS}.
   */
  private checkNodeOwners(): void {
    const byClient = new Map<string, BrokerEvent[]>();
    const leases = this.run.broker.filter((e) => e.type === 'leaseLost');
    for (const e of this.run.broker) {
      if (e.clientId === undefined || (e.group !== CONNECTED_GROUP && e.group !== DISCONNECTED_GROUP)) continue;
      byClient.set(e.clientId, [...(byClient.get(e.clientId) ?? []), e]);
    }
    const unleased = unleasedSpans(this.run.broker, this.run.end);
    // A killed node serves nothing from its kill on, whatever it could not log.
    const kills = this.run.nodes
      .filter((n) => n.type === 'kill')
      .map((n): BrokerEvent => ({ node: n.node, type: 'killed', eventTime: n.t }));
    for (const [clientId, events] of byClient) {
      const spans = nodeSpans(events, [...leases, ...kills]);
      // A node serves a client only within its lease: no connection starts while it had run out.
      // The lease's lines are logged a moment after the lease changed: 100 ms of slack at both ends.
      const within = (x: NodeSpan, u: { node: number; from: number; to: number }): boolean =>
        u.node === x.node && x.from > u.from + NODE_OWNER_SLACK_MS && x.from < u.to - NODE_OWNER_SLACK_MS;
      const outside = spans.find((x) => unleased.some((u) => within(x, u)));
      if (outside !== undefined) {
        const u = unleased.find((v) => within(outside, v))!;
        this.problems.push({
          kind: 'lease',
          summary:
            `${clientId}: node ${outside.node} let it in at ${this.rel(outside.from)} without its lease ` +
            `(it ran out at ${this.rel(u.from)}, ${u.to === this.run.end ? 'not held again in the run' : `held again at ${this.rel(u.to)}`})`,
          details: events
            .filter((e) => e.eventTime >= u.from - 8000 && e.eventTime <= u.to + 1000)
            .slice(0, 20)
            .map((e) => `  ${this.rel(e.eventTime)} node ${e.node} ${e.type}`)
            .concat(this.run.nodes.map((n) => `  ${this.rel(n.t)} ${n.node >= 0 ? `node ${n.node}` : 'NATS'} ${n.type}`)),
        });
      }
      let found: { a: NodeSpan; b: NodeSpan } | undefined;
      for (const a of spans)
        for (const b of spans)
          if (found === undefined && a.node < b.node && Math.min(a.to, b.to) - Math.max(a.from, b.from) > NODE_OWNER_SLACK_MS)
            found = { a, b };
      if (found === undefined) continue;
      const { a, b } = found;
      const span = (x: NodeSpan): string =>
        `node ${x.node} from ${this.rel(x.from)} to ${x.to === Infinity ? 'the end' : this.rel(x.to)}${x.byLease ? ' (its lease ran out)' : ''}`;
      this.problems.push({
        kind: 'two-owners',
        summary: `${clientId}: served by two nodes at once for ${(Math.min(a.to, b.to) - Math.max(a.from, b.from)).toFixed(0)} ms: ${span(a)}, ${span(b)}`,
        details: events
          .filter((e) => e.eventTime >= Math.max(a.from, b.from) - 15_000 && e.eventTime <= Math.min(a.to, b.to) + 2000)
          .slice(0, 20)
          .map((e) => `  ${this.rel(e.eventTime)} node ${e.node} ${e.type}`)
          .concat(leases.map((l) => `  ${this.rel(l.eventTime)} node ${l.node} lease ran out`))
          .concat(this.run.nodes.map((n) => `  ${this.rel(n.t)} ${n.node >= 0 ? `node ${n.node}` : 'NATS'} ${n.type}`)),
      });
    }
  }

  /**
   * Wills once [MQTT-3.1.2-8, 3.1.2-10, 3.1.3-9]: a will client has one connection and never
   * resumes its session, so the will of a connection that ended without its DISCONNECT is
   * published exactly once (after its delay, or when its session ends, whichever is first); after
   * its DISCONNECT, never, unless a cluster fault was under way (the node may never have read it):
   * then at most once. The watcher (a persistent QoS 2 subscriber of `will/#`) counts them, and
   * the nodes' `willDistributed` events must name a client id at most once.
   */
  private checkWills(): void {
    const watcher = this.run.clients.find((c) => c.spec.subscriptions.some((s) => s.filter === 'will/#'));
    const received = new Map<string, { t: number; conn: number }[]>();
    for (const e of watcher?.events ?? [])
      if (e.type === 'deliver' && e.msg.startsWith(WILL_KEY))
        received.set(e.msg, [...(received.get(e.msg) ?? []), { t: e.t, conn: e.conn }]);
    const faults = this.faultSpans();
    for (const c of this.run.clients) {
      if (c.spec.will === undefined) continue;
      const name = c.spec.name;
      const acked = c.events.filter((e) => e.type === 'connack' && e.reason === 0).map((e) => e.conn);
      const wills = [...received].filter(([k]) => k.startsWith(`${WILL_KEY}${name}|`));
      const published = this.run.broker.filter((e) => e.type === 'willDistributed' && e.clientId === c.spec.clientId);
      const details = (): string[] => [
        ...c.events.map((e) => `  ${this.rel(e.t)} ${name} ${describeEvent(e)}`),
        ...wills.flatMap(([k, ds]) => ds.map((d) => `  ${this.rel(d.t)} watcher got ${k.slice(1)} on connection ${d.conn}`)),
        ...published.map((e) => `  ${this.rel(e.eventTime)} node ${e.node} willDistributed`),
        ...this.run.nodes.map((n) => `  ${this.rel(n.t)} ${n.node >= 0 ? `node ${n.node}` : 'NATS'} ${n.type}`),
      ];
      for (const [k, ds] of wills) {
        this.stats.willsReceived += ds.length;
        const conn = Number(k.slice(k.lastIndexOf('|') + 1));
        if (!acked.includes(conn))
          this.problems.push({
            kind: 'will',
            summary: `${name}: a will of connection ${conn}, which never got a CONNACK`,
            details: details(),
          });
        if (ds.length > 1)
          this.problems.push({
            kind: 'will',
            summary: `${name}: the will of connection ${conn} arrived ${ds.length} times`,
            details: details(),
          });
      }
      if (published.length > 1)
        this.problems.push({
          kind: 'will',
          summary: `${name}: the nodes published its will ${published.length} times (${published.map((e) => `node ${e.node}`).join(', ')})`,
          details: details(),
        });
      const conn = acked[0];
      if (conn === undefined) continue;
      const bye = c.events.find((e) => e.type === 'fault' && e.fault === 'bye' && e.conn === conn);
      const got = received.get(`${WILL_KEY}${name}|${conn}`)?.length ?? 0;
      if (bye === undefined) {
        this.stats.willsDue++;
        if (got === 0) {
          this.willsOutstanding++;
          this.outstanding++;
          this.problems.push({
            kind: 'will',
            summary:
              published.length > 0
                ? `${name}: connection ${conn} ended without DISCONNECT; node ${published[0]!.node} published its will (willDistributed) but it never reached the watcher's persistent QoS 2 subscription`
                : `${name}: connection ${conn} ended without DISCONNECT and its will was never published`,
            details: details(),
          });
        }
      } else if (got > 0 && !faults.some(([from, to]) => bye.t >= from - 1000 && bye.t <= to + BYE_FAULT_MS)) {
        this.problems.push({
          kind: 'will',
          summary: `${name}: its will was published although it sent DISCONNECT (at ${this.rel(bye.t)}) with no cluster fault near`,
          details: details(),
        });
      }
    }
  }

  /** The cluster faults of the run: [start, end] (an unfinished one ends at the end of the run). */
  private faultSpans(): [number, number][] {
    const spans: [number, number][] = [];
    const open: number[] = [];
    for (const n of this.run.nodes) {
      if (FAULT_START.has(n.type)) open.push(n.t);
      else if (FAULT_END.has(n.type) && open.length > 0) spans.push([open.shift()!, n.t]);
    }
    for (const t of open) spans.push([t, this.run.end]);
    return spans;
  }

  private report(
    missing: { m: Message; iv: Interval; inc?: Incarnation }[],
    allowance: number,
    sessions: Incarnation[],
    who: string,
  ): void {
    if (missing.length === 0) return;
    if (missing.length <= allowance) {
      this.stats.excusedByDrops += missing.length;
      return;
    }
    this.outstanding += missing.length - allowance;
    // Still receiving when the run ended (the drain stopped at its bound with a backlog flowing):
    // not delivered yet is no evidence of loss. Reported as a drain that did not finish.
    const flowing = this.run.drainCut === true && sessions.some((inc) => inc.recv.some((r) => r.t >= this.run.end - FLOWING_AT_END_MS));
    if (flowing) {
      this.stats.undrained += missing.length - allowance;
      this.problems.push({
        kind: 'drain',
        summary:
          `${who}: ${missing.length} acknowledged QoS 1/2 message(s) not delivered when the drain ended at its bound, ` +
          `while deliveries were still arriving (a backlog, not lost), e.g. ${missing
            .slice(0, MAX_LISTED)
            .map((x) => x.m.key)
            .join(', ')}`,
        details: sessions.map((inc) => this.describeSession(inc)),
      });
      return;
    }
    this.stats.lost += missing.length - allowance;
    const first = missing.slice(0, MAX_LISTED);
    const details: string[] = [];
    for (const { m, iv, inc } of first) {
      const session = inc ?? sessions[0]!;
      details.push(
        this.describeMessage(m),
        `  expected by ${session.client.spec.name} #${session.n} through ${iv.filter} (granted QoS ${iv.qos}, SUBACK at ${this.rel(iv.start)}${iv.end !== Infinity ? `, UNSUBSCRIBE at ${this.rel(iv.end)}` : ''})`,
        ...this.around(session, m.sentAt - 300, (m.ackAt ?? m.sentAt) + 300, m),
      );
    }
    for (const s of sessions) details.push(this.describeSession(s));
    const last = missing[missing.length - 1]!.m;
    this.problems.push({
      kind: 'lost',
      summary:
        `${who}: ${missing.length} acknowledged QoS 1/2 message(s) never delivered` +
        (allowance > 0 ? ` (the broker reported ${allowance} drop(s) for it)` : ' (no drop reported)') +
        `, e.g. ${first.map((x) => x.m.key).join(', ')}${missing.length > MAX_LISTED ? ` … ${last.key}` : ''}`,
      details,
      acks: missing.map((x) => x.m.ackAt!),
    });
  }
}

export interface NodeSpan {
  readonly node: number;
  readonly from: number;
  readonly to: number;
  /** It ended when the node's lease ran out. */
  readonly byLease: boolean;
}

/**
 * When each node served a client id: from a `clientConnected` event while it had no connection
 * of it, until it has none again (one `clientDisconnected`-group event per connection), or until
 * the node's lease ran out (`leaseLost` at the lease's end).
 */
export function nodeSpans(events: readonly BrokerEvent[], leases: readonly BrokerEvent[]): NodeSpan[] {
  const spans: NodeSpan[] = [];
  const nodes = new Set(events.map((e) => e.node));
  for (const node of nodes) {
    const mine = [...events.filter((e) => e.node === node), ...leases.filter((l) => l.node === node)].sort(
      (a, b) => a.eventTime - b.eventTime,
    );
    let open = 0;
    let from = 0;
    for (const e of mine) {
      if (e.type === 'leaseLost' || e.type === 'killed') {
        if (open > 0) spans.push({ node, from, to: e.eventTime, byLease: e.type === 'leaseLost' });
        open = 0;
      } else if (e.group === CONNECTED_GROUP) {
        if (open === 0) from = e.eventTime;
        open++;
      } else if (open > 0) {
        open--;
        if (open === 0) spans.push({ node, from, to: e.eventTime, byLease: false });
      }
    }
    if (open > 0) spans.push({ node, from, to: Infinity, byLease: false });
  }
  return spans;
}

/** Per node, when it had no lease: from a `leaseLost` (the lease's end) to the next `leaseHeld` (or `end`). */
export function unleasedSpans(broker: readonly BrokerEvent[], end: number): { node: number; from: number; to: number }[] {
  const spans: { node: number; from: number; to: number }[] = [];
  const open = new Map<number, number>();
  for (const e of [...broker].sort((a, b) => a.eventTime - b.eventTime)) {
    if (e.type === 'leaseLost' && !open.has(e.node)) open.set(e.node, e.eventTime);
    else if (e.type === 'leaseHeld' && open.has(e.node)) {
      spans.push({ node: e.node, from: open.get(e.node)!, to: e.eventTime });
      open.delete(e.node);
    }
  }
  for (const [node, from] of open) spans.push({ node, from, to: end });
  return spans;
}

/** See {@link CheckStats.unavailableMs}: over [t0, drainStart]. */
export function unavailableMs(run: RunRecord): number {
  const spans: [number, number][] = [];
  for (const c of run.clients) {
    let down: number | undefined;
    let current: number | undefined;
    let leaving = false;
    const wantsBack = c.spec.will === undefined;
    let refusedSince: number | undefined;
    for (const e of c.events) {
      switch (e.type) {
        case 'connack':
          if (e.reason === 0) {
            if (down !== undefined) spans.push([down, e.t]);
            down = undefined;
            current = e.conn;
            leaving = false;
          } else down ??= e.t;
          break;
        case 'connect-failed':
          down ??= e.t;
          break;
        case 'fault':
          if (LEAVING.has(e.fault) || e.fault === 'bye') leaving = true;
          break;
        case 'close':
          if (e.conn === current) {
            current = undefined;
            if (!leaving && wantsBack) down ??= e.t;
          }
          break;
        case 'ack':
          if (e.reason >= 0x80) refusedSince ??= e.t;
          else if (refusedSince !== undefined) {
            spans.push([refusedSince, e.t]);
            refusedSince = undefined;
          }
          break;
        default:
          break;
      }
    }
    if (down !== undefined) spans.push([down, run.drainStart]);
    if (refusedSince !== undefined) spans.push([refusedSince, run.drainStart]);
  }
  const clipped = spans
    .map(([a, b]): [number, number] => [Math.max(a, run.t0), Math.min(b, run.drainStart)])
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  let total = 0;
  let end = -Infinity;
  for (const [a, b] of clipped) {
    if (a > end) {
      total += b - a;
      end = b;
    } else if (b > end) {
      total += b - end;
      end = b;
    }
  }
  return total;
}

function splitKey(key: string): [string, number] {
  const i = key.lastIndexOf(':');
  return [key.slice(0, i), Number(key.slice(i + 1))];
}

export function describeEvent(e: ClientEvent): string {
  switch (e.type) {
    case 'connect':
      return `c${e.conn} CONNECT${e.clean ? ' clean' : ''}${e.node !== undefined ? ` to node ${e.node}` : ''}`;
    case 'connack':
      return `c${e.conn} CONNACK 0x${e.reason.toString(16)} session present ${e.sessionPresent ? 1 : 0}`;
    case 'connect-failed':
      return `c${e.conn} connect failed: ${e.error}`;
    case 'subscribe':
      return `c${e.conn} SUBSCRIBE ${e.subs.map((s) => `${s.filter} q${s.qos}`).join(', ')}`;
    case 'suback':
      return `c${e.conn} SUBACK ${e.granted.map((g) => `0x${g.toString(16)}`).join(',')}`;
    case 'unsubscribe':
      return `c${e.conn} UNSUBSCRIBE ${e.filters.join(', ')}`;
    case 'unsuback':
      return `c${e.conn} UNSUBACK ${e.reasons.map((g) => `0x${g.toString(16)}`).join(',')}`;
    case 'publish':
      return `c${e.conn} PUBLISH ${e.msg} q${e.qos} id ${e.packetId}`;
    case 'ack':
      return `c${e.conn} ${e.packet.toUpperCase()} ${e.msg} 0x${e.reason.toString(16)}`;
    case 'recv':
      return `c${e.conn} got PUBLISH ${e.msg} q${e.qos}${e.dup ? ' DUP' : ''} id ${e.packetId}`;
    case 'deliver':
      return `c${e.conn} delivered ${e.msg} q${e.qos}`;
    case 'pubrel':
      return `c${e.conn} got PUBREL id ${e.packetId}`;
    case 'fault':
      return `c${e.conn} ${e.fault}`;
    case 'server-disconnect':
      return `c${e.conn} DISCONNECT from the broker 0x${e.reason.toString(16)}`;
    case 'close':
      return `c${e.conn} closed`;
    case 'error':
      return `c${e.conn} error: ${e.message}`;
  }
}
