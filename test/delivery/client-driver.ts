import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { IPublishPacket, Packet } from 'mqtt-packet';
import { Rng } from '../support/fuzz';
import { now, sleep, within } from './clock';
import type { ClientAction, ClientEvent, ClientRecord, ClientSpec, QoS, SubSpec } from './model';
import { decodePayload, encodePayload, msgKey } from './model';
import type { Target } from './target';

/**
 * One MQTT client of a schedule, played by MQTT.js (reconnectPeriod 0: the driver reconnects),
 * recording every event it sees. A persistent client keeps one incoming store across its
 * connections, as a device keeps its QoS 2 state, so a QoS 2 message reaches it once even when
 * the broker resends PUBLISH or PUBREL on the next connection.
 */

/** MQTT.js closes its stores with the client: this one outlives each connection. */
class LastingStore extends mqtt.Store {
  override close(cb?: () => void): this {
    cb?.();
    return this;
  }
}

interface Conn {
  readonly id: number;
  readonly client: MqttClient;
  connected: boolean;
  closed: boolean;
  /** Outgoing packet id → message key (PUBLISH) or op number (SUBSCRIBE/UNSUBSCRIBE). */
  readonly pubIds: Map<number, string>;
  readonly subOps: Map<number, { op: number; filters: string[]; unsub: boolean }>;
  /** handleMessage callbacks held while the client is slow. */
  held: (() => void)[];
  readonly closedPromise: Promise<void>;
}

export interface DriverContext {
  readonly tenant: string;
  readonly target: Target;
  /** No connect attempt after this time (ms since the epoch). */
  readonly deadline: number;
}

const CONNECT_TIMEOUT_MS = 4000;
/**
 * On a cluster a CONNECT may wait for the session's previous owner: 3 s for its hand-over, then
 * until it has been silent 8 s (docs/cluster.md § Sessions). Devices wait longer than that before
 * they try another node.
 */
const CLUSTER_CONNECT_TIMEOUT_MS = 12_000;
const END_TIMEOUT_MS = 2000;
/** Bytes waiting in the socket above which a publisher waits. */
const WRITE_BACKLOG = 64 * 1024;

export class ClientDriver {
  readonly record: ClientRecord;
  private readonly store: LastingStore | undefined;
  private current: Conn | undefined;
  private readonly conns = new Set<Conn>();
  private connSeq = 0;
  private opSeq = 0;
  private wantOnline = false;
  private connecting: Promise<boolean> | undefined;
  /** Filters the client wants, those the current session has for sure, those it wants gone. */
  private readonly desired = new Map<string, SubSpec>();
  private readonly confirmed = new Set<string>();
  private readonly unsubPending = new Set<string>();
  private slow = false;
  /** The node it connects to next: its spec's, then the next one after each failed attempt (cluster). */
  private node: number;
  private readonly connectTimeoutMs: number;
  /** A will client had its one connection. */
  private hadConnack = false;
  // Publishing
  private publishing = false;
  private publishLoop: Promise<void> | undefined;
  private seq = 0;
  private readonly outstanding = new Map<string, number>();
  private wake: (() => void) | undefined;
  /** Messages published, and actions carried out by kind, for the figures. */
  published = 0;
  readonly faults = new Map<string, number>();

  constructor(
    readonly spec: ClientSpec,
    private readonly ctx: DriverContext,
  ) {
    this.record = { spec, events: [] };
    this.store = spec.persistent ? new LastingStore() : undefined;
    for (const s of spec.subscriptions) this.desired.set(s.filter, s);
    this.node = spec.node;
    this.connectTimeoutMs = ctx.target.nodeCount > 1 ? CLUSTER_CONNECT_TIMEOUT_MS : CONNECT_TIMEOUT_MS;
  }

  private push(e: ClientEvent): void {
    this.record.events.push(e);
  }

  private mark(fault: string): void {
    this.push({ t: now(), conn: this.current?.id ?? 0, type: 'fault', fault });
  }

  get online(): boolean {
    return this.current !== undefined;
  }

  /** Every filter it wants is confirmed by a SUBACK in its current session. */
  get subscribed(): boolean {
    return [...this.desired.keys()].every((f) => this.confirmed.has(f));
  }

  /** Connects (retrying until the deadline) and subscribes; false if it never got in. */
  async start(): Promise<boolean> {
    this.wantOnline = true;
    return this.ensureOnline();
  }

  /** Starts publishing (clients with a publish spec). */
  startPublishing(): void {
    if (this.spec.publish === undefined || this.publishing) return;
    this.publishing = true;
    this.publishLoop = this.publishMessages();
  }

  /** Stops publishing; waits (bounded) for the acknowledgements of what is in flight. */
  async stopPublishing(waitMs = 3000): Promise<void> {
    this.publishing = false;
    this.wake?.();
    await this.publishLoop;
    const until = Date.now() + waitMs;
    while (this.outstanding.size > 0 && Date.now() < until) await this.windowChange(100);
  }

  /** Carries out the client's actions at their times (ms after `t0`), one after the other. */
  async act(actions: readonly ClientAction[], t0: number, faultEnd: number): Promise<void> {
    for (const a of actions) {
      const wait = t0 + a.at - Date.now();
      if (wait > 0) await sleep(wait);
      if (Date.now() >= faultEnd) return;
      await this.perform(a);
    }
  }

  private async perform(a: ClientAction): Promise<void> {
    this.faults.set(a.kind, (this.faults.get(a.kind) ?? 0) + 1);
    switch (a.kind) {
      case 'disconnect':
      case 'drop':
        await this.leave(a.kind, a.kind, a.offMs);
        return;
      case 'expire':
        await this.leave(a.how, `expire-${a.how}`, a.offMs);
        return;
      case 'takeover':
        await this.takeover();
        return;
      case 'slow':
        this.mark('slow');
        this.slow = true;
        await sleep(a.forMs);
        this.fast();
        return;
      case 'unsubscribe': {
        this.desired.delete(a.filter);
        this.confirmed.delete(a.filter);
        this.unsubPending.add(a.filter);
        if (this.current?.connected) this.unsubscribe(this.current, [a.filter]);
        return;
      }
      case 'subscribe': {
        this.desired.set(a.sub.filter, a.sub);
        this.unsubPending.delete(a.sub.filter);
        if (this.current?.connected) this.subscribe(this.current, [a.sub]);
        return;
      }
    }
  }

  /** Leaves by DISCONNECT or a dropped socket, stays away `offMs`, comes back. */
  private async leave(how: 'disconnect' | 'drop', fault: string, offMs: number): Promise<void> {
    await this.settle();
    this.wantOnline = false;
    this.mark(fault);
    const conn = this.current;
    this.current = undefined;
    if (conn !== undefined) await (how === 'drop' ? this.drop(conn) : this.end(conn));
    await sleep(offMs);
    this.wantOnline = true;
    await this.ensureOnline();
  }

  /** A second connection with the same client id; the first is closed once it is in. */
  private async takeover(): Promise<void> {
    await this.settle();
    const old = this.current;
    if (old === undefined) return;
    this.mark('takeover');
    const attempt = this.connectLoop();
    this.connecting = attempt;
    try {
      await attempt;
    } finally {
      if (this.connecting === attempt) this.connecting = undefined;
    }
    // The broker closes the old connection; make sure of it on this side too.
    if (!old.closed) old.client.end(true);
  }

  /** Lets a reconnect that is under way finish first (bounded). */
  private async settle(): Promise<void> {
    if (this.connecting !== undefined) await within(this.connecting, this.connectTimeoutMs + 1000);
  }

  /** Reading and acknowledging again: the held acknowledgements go out. */
  fast(): void {
    if (!this.slow) return;
    this.slow = false;
    this.mark('fast');
    for (const conn of this.conns) {
      const held = conn.held;
      conn.held = [];
      if (!conn.closed) for (const cb of held) cb();
    }
  }

  /** The drain: a persistent client leaves with DISCONNECT and comes back to its session. */
  async reconnectForDrain(): Promise<boolean> {
    this.fast();
    await this.settle();
    this.wantOnline = false;
    this.mark('drain');
    const conn = this.current;
    this.current = undefined;
    if (conn !== undefined) await this.end(conn);
    this.wantOnline = true;
    return this.ensureOnline();
  }

  /** Goes offline for good: every connection ends with DISCONNECT. */
  async finish(): Promise<void> {
    this.publishing = false;
    this.wake?.();
    this.fast();
    await this.settle();
    this.wantOnline = false;
    this.current = undefined;
    // A will client says goodbye: its will is not due (unless its node never reads the DISCONNECT).
    if (this.spec.will !== undefined)
      for (const c of this.conns) if (c.connected && !c.closed) this.push({ t: now(), conn: c.id, type: 'fault', fault: 'bye' });
    await Promise.all([...this.conns].map((c) => this.end(c)));
  }

  // ---------------------------------------------------------------------------------------------
  // Connections

  private ensureOnline(): Promise<boolean> {
    if (this.current !== undefined) return Promise.resolve(true);
    if (this.connecting !== undefined) return this.connecting;
    if (!this.wantOnline) return Promise.resolve(false);
    // A will client's one connection is gone: it stays away, so its will is due.
    if (this.spec.will !== undefined && this.hadConnack) return Promise.resolve(false);
    const attempt = this.connectLoop();
    this.connecting = attempt;
    void attempt.finally(() => {
      if (this.connecting === attempt) this.connecting = undefined;
    });
    return attempt;
  }

  private async connectLoop(): Promise<boolean> {
    while (Date.now() < this.ctx.deadline) {
      const conn = await this.connectOnce();
      if (conn !== undefined) return true;
      // A fleet tries the next node when one does not let it in (down, paused, without its lease).
      if (this.ctx.target.nodeCount > 1) this.node = (this.node + 1) % this.ctx.target.nodeCount;
      await sleep(100);
    }
    return false;
  }

  /** One connection attempt; the connection when CONNACK accepted it. */
  private async connectOnce(): Promise<Conn | undefined> {
    const node = this.node;
    const port = this.ctx.target.port(node);
    if (port === undefined) return undefined;
    const spec = this.spec;
    const id = ++this.connSeq;
    const clean = !spec.persistent;
    const properties: NonNullable<IClientOptions['properties']> = {};
    if (spec.version === 5 && (spec.persistent || spec.expirySeconds > 0)) properties.sessionExpiryInterval = spec.expirySeconds;
    if (spec.version === 5 && spec.receiveMaximum !== undefined) properties.receiveMaximum = spec.receiveMaximum;
    const options: IClientOptions = {
      host: '127.0.0.1',
      port,
      clientId: spec.clientId,
      username: `${this.ctx.tenant}/${spec.name}`,
      protocolVersion: spec.version,
      clean,
      reconnectPeriod: 0,
      connectTimeout: this.connectTimeoutMs,
      // On a cluster a short keep alive, so a client of a paused node notices and fails over.
      keepalive: this.ctx.target.nodeCount > 1 ? 10 : 30,
      resubscribe: false,
      queueQoSZero: false,
      ...(this.store !== undefined ? { incomingStore: this.store } : {}),
      ...(spec.version === 5 ? { properties } : {}),
      ...(spec.will !== undefined
        ? {
            will: {
              topic: `will/${spec.name}`,
              payload: Buffer.from(`will|${spec.name}|${id}`),
              qos: 2 as const,
              retain: false,
              properties: { willDelayInterval: spec.will.delaySeconds },
            },
          }
        : {}),
    };
    this.push({ t: now(), conn: id, type: 'connect', clean, ...(this.ctx.target.nodeCount > 1 ? { node } : {}) });
    const client = mqtt.connect(options);
    let closed: () => void = () => undefined;
    const conn: Conn = {
      id,
      client,
      connected: false,
      closed: false,
      pubIds: new Map(),
      subOps: new Map(),
      held: [],
      closedPromise: new Promise<void>((r) => (closed = r)),
    };
    this.conns.add(conn);
    let outcome: (ok: boolean) => void = () => undefined;
    const result = new Promise<boolean>((r) => (outcome = r));
    client.handleMessage = (packet, callback) => {
      if (!this.slow) return callback();
      // The application has the message: a QoS 2 one leaves the store now, not when the client reads again.
      if (packet.qos === 2 && this.store !== undefined) this.store.del(packet, () => undefined);
      conn.held.push(() => callback());
    };
    client.on('packetsend', (p: Packet) => this.onSend(conn, p));
    client.on('packetreceive', (p: Packet) => this.onReceive(conn, p));
    client.on('message', (topic, payload, packet) => {
      this.push({ t: now(), conn: id, type: 'deliver', msg: keyOf(payload), topic, qos: packet.qos });
    });
    client.on('connect', () => {
      conn.connected = true;
      outcome(true);
    });
    client.on('error', (err) => {
      this.push({ t: now(), conn: id, type: 'error', message: err.message });
    });
    client.on('close', () => {
      if (conn.closed) return;
      conn.closed = true;
      conn.held = [];
      this.push({ t: now(), conn: id, type: 'close' });
      for (const [key, c] of this.outstanding) if (c === id) this.outstanding.delete(key);
      this.wake?.();
      this.conns.delete(conn);
      if (this.current === conn) {
        this.current = undefined;
        if (this.wantOnline) setTimeout(() => void this.ensureOnline(), 50);
      }
      closed();
      outcome(false);
    });
    const timer = setTimeout(() => outcome(false), this.connectTimeoutMs + 500);
    const ok = await result;
    clearTimeout(timer);
    if (!ok) {
      if (!conn.closed) this.push({ t: now(), conn: id, type: 'connect-failed', error: 'no CONNACK' });
      client.end(true);
      return undefined;
    }
    const old = this.current;
    this.current = conn;
    this.hadConnack = true;
    if (old !== undefined && old !== conn && !old.closed) old.client.end(true);
    return conn;
  }

  private onSend(conn: Conn, p: Packet): void {
    const t = now();
    if (p.cmd === 'publish') {
      const key = keyOf(p.payload);
      if (p.qos > 0 && p.messageId !== undefined) conn.pubIds.set(p.messageId, key);
      this.push({ t, conn: conn.id, type: 'publish', msg: key, topic: p.topic, qos: p.qos, packetId: p.messageId ?? 0 });
    } else if (p.cmd === 'subscribe') {
      const op = ++this.opSeq;
      const subs: SubSpec[] = p.subscriptions.map((s) => ({ filter: s.topic, qos: s.qos, noLocal: s.nl === true }));
      conn.subOps.set(p.messageId!, { op, filters: subs.map((s) => s.filter), unsub: false });
      this.push({ t, conn: conn.id, type: 'subscribe', op, subs });
    } else if (p.cmd === 'unsubscribe') {
      const op = ++this.opSeq;
      conn.subOps.set(p.messageId!, { op, filters: [...p.unsubscriptions], unsub: true });
      this.push({ t, conn: conn.id, type: 'unsubscribe', op, filters: [...p.unsubscriptions] });
    }
  }

  private onReceive(conn: Conn, p: Packet): void {
    const t = now();
    switch (p.cmd) {
      case 'connack': {
        const reason = p.reasonCode ?? p.returnCode ?? 0;
        this.push({ t, conn: conn.id, type: 'connack', sessionPresent: p.sessionPresent, reason });
        if (reason === 0) this.afterConnack(conn, p.sessionPresent);
        return;
      }
      case 'publish':
        this.push({
          t,
          conn: conn.id,
          type: 'recv',
          msg: keyOf(p.payload),
          topic: p.topic,
          qos: p.qos,
          dup: p.dup,
          packetId: p.messageId ?? 0,
        });
        return;
      case 'puback':
      case 'pubrec': {
        const key = conn.pubIds.get(p.messageId!);
        if (key === undefined) return;
        if (p.cmd === 'puback') conn.pubIds.delete(p.messageId!);
        this.push({ t, conn: conn.id, type: 'ack', msg: key, packet: p.cmd, reason: p.reasonCode ?? 0 });
        return;
      }
      case 'pubcomp':
        conn.pubIds.delete(p.messageId!);
        return;
      case 'pubrel':
        this.push({ t, conn: conn.id, type: 'pubrel', packetId: p.messageId! });
        return;
      case 'suback':
      case 'unsuback': {
        const op = conn.subOps.get(p.messageId!);
        if (op === undefined) return;
        conn.subOps.delete(p.messageId!);
        if (p.cmd === 'suback') {
          const granted = (p.granted as unknown[]).map((g) => (typeof g === 'number' ? g : ((g as { qos?: number }).qos ?? 0x80)));
          this.push({ t, conn: conn.id, type: 'suback', op: op.op, granted });
          const failed: SubSpec[] = [];
          op.filters.forEach((f, i) => {
            const sub = this.desired.get(f);
            if ((granted[i] ?? 0x80) < 0x80) {
              if (sub !== undefined) this.confirmed.add(f);
            } else if (sub !== undefined) failed.push(sub);
          });
          // Refused (e.g. its session record could not be stored): asked again in a moment.
          if (failed.length > 0)
            setTimeout(() => {
              const again = failed.filter((s) => this.desired.get(s.filter) === s && !this.confirmed.has(s.filter));
              if (again.length > 0 && this.current === conn && !conn.closed) this.subscribe(conn, again);
            }, 300);
        } else {
          // v5 reason codes (mqtt-packet puts them in `granted`); v3.1.1 has none.
          const codes = (p as { granted?: unknown }).granted;
          const reasons = Array.isArray(codes) ? codes.map(Number) : op.filters.map(() => 0);
          this.push({ t, conn: conn.id, type: 'unsuback', op: op.op, reasons });
          const failed: string[] = [];
          op.filters.forEach((f, i) => {
            if ((reasons[i] ?? 0) < 0x80) this.unsubPending.delete(f);
            else failed.push(f);
          });
          // Refused (its session record could not be stored): asked again in a moment.
          if (failed.length > 0)
            setTimeout(() => {
              const again = failed.filter((f) => this.unsubPending.has(f));
              if (again.length > 0 && this.current === conn && !conn.closed) this.unsubscribe(conn, again);
            }, 300);
        }
        return;
      }
      case 'disconnect':
        this.push({ t, conn: conn.id, type: 'server-disconnect', reason: p.reasonCode ?? 0 });
        return;
      default:
        return;
    }
  }

  /** A new session has none of the filters; a resumed one has those confirmed before. */
  private afterConnack(conn: Conn, sessionPresent: boolean): void {
    if (!this.spec.persistent || !sessionPresent) {
      this.confirmed.clear();
      this.unsubPending.clear();
    }
    const need = [...this.desired.values()].filter((s) => !this.confirmed.has(s.filter));
    if (need.length > 0) this.subscribe(conn, need);
    if (this.unsubPending.size > 0) this.unsubscribe(conn, [...this.unsubPending]);
  }

  private subscribe(conn: Conn, subs: readonly SubSpec[]): void {
    const map: Record<string, { qos: QoS; nl?: boolean }> = {};
    for (const s of subs) map[s.filter] = this.spec.version === 5 ? { qos: s.qos, nl: s.noLocal } : { qos: s.qos };
    conn.client.subscribe(map, () => undefined);
  }

  private unsubscribe(conn: Conn, filters: readonly string[]): void {
    conn.client.unsubscribe([...filters], () => undefined);
  }

  /** DISCONNECT, or a forced close when it does not end within END_TIMEOUT_MS. */
  private async end(conn: Conn): Promise<void> {
    if (conn.closed) return;
    const held = conn.held;
    conn.held = [];
    for (const cb of held) cb();
    conn.client.end(false);
    const done = await within(conn.closedPromise, END_TIMEOUT_MS);
    if (!done) conn.client.end(true);
    await within(conn.closedPromise, 1000);
  }

  private async drop(conn: Conn): Promise<void> {
    if (conn.closed) return;
    conn.client.stream.destroy();
    conn.client.end(true);
    await within(conn.closedPromise, 1000);
  }

  // ---------------------------------------------------------------------------------------------
  // Publishing

  private windowChange(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  private async publishMessages(): Promise<void> {
    const p = this.spec.publish!;
    const rng = new Rng(p.seed);
    while (this.publishing) {
      const conn = this.current;
      if (conn === undefined || !conn.connected || conn.closed) {
        await sleep(20);
        continue;
      }
      if (this.outstanding.size >= p.window || conn.client.stream.writableLength > WRITE_BACKLOG) {
        await this.windowChange(50);
        continue;
      }
      const topic = rng.pick(p.topics);
      const qos = rng.pick(p.qos);
      const seq = ++this.seq;
      const key = msgKey({ publisher: this.spec.name, seq });
      if (qos > 0) this.outstanding.set(key, conn.id);
      this.published++;
      conn.client.publish(topic, encodePayload(this.ctx.tenant, { publisher: this.spec.name, seq, topic, qos }), { qos }, () => {
        if (this.outstanding.get(key) === conn.id) {
          this.outstanding.delete(key);
          this.wake?.();
        }
      });
      await (p.pauseMs > 0 ? sleep(p.pauseMs) : new Promise<void>((r) => setImmediate(r)));
    }
  }
}

/** The message key in a payload (`?<payload>` when it is not one of ours). */
function keyOf(payload: IPublishPacket['payload']): string {
  const text = typeof payload === 'string' ? payload : Buffer.from(payload).toString();
  const m = decodePayload(text);
  return m === undefined ? `?${text.slice(0, 40)}` : msgKey(m);
}
