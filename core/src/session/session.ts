import type { ClientInfo, ProtocolVersion, QoS, SubscriptionRecord } from '@bifro/spi';
import type { WheelEntry } from './timer-wheel';
import type { Message } from './message';

/** One message on its way to one session, at the QoS and RETAIN flag of that delivery. */
export interface Delivery {
  readonly msg: Message;
  readonly qos: QoS;
  readonly retain: boolean;
  /** v5 Subscription Identifiers of the matching subscriptions. */
  readonly subscriptionIds: readonly number[] | undefined;
}

/** An outbound QoS 1/2 message waiting for the client. */
interface Inflight {
  readonly delivery: Delivery;
  /** `publish`: awaiting PUBACK/PUBREC; `pubrel`: PUBREL sent, awaiting PUBCOMP. */
  phase: 'publish' | 'pubrel';
}

/** What a session needs of the connection that currently serves it. */
export interface SessionLink {
  /** The client's Receive Maximum: most unacknowledged QoS 1/2 PUBLISH it accepts [MQTT-3.3.4-9]. */
  readonly receiveMaximum: number;
  /** false while the socket's write buffer is over its high-water mark. */
  writable(): boolean;
  /** Write a PUBLISH. Returns false when it was dropped (larger than the client's Maximum Packet Size). */
  sendPublish(delivery: Delivery, packetId: number, dup: boolean): boolean;
  sendPubrel(packetId: number): void;
}

/** The broker services a session reports to. */
export interface SessionHost {
  /** Most queued deliveries and what to drop when full, for this session's tenant (SessionInboxSize, QoS0DropOldest). */
  queueLimit(tenantId: string): { readonly maxSize: number; readonly dropOldest: boolean };
  /** A delivery was dropped (queue full, expired, too large). */
  dropped(session: Session, delivery: Delivery, reason: 'queue-full' | 'expired' | 'too-large'): void;
  /** A QoS 1/2 delivery completed (PUBACK / PUBCOMP received). */
  confirmed(session: Session, delivery: Delivery): void;
  /** Timer wheel callback of a disconnected session (will delay, expiry); returns the next deadline or 0. */
  onDeadline(session: Session, now: number): number;
}

/** The will of a session: published on abnormal disconnect, after its delay [MQTT-3.1.2-8], [MQTT-3.1.3-9]. */
export interface SessionWill {
  readonly message: Message;
  readonly delaySeconds: number;
}

/**
 * The state of one MQTT session, keyed by (tenantId, clientId): subscriptions, outbound QoS 1/2
 * in flight, the queue of deliveries waiting for a connection or for the client's receive window,
 * inbound QoS 2 packet ids, the will, and the expiry. It outlives its connection when persistent.
 */
export class Session implements WheelEntry {
  wheelSlot = -1;
  link: SessionLink | undefined;
  readonly subscriptions = new Map<string, SubscriptionRecord>();
  /** Inbound QoS 2 packet ids: PUBREC sent, PUBREL not yet received (§4.3.3). */
  readonly inboundQoS2 = new Set<number>();
  will: SessionWill | undefined;
  /** When the pending will fires (ms since epoch), 0 = none pending. */
  willAt = 0;
  /** When the disconnected session expires (ms since epoch), 0 = not scheduled. */
  expireAt = 0;
  private readonly inflight = new Map<number, Inflight>();
  private queue: Delivery[] = [];
  private queueHead = 0;
  private nextPacketId = 1;

  constructor(
    readonly key: string,
    public client: ClientInfo,
    public protocolVersion: ProtocolVersion,
    /** Session Expiry Interval in seconds (0: ends with the connection). */
    public expirySeconds: number,
    readonly createdAt: number,
    private readonly host: SessionHost,
  ) {}

  get tenantId(): string {
    return this.client.tenantId;
  }

  get clientId(): string {
    return this.client.clientId;
  }

  get connected(): boolean {
    return this.link !== undefined;
  }

  /** Deliveries waiting (queued) plus in flight. */
  get backlog(): number {
    return this.queue.length - this.queueHead + this.inflight.size;
  }

  onWheelTick(now: number): number {
    return this.host.onDeadline(this, now);
  }

  /** Hand a delivery to the session: sent now, queued, or dropped by policy. */
  deliver(d: Delivery): void {
    const link = this.link;
    if (d.qos === 0) {
      // QoS 0 goes straight out while the socket keeps up; behind a full socket it waits in the
      // bounded queue (SessionInboxSize, drop policy QoS0DropOldest) like QoS 1/2.
      if (link !== undefined && this.queueHead === this.queue.length && link.writable()) link.sendPublish(d, 0, false);
      else this.enqueue(d);
      return;
    }
    if (link !== undefined && this.queueHead === this.queue.length && this.inflight.size < link.receiveMaximum && link.writable()) {
      this.send(link, d);
      return;
    }
    this.enqueue(d);
  }

  /** PUBACK (QoS 1) or PUBCOMP (QoS 2) for `packetId`. Returns false when no such packet is in flight. */
  complete(packetId: number): boolean {
    const entry = this.inflight.get(packetId);
    if (entry === undefined) return false;
    this.inflight.delete(packetId);
    this.host.confirmed(this, entry.delivery);
    this.drain();
    return true;
  }

  /** PUBREC for `packetId`: the PUBLISH phase is over, PUBREL goes out. Returns false when unknown. */
  received(packetId: number, failed: boolean): boolean {
    const entry = this.inflight.get(packetId);
    if (entry === undefined || entry.delivery.qos !== 2) return false;
    if (failed) {
      // A PUBREC with a reason code ≥ 0x80 ends the flow (§4.3.3): no PUBREL.
      this.inflight.delete(packetId);
      this.drain();
      return true;
    }
    entry.phase = 'pubrel';
    this.link?.sendPubrel(packetId);
    return true;
  }

  /** Attach a connection: resend what was in flight with DUP [MQTT-4.4.0-1], then the queue. */
  attach(link: SessionLink): void {
    this.link = link;
    for (const [packetId, entry] of this.inflight) {
      if (entry.phase === 'pubrel') {
        link.sendPubrel(packetId);
      } else if (entry.delivery.msg.expired(Date.now())) {
        this.inflight.delete(packetId);
        this.host.dropped(this, entry.delivery, 'expired');
      } else if (!link.sendPublish(entry.delivery, packetId, true)) {
        this.inflight.delete(packetId);
        this.host.dropped(this, entry.delivery, 'too-large');
      }
    }
    this.drain();
  }

  /** Detach the connection; what is in flight stays for the next one. */
  detach(): void {
    this.link = undefined;
  }

  /** Send queued deliveries while the client's window and the socket allow. */
  drain(): void {
    const link = this.link;
    if (link === undefined) return;
    const now = Date.now();
    while (this.queueHead < this.queue.length) {
      const d = this.queue[this.queueHead]!;
      if (d.qos > 0 && this.inflight.size >= link.receiveMaximum) break;
      if (!link.writable()) break;
      this.queue[this.queueHead++] = undefined as unknown as Delivery;
      if (d.msg.expired(now)) {
        this.host.dropped(this, d, 'expired');
        continue;
      }
      if (d.qos === 0) link.sendPublish(d, 0, false);
      else this.send(link, d);
    }
    if (this.queueHead === this.queue.length) {
      this.queue = [];
      this.queueHead = 0;
    } else if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.queueHead);
      this.queueHead = 0;
    }
  }

  /** Drop everything queued and in flight (clean start, session end). */
  clearState(): void {
    this.inflight.clear();
    this.queue = [];
    this.queueHead = 0;
    this.inboundQoS2.clear();
  }

  private send(link: SessionLink, d: Delivery): void {
    const packetId = this.allocatePacketId();
    this.inflight.set(packetId, { delivery: d, phase: 'publish' });
    if (!link.sendPublish(d, packetId, false)) {
      // Too large for the client: discarded as if completed [MQTT-3.1.2-25].
      this.inflight.delete(packetId);
      this.host.dropped(this, d, 'too-large');
    }
  }

  private enqueue(d: Delivery): void {
    const limit = this.host.queueLimit(this.client.tenantId);
    if (this.queue.length - this.queueHead >= limit.maxSize) {
      if (!limit.dropOldest) {
        this.host.dropped(this, d, 'queue-full');
        return;
      }
      const oldest = this.queue[this.queueHead]!;
      this.queue[this.queueHead++] = undefined as unknown as Delivery;
      this.host.dropped(this, oldest, 'queue-full');
    }
    this.queue.push(d);
  }

  private allocatePacketId(): number {
    // Packet ids in use are skipped [MQTT-2.2.1-4]; at most 65535 can be in flight.
    for (let i = 0; i < 65535; i++) {
      const id = this.nextPacketId;
      this.nextPacketId = id === 65535 ? 1 : id + 1;
      if (!this.inflight.has(id)) return id;
    }
    throw new Error('no free packet identifier');
  }
}
