import { checkRun } from './checker';
import type { BrokerEvent, ClientEvent, ClientRecord, ClientSpec, NodeEvent, Problem, QoS, RunRecord, SubSpec } from './model';

/**
 * The checker, fed synthetic records: a clean run passes, and each kind of broken delivery (a
 * lost message, an out-of-order pair, a QoS 2 duplicate, a delivery after UNSUBACK, to a session
 * that did not exist yet, back to a No Local subscriber, a lost session, a stalled one) is
 * reported. Times are plain numbers: t0 = 0, settle from 1000, drain from 1500.
 */

const SETTLE = 1000;
const DRAIN = 1500;

function spec(name: string, over: Partial<ClientSpec> = {}): ClientSpec {
  return { name, clientId: `t-${name}`, node: 0, version: 5, persistent: true, expirySeconds: 600, subscriptions: [], ...over };
}

/** A client whose events are written with small helpers. */
class Rec {
  readonly events: ClientEvent[] = [];
  private op = 0;
  constructor(readonly spec: ClientSpec) {}
  connect(t: number, conn: number, sessionPresent = false): this {
    this.events.push({ t, conn, type: 'connect', clean: !this.spec.persistent });
    this.events.push({ t: t + 0.5, conn, type: 'connack', sessionPresent, reason: 0 });
    return this;
  }
  subscribe(t: number, conn: number, subs: SubSpec[], granted = subs.map((s) => s.qos as number)): this {
    const op = ++this.op;
    this.events.push({ t, conn, type: 'subscribe', op, subs });
    this.events.push({ t: t + 0.5, conn, type: 'suback', op, granted });
    return this;
  }
  unsubscribe(t: number, conn: number, filters: string[]): this {
    const op = ++this.op;
    this.events.push({ t, conn, type: 'unsubscribe', op, filters });
    this.events.push({ t: t + 0.5, conn, type: 'unsuback', op, reasons: filters.map(() => 0) });
    return this;
  }
  publish(t: number, conn: number, seq: number, topic: string, qos: QoS, ackAfter: number | undefined = 1): this {
    const msg = `${this.spec.name}:${seq}`;
    this.events.push({ t, conn, type: 'publish', msg, topic, qos, packetId: seq });
    if (qos > 0 && ackAfter !== undefined)
      this.events.push({ t: t + ackAfter, conn, type: 'ack', msg, packet: qos === 1 ? 'puback' : 'pubrec', reason: 0 });
    return this;
  }
  receive(t: number, conn: number, msg: string, topic: string, qos: QoS, dup = false): this {
    this.events.push({ t, conn, type: 'recv', msg, topic, qos, dup, packetId: 1 });
    this.events.push({ t: t + 0.1, conn, type: 'deliver', msg, topic, qos });
    return this;
  }
  leave(t: number, conn: number, fault = 'drop'): this {
    this.events.push({ t, conn, type: 'fault', fault });
    this.events.push({ t: t + 0.5, conn, type: 'close' });
    return this;
  }
  get record(): ClientRecord {
    return { spec: this.spec, events: [...this.events].sort((a, b) => a.t - b.t) };
  }
}

function run(clients: Rec[], broker: BrokerEvent[] = [], nodes: NodeEvent[] = []): RunRecord {
  return {
    schedule: {
      seed: 1,
      index: 0,
      storage: 'memory',
      tenant: 't',
      settings: {},
      durationMs: 800,
      topics: ['a', 'b'],
      clients: clients.map((c) => c.spec),
      actions: [],
      nodeActions: [],
    },
    t0: 0,
    faultEnd: 800,
    settleStart: SETTLE,
    drainStart: DRAIN,
    end: 3000,
    tenant: 't',
    clients: clients.map((c) => c.record),
    nodes,
    broker,
  };
}

const sub = (filter: string, qos: QoS, noLocal = false): SubSpec => ({ filter, qos, noLocal });

/** A publisher of p0:1..n on topic `a` (QoS 1) from t = 100, one every 10 ms. */
function publisher(n: number, qos: QoS = 1): Rec {
  const p = new Rec(
    spec('p0', { persistent: false, expirySeconds: 0, publish: { topics: ['a'], qos: [qos], window: 10, pauseMs: 1, seed: 1 } }),
  );
  p.connect(0, 1);
  for (let i = 1; i <= n; i++) p.publish(100 + i * 10, 1, i, 'a', qos);
  return p;
}

/** A persistent subscriber of `a` that receives `seqs` (of p0) in that order, then reconnects in the drain. */
function subscriber(seqs: number[], qos: QoS = 1, name = 's0'): Rec {
  const s = new Rec(spec(name));
  s.connect(0, 1).subscribe(10, 1, [sub('a', qos)]);
  seqs.forEach((seq, i) => s.receive(300 + i * 5, 1, `p0:${seq}`, 'a', qos));
  s.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
  return s;
}

function kinds(problems: readonly Problem[]): string[] {
  return problems.map((p) => p.kind);
}

describe('the delivery checker', () => {
  it('passes a run where every acknowledged message arrived in order', () => {
    const r = checkRun(run([publisher(5), subscriber([1, 2, 3, 4, 5])]));
    expect(r.problems).toEqual([]);
    expect(r.stats.required).toBe(5);
    expect(r.stats.acknowledged).toBe(5);
  });

  it('reports a lost message, with the message, the session and what the subscriber saw', () => {
    const r = checkRun(run([publisher(5), subscriber([1, 2, 4, 5])]));
    expect(kinds(r.problems)).toEqual(['lost']);
    expect(r.problems[0]!.summary).toContain('p0:3');
    expect(r.problems[0]!.details.join('\n')).toMatch(
      /message p0:3 \(topic a, QoS 1\)[\s\S]*s0 received p0's a seqs near 3: 1@c1 2@c1 4@c1 5@c1/,
    );
    expect(r.outstanding).toBe(1);
  });

  it('accepts a missing message when the broker reported a drop for the session', () => {
    const drop: BrokerEvent = {
      node: 0,
      type: 'qos1Dropped',
      tenantId: 't',
      clientId: 't-s0',
      eventTime: 150,
      topic: 'a',
      reason: 'queue-full',
    };
    const r = checkRun(run([publisher(5), subscriber([1, 2, 4, 5])], [drop]));
    expect(r.problems).toEqual([]);
    expect(r.stats.excusedByDrops).toBe(1);
  });

  it('takes drops acknowledged in the last 20 ms before a kill as unlogged, only while drops were being reported', () => {
    // p0:4 and p0:5 are acknowledged at 141 and 151; the node is killed at 152.
    const drop: BrokerEvent = {
      node: 0,
      type: 'qos1Dropped',
      tenantId: 't',
      clientId: 't-s0',
      eventTime: 120,
      topic: 'a',
      reason: 'queue-full',
    };
    const kill = (t: number): NodeEvent => ({ t, node: 0, type: 'kill' });
    const received = [1, 2, 3];
    expect(checkRun(run([publisher(5), subscriber(received)], [drop], [kill(152)])).problems).toEqual([]);
    // No drop reported before the kill: nothing excuses them.
    expect(kinds(checkRun(run([publisher(5), subscriber(received)], [], [kill(152)])).problems)).toEqual(['lost']);
    // Acknowledged long before the kill: their drops would have been logged.
    expect(kinds(checkRun(run([publisher(5), subscriber(received)], [drop], [kill(200)])).problems)).toEqual(['lost']);
  });

  it('does not require messages of a clean session, nor of a session that expired', () => {
    const clean = new Rec(spec('s1', { persistent: false, expirySeconds: 0 }));
    clean
      .connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .receive(300, 1, 'p0:1', 'a', 1)
      .leave(500, 1);
    const expired = new Rec(spec('s2', { expirySeconds: 1 }));
    expired
      .connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .leave(105, 1)
      .connect(DRAIN + 1, 2, false);
    expect(checkRun(run([publisher(5), clean, expired])).problems).toEqual([]);
  });

  it('reports a pair out of publishing order', () => {
    const r = checkRun(run([publisher(5), subscriber([1, 3, 2, 4, 5])]));
    expect(kinds(r.problems)).toEqual(['order']);
    expect(r.problems[0]!.summary).toContain('p0:2 first arrived after p0:3');
  });

  it('reports QoS 0 queued while a persistent session was away and overtaken by live QoS 0 on its return, saying it was published while offline', () => {
    const away = new Rec(spec('s0'));
    // p0:1 (t 110) is published while s0 is away; p0:2 (t 120) after it is back: p0:2 arrives first.
    away
      .connect(0, 1)
      .subscribe(10, 1, [sub('a', 0)])
      .leave(100, 1)
      .connect(115, 2, true);
    away.receive(130, 2, 'p0:2', 'a', 0).receive(131, 2, 'p0:1', 'a', 0);
    away.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
    const queued = checkRun(run([publisher(2, 0), away])).problems;
    expect(kinds(queued)).toEqual(['order']);
    expect(queued[0]!.details.join('\n')).toContain('before the CONNACK of connection 2');
  });

  it('does not check the order through $share', () => {
    const s = new Rec(spec('g0m0'));
    s.connect(0, 1).subscribe(10, 1, [sub('$share/g/a', 1)]);
    [2, 1, 3].forEach((seq, i) => s.receive(300 + i, 1, `p0:${seq}`, 'a', 1));
    s.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    expect(checkRun(run([publisher(3), s])).problems).toEqual([]);
  });

  it('reports a QoS 2 message delivered twice to one session, and to two members of a group', () => {
    const r = checkRun(run([publisher(3, 2), subscriber([1, 2, 2, 3], 2)]));
    expect(kinds(r.problems)).toEqual(['duplicate']);
    const m0 = new Rec(spec('g0m0'));
    const m1 = new Rec(spec('g0m1'));
    for (const m of [m0, m1]) m.connect(0, 1).subscribe(10, 1, [sub('$share/g/a', 2)]);
    m0.receive(300, 1, 'p0:1', 'a', 2).receive(301, 1, 'p0:2', 'a', 2);
    m1.receive(300, 1, 'p0:2', 'a', 2);
    for (const m of [m0, m1]) m.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    const g = checkRun(run([publisher(2, 2), m0, m1]));
    expect(kinds(g.problems)).toEqual(['duplicate']);
    expect(g.problems[0]!.summary).toContain('$share/g/a: QoS 2 message p0:2 delivered to 2 members');
  });

  it('takes a QoS 2 message a clean publisher never got acknowledged, delivered twice, for sent again as a new one', () => {
    // p0 (clean) sends p0:1 and loses its connection before PUBREC; its library sends it again on a new clean session.
    const clean = (persistent: boolean): Rec => {
      const p = new Rec(
        spec('p0', {
          persistent,
          expirySeconds: persistent ? 600 : 0,
          publish: { topics: ['a'], qos: [2], window: 10, pauseMs: 1, seed: 1 },
        }),
      );
      p.connect(0, 1);
      p.events.push({ t: 110, conn: 1, type: 'publish', msg: 'p0:1', topic: 'a', qos: 2, packetId: 1 });
      p.leave(150, 1).connect(160, 2, persistent);
      if (persistent) p.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
      return p;
    };
    const twice = (): Rec => subscriber([1, 1], 2);
    expect(checkRun(run([clean(false), twice()])).problems).toEqual([]);
    // A persistent publisher resends it in its session: twice is a duplicate.
    expect(kinds(checkRun(run([clean(true), twice()])).problems)).toEqual(['duplicate']);
  });

  it('requires a message of a shared group at one member', () => {
    const m0 = new Rec(spec('g0m0'));
    const m1 = new Rec(spec('g0m1'));
    for (const m of [m0, m1]) m.connect(0, 1).subscribe(10, 1, [sub('$share/g/a', 1)]);
    m0.receive(300, 1, 'p0:1', 'a', 1);
    m1.receive(300, 1, 'p0:3', 'a', 1);
    for (const m of [m0, m1]) m.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    const r = checkRun(run([publisher(3), m0, m1]));
    expect(kinds(r.problems)).toEqual(['lost']);
    expect(r.problems[0]!.summary).toMatch(/group \$share\/g\/a: 1 acknowledged .* p0:2/);
  });

  it('reports a delivery through a filter unsubscribed before the message was published', () => {
    const s = new Rec(spec('s0'));
    s.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .unsubscribe(50, 1, ['a'])
      .receive(300, 1, 'p0:1', 'a', 1);
    s.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    const r = checkRun(run([publisher(1), s]));
    expect(kinds(r.problems)).toEqual(['after-unsubscribe']);
    expect(r.problems[0]!.summary).toContain('through a, unsubscribed (UNSUBACK at +50.5 ms) before it was published');
  });

  it('keeps a filter subscribed by a SUBSCRIBE sent right after its UNSUBSCRIBE, when both are acknowledged together', () => {
    // s0 has only `a`; s1 has `a` at QoS 2 and `+` at QoS 1. Each sends UNSUBSCRIBE a, then SUBSCRIBE a
    // (QoS 2) 0.1 ms later; UNSUBACK and SUBACK come back together: `a` is subscribed again.
    const again = (r: Rec): void => {
      r.events.push({ t: 50, conn: 1, type: 'unsubscribe', op: 10, filters: ['a'] });
      r.events.push({ t: 50.1, conn: 1, type: 'subscribe', op: 11, subs: [sub('a', 2)] });
      r.events.push({ t: 60, conn: 1, type: 'unsuback', op: 10, reasons: [0] });
      r.events.push({ t: 60, conn: 1, type: 'suback', op: 11, granted: [2] });
    };
    const s0 = new Rec(spec('s0'));
    s0.connect(0, 1).subscribe(10, 1, [sub('a', 2)]);
    const s1 = new Rec(spec('s1'));
    s1.connect(0, 1).subscribe(10, 1, [sub('a', 2), sub('+', 1)]);
    for (const s of [s0, s1]) {
      again(s);
      s.receive(300, 1, 'p0:1', 'a', 2).receive(305, 1, 'p0:2', 'a', 2);
      s.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    }
    const r = checkRun(run([publisher(2, 2), s0, s1]));
    expect(r.problems).toEqual([]);
    expect(r.stats.required).toBe(4);
  });

  it('does not require a message acknowledged after the UNSUBSCRIBE was sent, and allows its delivery', () => {
    const s = new Rec(spec('s0'));
    // p0:1 is sent at 110 and acknowledged at 111; the UNSUBSCRIBE goes out at 110.5.
    s.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .unsubscribe(110.5, 1, ['a'])
      .receive(300, 1, 'p0:1', 'a', 1);
    s.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    const r = checkRun(run([publisher(2), s]));
    expect(r.problems).toEqual([]);
    expect(r.stats.required).toBe(0);
  });

  it('does not require messages through a filter unsubscribed before its SUBACK arrived', () => {
    const s = new Rec(spec('s0'));
    s.connect(0, 1);
    s.events.push(
      { t: 10, conn: 1, type: 'subscribe', op: 1, subs: [sub('a', 1)] },
      { t: 10.2, conn: 1, type: 'unsubscribe', op: 2, filters: ['a'] },
      { t: 11, conn: 1, type: 'suback', op: 1, granted: [1] },
      { t: 12, conn: 1, type: 'unsuback', op: 2, reasons: [0] },
    );
    s.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    const r = checkRun(run([publisher(3), s]));
    expect(r.problems).toEqual([]);
    expect(r.stats.required).toBe(0);
  });

  it('reports a message delivered to a session that did not exist when it was published', () => {
    const s = new Rec(spec('s0', { expirySeconds: 1 }));
    s.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .leave(105, 1);
    // Back after the expiry: a new session, which gets p0:1 of the old one.
    s.connect(DRAIN + 1, 2, false)
      .subscribe(DRAIN + 2, 2, [sub('a', 1)])
      .receive(DRAIN + 10, 2, 'p0:1', 'a', 1);
    const r = checkRun(run([publisher(1), s]));
    expect(kinds(r.problems)).toEqual(['before-session']);
  });

  it('reports a message delivered back to its No Local publisher', () => {
    const n = new Rec(spec('n0', { publish: { topics: ['a'], qos: [1], window: 5, pauseMs: 1, seed: 1 } }));
    n.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1, true)])
      .publish(100, 1, 1, 'a', 1)
      .receive(110, 1, 'n0:1', 'a', 1);
    n.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
    const r = checkRun(run([n]));
    expect(kinds(r.problems)).toEqual(['no-local']);
  });

  it('reports a persistent session lost before its expiry', () => {
    const s = new Rec(spec('s0'));
    s.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .leave(200, 1)
      .connect(300, 2, false)
      .subscribe(301, 2, [sub('a', 1)]);
    s.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
    const r = checkRun(run([s]));
    expect(kinds(r.problems)).toEqual(['session-lost']);
  });

  it('reports a session that got its messages only after reconnecting, though it was connected all through the settle', () => {
    const s = new Rec(spec('s0'));
    s.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .receive(300, 1, 'p0:1', 'a', 1);
    s.leave(DRAIN, 1, 'drain')
      .connect(DRAIN + 1, 2, true)
      .receive(DRAIN + 5, 2, 'p0:2', 'a', 1);
    const r = checkRun(run([publisher(2), s]));
    expect(kinds(r.problems)).toEqual(['stalled']);
  });

  it('reports a session that could not reconnect in the drain', () => {
    const s = new Rec(spec('s0'));
    s.connect(0, 1)
      .subscribe(10, 1, [sub('a', 1)])
      .receive(300, 1, 'p0:1', 'a', 1)
      .leave(DRAIN, 1, 'drain');
    expect(kinds(checkRun(run([publisher(1), s])).problems)).toEqual(['drain']);
  });

  describe('on a cluster', () => {
    /** A cluster run: the same records, a schedule with `cluster`. */
    function clusterRun(clients: Rec[], broker: BrokerEvent[] = [], nodes: NodeEvent[] = []): RunRecord {
      const r = run(clients, broker, nodes);
      return { ...r, schedule: { ...r.schedule, storage: 'nats', cluster: { nodes: 2, natsServers: 1, maxFaultMs: 9000 } } };
    }
    const ev = (node: number, type: string, clientId: string, eventTime: number, group: string): BrokerEvent => ({
      node,
      type,
      tenantId: 't',
      clientId,
      eventTime,
      group,
    });

    /** s0 on connection 1 (node 0) until it moves to connection 2 (node 1) at 600; p0:1..3 published meanwhile. */
    function moving(lateRecvAt: number): Rec {
      const s = new Rec(spec('s0'));
      s.connect(0, 1).subscribe(10, 1, [sub('a', 1)]);
      s.receive(300, 1, 'p0:1', 'a', 1).receive(310, 1, 'p0:2', 'a', 1);
      s.connect(600, 2, true).receive(620, 2, 'p0:3', 'a', 1);
      s.receive(lateRecvAt, 1, 'p0:2', 'a', 1, true);
      s.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
      return s;
    }

    it('passes a session that moved between nodes, with its old connection read just after the new CONNACK', () => {
      const r = checkRun(clusterRun([publisher(3), moving(600.5 + 50)]));
      expect(r.problems).toEqual([]);
    });

    it('reports a PUBLISH on an older connection well after a newer connection got its CONNACK (two owners, from the client)', () => {
      const r = checkRun(clusterRun([publisher(3), moving(600.5 + 400)]));
      expect(kinds(r.problems)).toEqual(['two-owners']);
      expect(r.problems[0]!.summary).toMatch(/^s0: PUBLISH p0:2 arrived on connection 1 .* after connection 2 .* got its CONNACK/);
    });

    it('reports two nodes serving one client id at once (from their events), and not a node whose lease ran out first', () => {
      const id = 't-s0';
      const overlapping = [
        ev(0, 'clientConnected', id, 10, 'clientConnected'),
        ev(1, 'clientConnected', id, 500, 'clientConnected'),
        ev(0, 'kicked', id, 900, 'clientDisconnected'),
      ];
      const a = checkRun(clusterRun([], overlapping));
      expect(kinds(a.problems)).toEqual(['two-owners']);
      expect(a.problems[0]!.summary).toMatch(/^t-s0: served by two nodes at once for 400 ms/);
      // Node 0's lease ran out at 450: it served nothing after that, although its disconnect is logged at 900.
      const fenced = [...overlapping, { node: 0, type: 'leaseLost', eventTime: 450 }];
      expect(checkRun(clusterRun([], fenced)).problems).toEqual([]);
      // Node 0 killed at 450: it logs no disconnect, and serves nothing after the kill.
      const killed: NodeEvent[] = [{ t: 450, node: 0, type: 'kill' }];
      expect(checkRun(clusterRun([], overlapping.slice(0, 2), killed)).problems).toEqual([]);
      expect(kinds(checkRun(clusterRun([], overlapping.slice(0, 2))).problems)).toEqual(['two-owners']);
      // A hand-over: node 0 let go at 495, node 1 took it at 500.
      const handedOver = [overlapping[0]!, ev(0, 'kicked', id, 495, 'clientDisconnected'), overlapping[1]!];
      expect(checkRun(clusterRun([], handedOver)).problems).toEqual([]);
    });

    it('reports a node that lets a client in while its lease had run out', () => {
      const id = 't-s0';
      const broker = [
        ev(1, 'clientConnected', id, 10, 'clientConnected'),
        { node: 1, type: 'leaseLost', eventTime: 300 },
        ev(1, 'kicked', id, 310, 'clientDisconnected'),
        ev(1, 'clientConnected', id, 600, 'clientConnected'),
        { node: 1, type: 'leaseHeld', eventTime: 900 },
        ev(1, 'byClient', id, 1200, 'clientDisconnected'),
      ];
      const r = checkRun(clusterRun([], broker));
      expect(kinds(r.problems)).toEqual(['lease']);
      expect(r.problems[0]!.summary).toBe(
        't-s0: node 1 let it in at +600.0 ms without its lease (it ran out at +300.0 ms, held again at +900.0 ms)',
      );
      // Let in once the lease is held again, or just before its line was logged: fine.
      for (const at of [950, 860]) {
        const later = broker.map((e) => (e.eventTime === 600 ? { ...e, eventTime: at } : e));
        expect(checkRun(clusterRun([], later)).problems).toEqual([]);
      }
    });

    /** A will client with one connection that ends at 400 (dropped, or with DISCONNECT), and the watcher. */
    function wills(how: 'drop' | 'bye', received: number[]): Rec[] {
      const w = new Rec(spec('w0', { persistent: false, expirySeconds: 0, will: { delaySeconds: 0 } }));
      w.connect(0, 1).leave(400, 1, how);
      const wt = new Rec(spec('wt', { subscriptions: [sub('will/#', 2)] }));
      wt.connect(0, 1).subscribe(5, 1, [sub('will/#', 2)]);
      for (const t of received) wt.receive(t, 1, '?will|w0|1', 'will/w0', 2);
      wt.leave(DRAIN, 1, 'drain').connect(DRAIN + 1, 2, true);
      return [w, wt];
    }

    it('passes a will published once for a dropped connection, and none after a DISCONNECT', () => {
      expect(checkRun(clusterRun(wills('drop', [420]))).problems).toEqual([]);
      expect(checkRun(clusterRun(wills('bye', []))).problems).toEqual([]);
    });

    it('reports a will that arrived twice, never, or after a DISCONNECT with no fault near', () => {
      expect(kinds(checkRun(clusterRun(wills('drop', [420, 430]))).problems)).toEqual(['will']);
      const missing = checkRun(clusterRun(wills('drop', [])));
      expect(kinds(missing.problems)).toEqual(['will']);
      expect(missing.willsOutstanding).toBe(1);
      expect(kinds(checkRun(clusterRun(wills('bye', [420]))).problems)).toEqual(['will']);
      // Two nodes publishing it is reported from their events too.
      const twice = [ev(0, 'willDistributed', 't-w0', 410, 'inboundPublish'), ev(1, 'willDistributed', 't-w0', 415, 'inboundPublish')];
      expect(checkRun(clusterRun(wills('drop', [420]), twice)).problems.map((p) => p.summary)).toEqual([
        'w0: the nodes published its will 2 times (node 0, node 1)',
      ]);
    });

    it('reports messages still on their way when the drain hit its bound as a drain that did not finish, not as lost', () => {
      // s0 gets p0:1 and p0:2, and is still receiving (p0:1 again) 1 s before the end; p0:3 is missing.
      const s = subscriber([1, 2]);
      s.receive(2000, 2, 'p0:1', 'a', 1, true);
      const cut = { ...clusterRun([publisher(3), s]), drainCut: true };
      const r = checkRun(cut);
      expect(kinds(r.problems)).toEqual(['drain']);
      expect(r.problems[0]!.summary).toMatch(
        /^s0 #1: 1 acknowledged QoS 1\/2 message\(s\) not delivered when the drain ended at its bound/,
      );
      expect(r.stats.lost).toBe(0);
      expect(r.stats.undrained).toBe(1);
      // A drain that ended because nothing more came: lost.
      expect(kinds(checkRun({ ...cut, drainCut: false }).problems)).toEqual(['lost']);
    });

    it('does not take a session expired while its node was paused for lost, and does otherwise', () => {
      // s0 (expiry 1 s) on node 1, whose pause starts at 100; it is cut off at 1000 and back at 1050 without its session.
      const s = new Rec(spec('s0', { expirySeconds: 1 }));
      s.events.push({ t: 0, conn: 1, type: 'connect', clean: false, node: 1 });
      s.events.push({ t: 0.5, conn: 1, type: 'connack', sessionPresent: false, reason: 0 });
      s.events.push({ t: 1000, conn: 1, type: 'server-disconnect', reason: 0x89 });
      s.events.push({ t: 1000.5, conn: 1, type: 'close' });
      s.events.push({ t: 1050, conn: 2, type: 'connect', clean: false, node: 0 });
      s.events.push({ t: 1050.5, conn: 2, type: 'connack', sessionPresent: false, reason: 0 });
      s.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
      const pause: NodeEvent[] = [
        { t: 100, node: 1, type: 'pause' },
        { t: 990, node: 1, type: 'resume' },
      ];
      expect(checkRun(clusterRun([s], [], pause)).problems).toEqual([]);
      // The pause of another node: the session was lost.
      const other = pause.map((n) => ({ ...n, node: 0 }));
      expect(kinds(checkRun(clusterRun([s], [], other)).problems)).toEqual(['session-lost']);
    });

    it('counts a CONNECT sent to a paused node as arriving when the node resumed', () => {
      // s0 (expiry 1 s) leaves node 1 at 100 and sends CONNECT to it at 300, while it is paused (200-1300).
      const s = new Rec(spec('s0', { expirySeconds: 1 }));
      s.events.push({ t: 0, conn: 1, type: 'connect', clean: false, node: 1 });
      s.events.push({ t: 0.5, conn: 1, type: 'connack', sessionPresent: false, reason: 0 });
      s.events.push({ t: 100, conn: 1, type: 'close' });
      s.events.push({ t: 300, conn: 2, type: 'connect', clean: false, node: 1 });
      s.events.push({ t: 1301, conn: 2, type: 'connack', sessionPresent: false, reason: 0 });
      s.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
      const pause: NodeEvent[] = [
        { t: 200, node: 1, type: 'pause' },
        { t: 1300, node: 1, type: 'resume' },
      ];
      // The broker read it 1.2 s after the client left: past the expiry, Session Present 0 is right.
      expect(checkRun(clusterRun([s], [], pause)).problems).toEqual([]);
      // A pause that ended before the CONNECT: it arrived 200 ms after the client left, the session was lost.
      const earlier: NodeEvent[] = [
        { t: 150, node: 1, type: 'pause' },
        { t: 250, node: 1, type: 'resume' },
      ];
      expect(kinds(checkRun(clusterRun([s], [], earlier)).problems)).toEqual(['session-lost']);
    });

    it('measures unavailability: a client without CONNACK and refused publishes, in the union', () => {
      const p = new Rec(
        spec('p0', { persistent: false, expirySeconds: 0, publish: { topics: ['a'], qos: [1], window: 10, pauseMs: 1, seed: 1 } }),
      );
      p.connect(0, 1);
      p.events.push({ t: 100, conn: 1, type: 'publish', msg: 'p0:1', topic: 'a', qos: 1, packetId: 1 });
      p.events.push({ t: 101, conn: 1, type: 'ack', msg: 'p0:1', packet: 'puback', reason: 0x80 });
      p.events.push({ t: 300, conn: 1, type: 'publish', msg: 'p0:2', topic: 'a', qos: 1, packetId: 2 });
      p.events.push({ t: 301, conn: 1, type: 'ack', msg: 'p0:2', packet: 'puback', reason: 0 });
      const s = new Rec(spec('s0'));
      s.connect(0, 1).subscribe(10, 1, [sub('a', 1)]);
      s.events.push({ t: 250, conn: 1, type: 'close' });
      s.connect(500, 2, true).receive(510, 2, 'p0:2', 'a', 1);
      s.leave(DRAIN, 2, 'drain').connect(DRAIN + 1, 3, true);
      // Refused 101..301, disconnected 250..500.5: 399.5 ms in all.
      expect(checkRun(clusterRun([p, s])).stats.unavailableMs).toBeCloseTo(399.5, 3);
    });
  });
});
