import type { Msg, NatsConnection, Subscription } from 'nats';
import type { Logger } from '../base/logger';
import { RepeatedWarning } from '../base/repeated-warning';
import { sameGroup } from '../routing/shared-group';
import { describeError } from '../base/errors';
import type { BatchReply, ForwardMessage, ForwardWaiter, GroupRef, LocalGroup, ReceivedMessage } from './cluster-view';
import { decodeFrame, encodeGroups, encodeMessage, frame, FrameError, NO_GROUPS_BYTES } from './forward-frame';
import { nodeWeight, type PickSelf, type RouteTable } from './routes';

/** Forwarded messages of one destination wait at most this long for more before they are sent. */
const FLUSH_AFTER_MS = 1;
/** A batch is sent at once when it reaches this many bytes. */
const FLUSH_AT_BYTES = 64 * 1024;
/** A QoS 1/2 batch whose destination does not reply in this time is failed (the publishers get no success). */
export const FORWARD_TIMEOUT_MS = 5000;
/** Reply bodies: the destination distributed the batch and stored what it must, or it did not. */
const REPLY_OK = Uint8Array.of(0);
const REPLY_FAILED = Uint8Array.of(1);
/** The whole batch refused before anything was delivered (the receiving node holds no lease). */
const REPLY_REFUSED = Uint8Array.of(2);

/** The subject a node receives forwarded messages on. */
export function forwardSubject(nodeId: string): string {
  return `bifro.fwd.${nodeId}`;
}

interface Batch {
  parts: Buffer[];
  /** Messages in `parts` (one with groups to serve takes two parts). */
  messages: number;
  bytes: number;
  /** Some message is QoS 1/2: sent as a request. */
  confirmed: boolean;
  /** One hold per QoS 1/2 message with a waiter. */
  waiters: ForwardWaiter[];
}

/** Hands received messages to the broker; `done` once it distributed them and what storage must keep is written. */
export type DeliverReceived = (messages: readonly ReceivedMessage[], done: (reply: BatchReply) => void) => void;

/** A forwarded batch the receiving node refused whole: none of its messages reached a session there. */
export class BatchRefused extends Error {
  constructor(node: string) {
    super(`node ${node} refused the batch (it holds no lease)`);
  }
}

/**
 * Delivers a message here to the sessions served here (by key) that `accept` takes and that are
 * not in `delivered`, adding them to it: a will reaches sessions that came here from a node that
 * did not take its copy.
 */
export type DeliverHere = (message: ReceivedMessage, delivered: Set<string>, accept: (key: string) => boolean) => void;

/** How long a QoS 1/2 message nobody sends again (a will) is sent again to nodes that did not take it. */
const RESEND_FOR_MS = 60_000;
/** The pause before such a message is sent again. */
const RESEND_EVERY_MS = 1000;
/** How long a receiving node remembers a copy id (longer than its sender sends copies). */
const COPIES_KEPT_MS = 2 * RESEND_FOR_MS;
/** Copy ids remembered before the old ones are swept. */
const COPIES_SWEEP_AT = 1000;

/** Whether two shared groups are the same group. */
function sameRef(a: GroupRef, b: GroupRef): boolean {
  return a.shareKind === b.shareKind && a.group === b.group && a.topicFilter === b.topicFilter;
}

/**
 * A QoS 1/2 message no publisher will send again when a node refuses it: a will. Each copy gets a
 * waiter of its own; after a copy is refused (a node without its lease, a timeout) or a matching
 * route's node has left, the message is routed again a second later: to the nodes whose routes
 * match then (the sessions' owners by then) that have no copy, and for the shared groups the
 * refused copy was to serve, to the node picked again. Tried for 60 s at most.
 */
class Resend {
  /** Nodes that took a copy, or have one on the way. */
  readonly sent = new Set<string>();
  /** Nodes whose copy failed, or whose route matched while they were gone: their sessions may come here. */
  readonly failed = new Set<string>();
  /** Nodes of {@link failed} that refused their copy whole: none of their sessions got it there. */
  readonly refused = new Set<string>();
  /** Nodes a copy was ever sent to: a node never sent one has none to hand over. */
  readonly attempted = new Set<string>();
  /** Nodes that took a copy: a session that was there has it, wherever it went since. */
  readonly took = new Set<string>();
  /** Sessions here (by key) that got it as sessions adopted from a failed node. */
  readonly delivered = new Set<string>();
  readonly until: number;
  private received: ReceivedMessage | undefined;

  constructor(
    private readonly forwarder: Forwarder,
    readonly tenantId: string,
    readonly msg: ForwardMessage,
    readonly encoded: Buffer,
    readonly publishedAt: number,
    here: Iterable<string>,
  ) {
    this.until = publishedAt + RESEND_FOR_MS;
    // The sessions here when it was published got it with the local deliveries.
    for (const key of here) this.delivered.add(key);
  }

  /** The waiter of the copy for `node` (and the shared groups it is to serve there). */
  to(node: string, groups: GroupRef[] | undefined): ForwardWaiter {
    this.sent.add(node);
    this.attempted.add(node);
    return {
      hold: () => undefined,
      // Taken: sessions it hands over from now on have it.
      release: () => {
        this.took.add(node);
        this.failed.delete(node);
        this.refused.delete(node);
      },
      fail: (err: unknown) => {
        this.sent.delete(node);
        this.failed.add(node);
        if (err instanceof BatchRefused) this.refused.add(node);
        else this.refused.delete(node);
        this.later(node, groups);
      },
    };
  }

  /** The message as a receiving node decodes it. */
  get message(): ReceivedMessage {
    return (this.received ??= decodeFrame(frame(1, [this.encoded], this.encoded.length))[0]!);
  }

  /**
   * Whether a session that came here from `node` after the message was published lacks it: no
   * node took a copy (else the session may have been there and carried it along), and `node`
   * never had one, or refused it whole; or (`handedOver` false) the session was adopted from a
   * node whose copy failed. A copy that failed without a refusal (no answer) may have been
   * delivered there, so a session that node handed over is left alone (no second copy).
   */
  lacks(node: string, handedOver: boolean): boolean {
    if (this.took.size > 0) return false;
    return !this.attempted.has(node) || this.refused.has(node) || (!handedOver && this.failed.has(node));
  }

  /** Routed again in a second (`node`: the one that refused, for the log). */
  later(node: string | undefined, groups: GroupRef[] | undefined): void {
    setTimeout(() => this.forwarder.resend(this, node, groups), RESEND_EVERY_MS).unref();
  }
}

/** The episode key of malformed frames received (node ids cannot be empty). */
const MALFORMED = '';

export interface ForwarderOptions {
  readonly nodeId: string;
  readonly routes: RouteTable;
  /** Whether a node is alive in membership. */
  alive(nodeId: string): boolean;
  /** Whether the route table is confirmed current (RouteConfirmation): QoS 1/2 is refused while not. */
  routesCurrent(): boolean;
  readonly deliver: DeliverReceived;
  readonly deliverHere: DeliverHere;
  /** The sessions (by key) served here whose non-shared subscriptions match `topic`: a message published here reached them. */
  localSubscribers(tenantId: string, topic: string): Iterable<string>;
  /**
   * The node a session served here was adopted from (taken over without a hand-over), or with
   * `handedOverSince`, else the node that handed it over to this node since then.
   */
  cameFrom(key: string, handedOverSince: number | undefined): string | undefined;
  readonly logger: Logger;
  readonly clock: () => number;
}

/**
 * Cross-node delivery: a published message goes to every live node with a matching route, in a
 * per-destination batch sent after 1 ms or at 64 KB (one NATS publish per destination per flush),
 * and what other nodes forward here is delivered locally (docs/cluster.md § Forwarding).
 */
export class Forwarder {
  forwarded = 0;
  received = 0;
  failures = 0;
  /** Messages sent with a copy id so far, and this forwarder's start: with the node id, unique copy ids. */
  private copies = 0;
  private readonly startedAt = Date.now();
  /** Messages nobody sends again (wills) within their resend window: a session arriving here may need one. */
  private readonly resends = new Set<Resend>();
  /** Copy ids of messages delivered here (or being delivered), and when: a second copy is dropped. */
  private readonly copiesSeen = new Map<string, number>();
  /** QoS 1/2 publishes refused because the route table was not confirmed current. */
  unconfirmedRefused = 0;
  private nc: NatsConnection | undefined;
  private sub: Subscription | undefined;
  private readonly batches = new Map<string, Batch>();
  private flushTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly self: PickSelf;
  private readonly alive: (nodeId: string) => boolean;
  /** One warn line per episode of failed batches to a node, and one per episode of malformed frames. */
  private readonly warnings: RepeatedWarning;

  constructor(private readonly opts: ForwarderOptions) {
    this.self = { id: opts.nodeId, weight: nodeWeight(opts.nodeId) };
    this.alive = (node) => opts.alive(node);
    this.warnings = new RepeatedWarning(
      opts.logger,
      (key) => (key === MALFORMED ? 'malformed forwarded frames' : `forwarding to node ${key}`),
      opts.clock,
    );
  }

  /** Starts receiving on this node's subject (the client subscribes again by itself after a reconnect). */
  attach(nc: NatsConnection): void {
    this.nc = nc;
    this.sub = nc.subscribe(forwardSubject(this.opts.nodeId), { callback: (err, m) => (err === null ? this.receive(m) : undefined) });
  }

  /**
   * Queues `msg` for every other live node whose routes match it, and for the node picked for each
   * matching shared group; returns how many nodes. `groups` are the message's groups with local
   * members: `here[i]` turns false when `groups[i]` is assigned to another node. QoS 1/2 hold
   * `waiter` until each destination confirmed its batch.
   */
  forward(
    tenantId: string,
    msg: ForwardMessage,
    waiter: ForwardWaiter | undefined,
    groups: readonly LocalGroup[],
    here: boolean[] | undefined,
  ): number {
    const routes = this.opts.routes;
    // A node that never reached NATS serves alone (docs/cluster.md § While NATS is away).
    if (this.nc === undefined) return 0;
    if (msg.qos > 0 && waiter === undefined && !this.opts.routesCurrent()) {
      // Nobody sends it again (a will): this node does, once its routes are confirmed.
      this.resendOf(tenantId, msg).later(undefined, undefined);
      return 0;
    }
    if (msg.qos > 0 && waiter !== undefined && !this.opts.routesCurrent()) {
      // A route missing from the table would make this an acknowledgement for nobody [docs/cluster.md § Routes that heal].
      this.unconfirmedRefused++;
      waiter.hold();
      waiter.fail(new Error("this node's routes are not confirmed current (after a NATS outage, a new watch or a lapsed lease)"));
      return 0;
    }
    if (!routes.has(tenantId)) return 0;
    if (routes.hasGroups(tenantId)) return this.forwardShared(tenantId, msg, waiter, groups, here);
    let encoded: Buffer | undefined;
    let resend: Resend | undefined;
    let count = 0;
    let departed: string[] | undefined;
    routes.nodesFor(tenantId, msg.topic, (node) => {
      if (!this.opts.alive(node)) {
        (departed ??= []).push(node);
        return;
      }
      if (waiter === undefined && msg.qos > 0) resend ??= this.resendOf(tenantId, msg);
      encoded ??= resend?.encoded ?? encodeMessage(tenantId, msg, this.opts.clock());
      this.append(node, undefined, encoded, msg.qos > 0, resend?.to(node, undefined) ?? waiter);
      count++;
    });
    if (departed !== undefined) this.departedRoute(tenantId, msg, waiter, resend, departed);
    return count;
  }

  /**
   * A route of a node that left matched: until the sessions it served have new owners (whose
   * routes replace its own, then purged), a QoS 1/2 message cannot be acknowledged — the
   * publisher gets no success and sends it again. QoS 0 is at most once.
   */
  private departedRoute(
    tenantId: string,
    msg: ForwardMessage,
    waiter: ForwardWaiter | undefined,
    resend: Resend | undefined,
    departed: readonly string[],
  ): void {
    if (msg.qos === 0) return;
    this.failures++;
    if (waiter === undefined) {
      // Nobody sends it again: this node does, once the departed node's sessions have new owners.
      const r = resend ?? this.resendOf(tenantId, msg);
      for (const node of departed) r.failed.add(node);
      r.later(undefined, undefined);
      return;
    }
    waiter.hold();
    waiter.fail(new Error('a matching route belongs to a node that left and whose sessions are not adopted yet'));
  }

  /** A message nobody sends again, to be sent again where it is refused: its copies carry one id. */
  private resendOf(tenantId: string, msg: ForwardMessage): Resend {
    const now = this.opts.clock();
    const encoded = encodeMessage(tenantId, msg, now, `${this.opts.nodeId}:${this.startedAt}:${++this.copies}`);
    this.sweepResends(now);
    const r = new Resend(this, tenantId, msg, encoded, now, this.opts.localSubscribers(tenantId, msg.topic));
    this.resends.add(r);
    return r;
  }

  private sweepResends(now: number): void {
    for (const r of this.resends) if (now > r.until) this.resends.delete(r);
  }

  /**
   * A session came to this node from `from` (handed over, or adopted without a hand-over): the
   * wills of the last minute that it lacks ({@link Resend.lacks}) are delivered to it here, once.
   * Without this, a will published while this node's routes were unconfirmed, or while `from`
   * refused it, missed a subscriber that moved here meanwhile.
   */
  sessionArrived(key: string, from: string, handedOver: boolean): void {
    if (this.resends.size === 0) return;
    this.sweepResends(this.opts.clock());
    for (const r of this.resends) {
      if (r.delivered.has(key) || !r.lacks(from, handedOver)) continue;
      this.opts.deliverHere(r.message, r.delivered, (k) => k === key);
    }
  }

  /** {@link Resend}: the message routed again where its routes lead now, to nodes without a copy; `groups` picked again. */
  resend(r: Resend, node: string | undefined, groups: GroupRef[] | undefined): void {
    if (this.stopped) return;
    if (this.opts.clock() > r.until) {
      this.opts.logger.warn(
        { tenantId: r.tenantId, topic: r.msg.topic, node },
        `gave up sending a QoS ${r.msg.qos} message nobody sends again (a will) to the other nodes after ${RESEND_FOR_MS / 1000} s`,
      );
      return;
    }
    if (!this.opts.routesCurrent()) {
      r.later(node, groups);
      return;
    }
    // Routed again rather than sent to `node` again: the sessions it refused for may have moved.
    const { tenantId, msg } = r;
    const routes = this.opts.routes;
    let departed = false;
    // The sessions of a node whose copy failed that this node took over since get it here; while
    // such a node is gone but still has routes (sessions without a new owner yet), it is looked at again.
    for (const f of r.failed) {
      const since = r.refused.has(f) ? r.publishedAt : undefined;
      this.opts.deliverHere(r.message, r.delivered, (k) => this.opts.cameFrom(k, since) === f);
      if (this.opts.alive(f)) continue;
      if (routes.hasNode(f)) departed = true;
      else r.failed.delete(f);
    }
    routes.nodesFor(tenantId, msg.topic, (n) => {
      if (!this.opts.alive(n)) {
        departed = true;
        r.failed.add(n);
      } else if (!r.sent.has(n)) this.append(n, undefined, r.encoded, true, r.to(n, undefined));
    });
    if (groups !== undefined)
      routes.groupsFor(tenantId, msg.topic, (g) => {
        if (!groups.some((x) => sameRef(x, g))) return;
        const picked = g.pick(this.self, undefined, this.alive, msg.publisherClientId, msg.topic);
        if (picked === undefined || picked === this.self.id) return;
        this.append(picked, encodeGroups([g]), r.encoded, true, r.to(picked, [g]));
      });
    if (departed) r.later(undefined, undefined);
  }

  /**
   * {@link forward} in a tenant where other nodes have shared groups: each matching group goes to
   * one node cluster-wide (docs/cluster.md § Shared subscriptions), named in that node's copy; a
   * node whose only match is a group assigned elsewhere gets nothing.
   */
  private forwardShared(
    tenantId: string,
    msg: ForwardMessage,
    waiter: ForwardWaiter | undefined,
    groups: readonly LocalGroup[],
    here: boolean[] | undefined,
  ): number {
    // node → the groups it is to serve (undefined: none, its plain routes only). Built per message:
    // this is the path of shared groups across nodes only.
    const dest = new Map<string, GroupRef[] | undefined>();
    const routes = this.opts.routes;
    let departed: string[] | undefined;
    routes.nodesFor(tenantId, msg.topic, (node) => {
      if (this.opts.alive(node)) dest.set(node, undefined);
      else (departed ??= []).push(node);
    });
    routes.groupsFor(tenantId, msg.topic, (g) => {
      let i = groups.length - 1;
      while (i >= 0 && !sameGroup(groups[i]!, g)) i--;
      const node = g.pick(this.self, i < 0 ? undefined : groups[i], this.alive, msg.publisherClientId, msg.topic);
      if (node === undefined || node === this.self.id) return;
      if (i >= 0 && here !== undefined) here[i] = false;
      const list = dest.get(node);
      if (list === undefined) dest.set(node, [g]);
      else list.push(g);
    });
    if (dest.size === 0) {
      if (departed !== undefined) this.departedRoute(tenantId, msg, waiter, undefined, departed);
      return 0;
    }
    const resend = waiter === undefined && msg.qos > 0 ? this.resendOf(tenantId, msg) : undefined;
    const encoded = resend?.encoded ?? encodeMessage(tenantId, msg, this.opts.clock());
    for (const [node, list] of dest)
      this.append(node, list === undefined ? undefined : encodeGroups(list), encoded, msg.qos > 0, resend?.to(node, list) ?? waiter);
    if (departed !== undefined) this.departedRoute(tenantId, msg, waiter, resend, departed);
    return dest.size;
  }

  /** Appends one message: `encoded` as it is, or after `groups` in place of its empty group list. */
  private append(node: string, groups: Buffer | undefined, encoded: Buffer, confirmed: boolean, waiter: ForwardWaiter | undefined): void {
    const size = groups === undefined ? encoded.length : groups.length + encoded.length - NO_GROUPS_BYTES;
    let b = this.batches.get(node);
    // A large message goes in a batch of its own: the others do not share its fate with NATS's max_payload.
    if (b !== undefined && b.bytes + size > FLUSH_AT_BYTES) {
      this.flush(node, b);
      b = undefined;
    }
    if (b === undefined) this.batches.set(node, (b = { parts: [], messages: 0, bytes: 0, confirmed: false, waiters: [] }));
    if (groups === undefined) b.parts.push(encoded);
    else b.parts.push(groups, encoded.subarray(NO_GROUPS_BYTES));
    b.messages++;
    b.bytes += size;
    if (confirmed) {
      b.confirmed = true;
      if (waiter !== undefined) {
        waiter.hold();
        b.waiters.push(waiter);
      }
    }
    if (b.bytes >= FLUSH_AT_BYTES) this.flush(node, b);
    else this.flushTimer ??= setTimeout(() => this.flushAll(), FLUSH_AFTER_MS);
  }

  private flushAll(): void {
    this.flushTimer = undefined;
    for (const [node, b] of this.batches) this.flush(node, b);
  }

  private flush(node: string, b: Batch): void {
    this.batches.delete(node);
    const count = b.messages;
    this.forwarded += count;
    const nc = this.nc;
    try {
      if (nc === undefined || nc.isClosed()) throw new Error('the NATS connection is closed');
      const data = frame(count, b.parts, b.bytes);
      if (!b.confirmed) {
        // QoS 0: at most once, as MQTT allows; nothing waits.
        nc.publish(forwardSubject(node), data);
        return;
      }
      nc.request(forwardSubject(node), data, { timeout: FORWARD_TIMEOUT_MS }).then(
        (reply) => {
          if (reply.data.length === 1 && reply.data[0] === REPLY_OK[0]) for (const w of b.waiters) w.release();
          else if (reply.data.length === 1 && reply.data[0] === REPLY_REFUSED[0]) this.failed(node, b, count, new BatchRefused(node));
          else this.failed(node, b, count, new Error(`node ${node} could not deliver or store the batch`));
        },
        (err: unknown) => this.failed(node, b, count, err),
      );
    } catch (err) {
      this.failed(node, b, count, err);
    }
  }

  private failed(node: string, b: Batch, count: number, err: unknown): void {
    this.failures += count;
    this.warnings.report(
      node,
      { node, messages: count, confirmed: b.confirmed, err: describeError(err) },
      `forwarding ${count} message(s) to node ${node} failed${b.waiters.length > 0 ? '; their publishers get no success' : ''}`,
    );
    for (const w of b.waiters) w.fail(err);
  }

  private receive(m: Msg): void {
    if (this.stopped) return;
    let messages: ReceivedMessage[];
    try {
      messages = decodeFrame(m.data);
    } catch (err) {
      // A hostile or corrupt frame is dropped whole; the sender (if it waits) is told at once.
      this.warnings.report(
        MALFORMED,
        { bytes: m.data.length, err: err instanceof FrameError ? err.message : describeError(err) },
        'dropped a malformed forwarded frame',
      );
      this.reply(m, REPLY_FAILED);
      return;
    }
    this.received += messages.length;
    const copies = this.firstCopies(messages);
    this.opts.deliver(copies.messages, (reply) => {
      // A copy that could not be delivered may come again.
      if (reply !== 'delivered') for (const id of copies.ids) this.copiesSeen.delete(id);
      this.reply(m, reply === 'delivered' ? REPLY_OK : reply === 'refused' ? REPLY_REFUSED : REPLY_FAILED);
    });
  }

  /**
   * The messages of a frame without those whose copy id was seen here before (a will sent again
   * because its reply was lost, the first copy delivered late), and the ids seen now.
   */
  private firstCopies(messages: ReceivedMessage[]): { messages: ReceivedMessage[]; ids: string[] } {
    let ids: string[] | undefined;
    let kept: ReceivedMessage[] | undefined;
    for (let i = 0; i < messages.length; i++) {
      const id = messages[i]!.copyId;
      if (id === undefined) {
        kept?.push(messages[i]!);
        continue;
      }
      if (this.copiesSeen.has(id)) {
        kept ??= messages.slice(0, i);
        continue;
      }
      const now = this.opts.clock();
      if (this.copiesSeen.size >= COPIES_SWEEP_AT)
        for (const [k, t] of this.copiesSeen) if (now - t > COPIES_KEPT_MS) this.copiesSeen.delete(k);
      this.copiesSeen.set(id, now);
      (ids ??= []).push(id);
      kept?.push(messages[i]!);
    }
    return { messages: kept ?? messages, ids: ids ?? [] };
  }

  /** Answers a request (a QoS 0 batch has no reply subject); the connection may be gone by now. */
  private reply(m: Msg, body: Uint8Array): void {
    if (m.reply === undefined || m.reply === '') return;
    try {
      m.respond(body);
    } catch (err) {
      this.opts.logger.debug({ err: describeError(err) }, 'cannot answer a forwarded batch; the sender times out');
    }
  }

  /** Sends what is batched, then stops receiving. */
  stop(): void {
    if (this.flushTimer !== undefined) clearTimeout(this.flushTimer);
    this.flushAll();
    this.stopped = true;
    this.sub?.unsubscribe();
    this.warnings.stop();
  }
}
