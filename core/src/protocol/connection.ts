import type { Duplex } from 'node:stream';
import mqtt, { type IDisconnectPacket, type Packet } from 'mqtt-packet';
import type { AuthRequest, ClientCertificate, ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { ConnectLimits, Engine, LiveLimits } from './engine';
import { COUNTER, resourceIndex, type TenantState } from '../tenancy/tenant-usage';
import type { Session, SessionLink, Delivery } from '../session/session';
import type { WheelEntry } from '../session/timer-wheel';
import type { ConnectionHandover } from '../workers/handover';
import { FrameReader, type FrameSink } from './codec/frame-reader';
import { encodeAck, encodePublish, patchPacketId } from './codec/publish-codec';
import { decodeConnect, isDecodeFailure, type DecodeFailure, type DecodeFailureEvent, type DecodedConnect } from './codec/packet-decoder';
import { RC } from './reason-codes';
import { PACKET, type AckType } from './packet-types';
import { PublishAck } from './publish-ack';
import { describeError } from '../errors';
import { handleConnect, handleUnsupportedConnect } from './handlers/connect';
import { CONNECTED_HANDLERS, dispatchAuth } from './handlers';

/** Where a connection came from, as the transport established it. */
export interface ConnectionOrigin {
  readonly listener: string;
  /** The client's address (from the PROXY protocol header when the listener accepts it). */
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** The TLS client certificate, on TLS/WSS listeners that request one and got one. */
  readonly clientCertificate?: ClientCertificate;
}

type ConnectionState = 'awaiting-connect' | 'authenticating' | 'connected' | 'closed';

/** Largest packet before CONNECT tells us the tenant's limit. */
const PRE_CONNECT_MAX_PACKET = 1 << 20;

/** Fixed header flags each packet type must carry [MQTT-2.2.2-1], [MQTT-2.2.2-2] (PUBLISH checked by its decoder). */
const REQUIRED_FLAGS = [-1, 0, 0, -1, 0, 0, 2, 0, 2, 0, 2, 0, 0, 0, 0, 0];

/** Index of the tenant's outbound bytes per second in its usage. */
const OUTBOUND_RATE = resourceIndex('TotalOutboundBytesPerSecond');

/** How long reading pauses when the tenant's inbound bytes per second are used up. */
const INBOUND_SLOWDOWN_MS = 100;

/**
 * How long a socket the broker ended (socket.end(), after a DISCONNECT or CONNACK it had to send)
 * may wait for the peer's FIN before it is destroyed (docs/security.md § Socket cleanup).
 */
const END_LINGER_MS = 1000;

/** Bytes a connection writes between two questions about its tenant's outbound quota (bounds the overshoot). */
const OUTBOUND_CHECK_BYTES = 16 * 1024;

/** How long deliveries wait when the tenant's outbound bytes per second are used up. */
const OUTBOUND_RETRY_MS = 100;

// mqtt-packet pre-builds 65,536 two-byte buffers (≈ 6 MB) the first time it encodes a packet id;
// Bifro encodes PUBLISH and its acknowledgements itself, so the few packets left to mqtt-packet
// (CONNACK, SUBACK, ...) allocate their numbers as needed instead.
(mqtt.writeToStream as typeof mqtt.writeToStream & { cacheNumbers: boolean }).cacheNumbers = false;

/** Per-connection rate windows and flow state: only connections that carry traffic need them. */
class ConnectionMeters {
  /** Publish rate window (MsgPubPerSec). */
  pubWindowStart = 0;
  pubWindowCount = 0;
  /** Inbound byte window (InBoundBandWidth). */
  inWindowStart = 0;
  inWindowBytes = 0;
  /** The outbound one-second window: bytes (OutBoundBandWidth) and PUBLISH packets (MinSendPerSec), and the packets of the last one. */
  outWindowStart = 0;
  outWindowBytes = 0;
  outWindowMessages = 0;
  lastWindowMessages = 0;
  /** A drain is scheduled for when the outbound window reopens. */
  outRetry = false;
  /** Bytes written since the tenant's outbound quota was last asked. */
  outSinceCheck = 0;
  /** subscriberStalled (MinSendPerSec) was reported in the current window. */
  stallReported = false;
  /** Since when the socket has been over its write high-water mark (0: it is not). */
  stalledSince = 0;
}

/** The connection a socket belongs to, for the shared socket listeners below. */
const OWNER = Symbol('bifro.connection');
type OwnedSocket = Duplex & { [OWNER]?: MqttConnection };

function onSocketData(this: OwnedSocket, chunk: Buffer): void {
  this[OWNER]!.onData(chunk);
}

function onSocketDrain(this: OwnedSocket): void {
  this[OWNER]!.session?.drain();
}

function onSocketGone(this: OwnedSocket): void {
  this[OWNER]!.onSocketGone();
}

function uncork(conn: MqttConnection): void {
  conn.flush();
}

/**
 * One MQTT connection: owns the socket, the frame reader and the protocol state. Frames are
 * handled in arrival order; PUBLISH and its acknowledgements are decoded by Bifro's own codec,
 * other packets by mqtt-packet. Handlers live in ./handlers, one file per packet type. Writes are
 * corked and flushed once per tick, so many packets leave in one syscall.
 */
export class MqttConnection implements WheelEntry, SessionLink, FrameSink {
  wheelSlot = -1;
  state: ConnectionState = 'awaiting-connect';
  protocolVersion: ProtocolVersion = 4;
  v5 = false;
  client: ClientInfo | undefined;
  session: Session | undefined;
  /** Keep alive in seconds as agreed in CONNECT/CONNACK (0 = none). */
  keepAlive = 0;
  /** Coarse time of the last packet received. */
  lastActivity: number;
  /** The client's Receive Maximum (v5), 65535 otherwise. */
  receiveMaximum = 65535;
  /** The client's Maximum Packet Size (v5). */
  maxPacketSizeOut = Number.MAX_SAFE_INTEGER;
  /** Topic aliases the client accepts from us (v5 Topic Alias Maximum in CONNECT). */
  topicAliasMaximumOut = 0;
  /** Topic aliases we accept (v5 Topic Alias Maximum in CONNACK). */
  topicAliasMaximumIn = 0;
  /** v5 Request Problem Information (default true) [MQTT-3.1.2-29]. */
  requestProblemInfo = true;
  /** Set when the client sent DISCONNECT: no will unless reason 0x04 [MQTT-3.1.2-10]. */
  normalDisconnect = false;
  /**
   * Why the connection ends, for the event {@link closed} reports: the client's DISCONNECT
   * (`byClient`), a close by the broker (`byServer`), or `reported` when its reason was reported
   * already (badPacket, idle, kicked, serverBusy...). Unset: the network connection was lost (`channelError`).
   */
  closeCause: { readonly type: 'byClient' | 'byServer'; readonly reasonCode: number; readonly reason?: string } | 'reported' | undefined;
  /** State of an enhanced authentication exchange in progress. */
  authExchange: { method: string; state: Map<string, unknown>; reauth: boolean } | undefined;
  /** The v5 Authentication Method the client connected with (re-authentication must use it). */
  authMethod: string | undefined;
  /** CONNECT waiting for the end of an enhanced authentication exchange. */
  pendingConnect: { packet: DecodedConnect; clientId: string; assigned: boolean; request: AuthRequest } | undefined;
  /** Worker mode only (docs/multicore.md): hands the connection to the worker owning its tenant once auth names it. */
  handover: ConnectionHandover | undefined;
  /** Settings fixed at CONNECT (set before CONNACK). */
  limits!: ConnectLimits;
  /** Live per-connection limits; replaced when stale. */
  live!: LiveLimits;
  /** The tenant's usage and counters (set at CONNACK). */
  tenant!: TenantState;
  /** Rate windows and flow state, allocated when the connection first publishes, sends or reads metered data. */
  private meters: ConnectionMeters | undefined;
  /** Packets received after CONNECT and before CONNACK (header, body, frame triples), replayed after CONNACK. */
  private early: { frames: (number | Buffer)[]; bytes: number } | undefined;
  /** Inbound topic aliases (v5), allocated at the first alias. */
  aliasesIn: (string | undefined)[] | undefined;
  private aliasesOut: Map<string, number> | undefined;
  private readonly reader: FrameReader;
  private readonly connectDeadline: number;
  private corked = false;
  /** Reading is paused by {@link slowDown}. */
  private slowed = false;
  /** Acknowledgements waiting for storage writes, in PUBLISH order. */
  private ackQueue: PublishAck[] | undefined;
  /** A handler that awaits a plugin holds further frames until it is done, keeping packet order. */
  private held: Buffer[] | undefined;

  constructor(
    readonly socket: Duplex,
    readonly origin: ConnectionOrigin,
    readonly engine: Engine,
  ) {
    this.lastActivity = engine.wheel.now;
    this.connectDeadline = Date.now() + engine.config.mqtt.connectTimeoutMs;
    this.reader = new FrameReader(this, PRE_CONNECT_MAX_PACKET);
    // Shared listener functions find their connection on the socket: no closures per connection.
    (socket as OwnedSocket)[OWNER] = this;
    socket.on('data', onSocketData);
    socket.on('drain', onSocketDrain);
    socket.on('error', onSocketGone);
    socket.on('close', onSocketGone);
    engine.connections.add(this);
    engine.wheel.schedule(this, this.connectDeadline);
  }

  /** Bytes from the socket. */
  onData(chunk: Buffer): void {
    // After the close the socket is read only to see the peer's FIN: what comes is discarded.
    if (this.state === 'closed') return;
    const now = this.engine.wheel.now;
    this.lastActivity = now;
    if (this.state !== 'connected') {
      this.receive(chunk);
      return;
    }
    this.meterInbound(chunk.length, now);
    this.receive(chunk);
    // The tenant's inbound bytes per second (counted per PUBLISH payload) are asked about once per
    // chunk read, not per PUBLISH: over them, reading pauses (docs/tenancy.md § Usage and quotas).
    if (
      this.state === 'connected' &&
      !this.engine.throttler.hasResource(this.client!.tenantId, 'TotalInboundBytesPerSecond') &&
      this.slowDown(INBOUND_SLOWDOWN_MS)
    )
      this.engine.emit('resourceExhausted', this.client, { resource: 'TotalInboundBytesPerSecond' });
  }

  /** The socket closed or failed. */
  onSocketGone(): void {
    this.closed();
  }

  /** The connection's meters, allocated on first use. */
  get m(): ConnectionMeters {
    return (this.meters ??= new ConnectionMeters());
  }

  // ---- reading ----

  private receive(chunk: Buffer): void {
    if (this.held !== undefined) {
      this.held.push(chunk);
      return;
    }
    const reader = this.reader;
    reader.push(chunk, this.engine.wheel.now);
    // A packet left incomplete must finish within mqtt.packetTimeoutMs (the wheel entry is moved
    // earlier if needed; before CONNACK the connect timeout bounds it).
    if (reader.partialSince !== 0 && this.state === 'connected') this.engine.wheel.scheduleBy(this, this.packetDeadline());
  }

  /** Whether the connection is closed (a check after an await, where the compiler narrows too eagerly). */
  isClosed(): boolean {
    return this.state === 'closed';
  }

  /** Largest inbound packet accepted from now on. */
  setMaxInboundPacket(size: number): void {
    this.reader.maxPacketSize = size;
  }

  onMalformedLength(): void {
    this.protocolError(RC.MalformedPacket, 'malformed remaining length', 'badPacket');
  }

  onOversize(size: number): void {
    // A packet over our Maximum Packet Size: DISCONNECT 0x95 (§3.2.2).
    this.protocolError(RC.PacketTooLarge, `packet of ${size} bytes exceeds the maximum`, 'oversizePacketDropped');
  }

  onFrame(header: number, body: Buffer, frame: Buffer): void {
    if (this.state === 'closed') return;
    const type = header >> 4;
    const required = REQUIRED_FLAGS[type]!;
    if (required >= 0 && (header & 0x0f) !== required) {
      this.protocolError(RC.MalformedPacket, `invalid fixed header flags for packet type ${type}`, 'badPacket');
      return;
    }
    if (this.state !== 'connected') {
      this.onPreConnectFrame(header, type, body, frame);
      return;
    }
    CONNECTED_HANDLERS[type]!(this, header, body);
  }

  private onPreConnectFrame(header: number, type: number, body: Buffer, frame: Buffer): void {
    if (this.state === 'awaiting-connect') {
      // The first packet MUST be CONNECT [MQTT-3.1.0-1].
      if (type !== PACKET.CONNECT) {
        this.destroy();
        return;
      }
      if (handleUnsupportedConnect(this, body)) return;
      const connect = decodeConnect(body);
      if (isDecodeFailure(connect)) {
        this.refuseConnect(connect, body[2 + body.readUInt16BE(0)]!);
        return;
      }
      this.state = 'authenticating';
      handleConnect(this, connect);
      return;
    }
    // During an enhanced authentication exchange only AUTH (v5) may arrive [MQTT-3.1.2-30], (§4.12.0).
    if (type === PACKET.AUTH && this.v5) {
      dispatchAuth(this, body);
      return;
    }
    if (this.authExchange !== undefined || this.pendingConnect !== undefined) {
      this.protocolError(RC.ProtocolError, 'packet other than AUTH during authentication', 'protocolViolation');
      return;
    }
    // A client may send packets right after CONNECT without waiting for CONNACK (§3.1.4): they are
    // kept, within the pre-CONNECT packet limit, and handled once the CONNACK is sent.
    const early = (this.early ??= { frames: [], bytes: 0 });
    early.bytes += frame.length;
    if (early.bytes > PRE_CONNECT_MAX_PACKET) {
      this.protocolError(RC.PacketTooLarge, 'too many bytes before CONNACK', 'oversizePacketDropped');
      return;
    }
    early.frames.push(header, body, frame);
  }

  /** Handle the packets that came after CONNECT and before CONNACK (called once CONNACK is sent). */
  replayEarlyFrames(): void {
    const early = this.early;
    if (early === undefined) return;
    this.early = undefined;
    const f = early.frames;
    for (let i = 0; i < f.length && this.state === 'connected'; i += 3)
      this.onFrame(f[i] as number, f[i + 1] as Buffer, f[i + 2] as Buffer);
  }

  /**
   * A CONNECT the decoder refused: 3.1/3.1.1 close without CONNACK (§4.8: a protocol violation
   * closes the connection); v5 may first get CONNACK with 0x81 / 0x82 [MQTT-4.13.1-1].
   */
  private refuseConnect(failure: DecodeFailure, level: number): void {
    this.engine.logger.debug({ remote: this.origin.remoteAddress, reasonCode: failure.code, why: failure.why }, 'refusing CONNECT');
    this.engine.emit(failure.event, undefined, { reasonCode: failure.code, reason: failure.why, remoteAddress: this.origin.remoteAddress });
    this.closeCause = 'reported';
    if (level !== 5) {
      this.destroy();
      return;
    }
    this.write(Buffer.from([0x20, 0x03, 0x00, failure.code, 0x00]));
    this.end();
  }

  /**
   * Stop reading the socket for a while (the tenant's inbound bandwidth quota is exhausted): the
   * client is slowed by TCP flow control, nothing is dropped (docs/tenancy.md § Usage and quotas).
   */
  slowDown(ms: number): boolean {
    if (this.slowed || this.state === 'closed') return false;
    this.slowed = true;
    this.socket.pause();
    setTimeout(() => {
      this.slowed = false;
      if (this.state !== 'closed' && this.held === undefined) this.socket.resume();
    }, ms).unref();
    return true;
  }

  /** Fetch the tenant's current live limits after a settings change. */
  refreshLiveLimits(): LiveLimits {
    this.live = this.engine.liveLimits(this.client!.tenantId);
    return this.live;
  }

  /**
   * InBoundBandWidth: once the connection has read its bytes for the current second, reading
   * pauses for as long as those bytes are worth at the limit (a large chunk buys a longer pause),
   * so the average rate stays at the limit; TCP flow control slows the client, nothing is dropped.
   */
  private meterInbound(bytes: number, now: number): void {
    let live = this.live;
    if (live.stale) live = this.refreshLiveLimits();
    const limit = live.inBoundBandWidth;
    if (limit === 0) return;
    const m = this.m;
    if (now - m.inWindowStart >= 1000) {
      m.inWindowStart = now;
      m.inWindowBytes = 0;
    }
    m.inWindowBytes += bytes;
    if (m.inWindowBytes < limit) return;
    const pauseMs = Math.max(1, Math.ceil((m.inWindowBytes / limit) * 1000) - (now - m.inWindowStart));
    if (this.slowDown(pauseMs)) {
      // The next window starts when reading resumes.
      m.inWindowStart = now + pauseMs;
      m.inWindowBytes = 0;
    }
  }

  /** Hold further frames until `work` settles (a plugin answered asynchronously). */
  hold(work: Promise<unknown>): void {
    if (this.held === undefined) {
      this.held = [];
      this.socket.pause();
    }
    const release = (): void => {
      const held = this.held;
      this.held = undefined;
      if (this.state === 'closed' || held === undefined) return;
      this.socket.resume();
      for (const chunk of held) this.receive(chunk);
    };
    work.then(release, release);
  }

  // ---- timers ----

  /**
   * Timer wheel callback, the connection's one entry for all its deadlines: connect timeout before
   * CONNACK; after it keep alive (1.5 × keepAlive, 3.1.1 [MQTT-3.1.2-24], 5.0 [MQTT-3.1.2-22]; keepAlive
   * is never 0, mqtt.maxKeepAliveSeconds caps it) and the packet deadline (mqtt.packetTimeoutMs) of a
   * partly received packet, whichever comes first; once closed by {@link end}, the linger deadline.
   */
  onWheelTick(now: number): number {
    if (this.state === 'closed') {
      // Ended, and the peer has not closed its side within END_LINGER_MS: drop the socket.
      if (!this.socket.destroyed) this.socket.destroy();
      return 0;
    }
    if (this.state !== 'connected') {
      if (now < this.connectDeadline) return this.connectDeadline;
      this.engine.emit('connectTimeout', undefined, { remoteAddress: this.origin.remoteAddress });
      this.destroy();
      return 0;
    }
    if (this.reader.partialSince !== 0 && now >= this.packetDeadline()) {
      if (this.held !== undefined || this.slowed) {
        // The broker is not reading (a plugin answer, the inbound bandwidth quota): not the client's delay.
        this.reader.partialSince = now;
      } else {
        const ms = this.engine.config.mqtt.packetTimeoutMs;
        // v5: DISCONNECT 0x81, the bytes received do not make a packet (§4.13); v3: closed. Event badPacket.
        this.protocolError(RC.MalformedPacket, `packet not complete ${ms} ms after its first byte`, 'badPacket');
        return 0;
      }
    }
    if (this.keepAlive > 0 && now >= this.keepAliveDeadline()) {
      this.closeCause = 'reported';
      this.engine.emit('idle', this.client, { remoteAddress: this.origin.remoteAddress, keepAlive: this.keepAlive });
      this.disconnect(RC.KeepAliveTimeout);
      return 0;
    }
    return this.nextDeadline();
  }

  /** The earliest deadline of a connected connection (0: none). */
  private nextDeadline(): number {
    const keepAlive = this.keepAlive > 0 ? this.keepAliveDeadline() : Infinity;
    const packet = this.reader.partialSince !== 0 ? this.packetDeadline() : Infinity;
    const next = Math.min(keepAlive, packet);
    return next === Infinity ? 0 : next;
  }

  /** mqtt.packetTimeoutMs after the first byte of the packet being gathered (one slot added: it is read from the coarse clock). */
  private packetDeadline(): number {
    return this.reader.partialSince + this.engine.config.mqtt.packetTimeoutMs + this.engine.wheel.slotMs;
  }

  /**
   * 1.5 × keep alive after the last packet. `lastActivity` is read from the wheel's
   * coarse clock, which lags by up to one slot: one slot is added so the deadline is never early.
   */
  private keepAliveDeadline(): number {
    return this.lastActivity + this.keepAlive * 1500 + this.engine.wheel.slotMs;
  }

  /** CONNACK accepted: arm keep alive (and the packet deadline of a packet already begun). */
  accept(client: ClientInfo, keepAlive: number): void {
    this.client = client;
    this.live = this.engine.liveLimits(client.tenantId);
    this.tenant = this.engine.usage.state(client.tenantId);
    this.keepAlive = keepAlive;
    this.state = 'connected';
    const next = this.nextDeadline();
    if (next > 0) this.engine.wheel.schedule(this, next);
    else this.engine.wheel.cancel(this);
  }

  // ---- writing ----

  /** Queue bytes; everything written in one tick leaves in one flush. */
  write(buf: Buffer): void {
    if (this.state === 'closed') return;
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(uncork, this);
    }
    this.socket.write(buf);
  }

  flush(): void {
    if (!this.corked) return;
    this.corked = false;
    this.socket.uncork();
  }

  /** Encode a packet with mqtt-packet (CONNACK, SUBACK, ... : not the hot path). */
  send(packet: Packet): void {
    this.write(mqtt.generate(packet, { protocolVersion: this.protocolVersion }));
  }

  /** Bytes waiting in the socket's write buffer: they count against {@link maxQueuedBytes} with the session queue. */
  bufferedBytes(): number {
    return this.socket.writableLength;
  }

  /** mqtt.maxQueuedBytesPerConnection (a getter: no field per connection). */
  get maxQueuedBytes(): number {
    return this.engine.config.mqtt.maxQueuedBytesPerConnection;
  }

  /**
   * Whether the socket takes more now. Over the high-water mark deliveries wait in the session
   * queue (bounded by SessionInboxSize and, with the socket's buffer, by mqtt.maxQueuedBytesPerConnection
   * and MaxTenantQueuedBytes; QoS0DropOldest decides what goes); a subscriber that stays over
   * it for slowConsumerTimeoutMs is disconnected, so one slow reader never holds memory for long.
   */
  writable(): boolean {
    const m = this.m;
    if (this.state !== 'connected') return false;
    if (!this.outboundOpen()) return false;
    const mqtt = this.engine.config.mqtt;
    if (this.socket.writableLength < mqtt.writeHighWaterBytes) {
      m.stalledSince = 0;
      return true;
    }
    const now = this.engine.wheel.now;
    if (m.stalledSince === 0) {
      m.stalledSince = now;
      this.engine.emit('subscriberStalled', this.client, { reason: 'writeHighWater', buffered: this.socket.writableLength });
    } else if (now - m.stalledSince > mqtt.slowConsumerTimeoutMs) {
      // Not from inside the delivery loop that asked.
      const stalledMs = now - m.stalledSince;
      setImmediate(() => this.closeSlowConsumer(stalledMs));
    }
    return false;
  }

  /**
   * OutBoundBandWidth (this connection) and TotalOutboundBytesPerSecond (its tenant): when used
   * up, deliveries wait in the session queue (dropped by its policy when it is full) and are
   * drained when the window reopens. The tenant quota is asked at the first write of a tick and
   * then every OUTBOUND_CHECK_BYTES written, not per delivery.
   */
  private outboundOpen(): boolean {
    const m = this.m;
    let live = this.live;
    if (live.stale) live = this.refreshLiveLimits();
    const limit = live.outBoundBandWidth;
    if (limit > 0 && m.outWindowBytes >= limit) {
      const now = this.engine.wheel.now;
      if (now - m.outWindowStart < 1000) {
        this.retryOutboundIn(m.outWindowStart + 1000 - now);
        return false;
      }
      this.rollOutWindow(now);
    }
    if ((!this.corked || m.outSinceCheck >= OUTBOUND_CHECK_BYTES) && !this.tenantOutboundAllowed()) {
      if (!m.outRetry) this.engine.emit('resourceExhausted', this.client, { resource: 'TotalOutboundBytesPerSecond' });
      this.retryOutboundIn(OUTBOUND_RETRY_MS);
      return false;
    }
    return true;
  }

  private tenantOutboundAllowed(): boolean {
    this.m.outSinceCheck = 0;
    return this.engine.throttler.hasResource(this.client!.tenantId, 'TotalOutboundBytesPerSecond');
  }

  private retryOutboundIn(ms: number): void {
    const m = this.m;
    if (m.outRetry) return;
    m.outRetry = true;
    setTimeout(() => {
      m.outRetry = false;
      if (this.state === 'connected') this.session?.drain();
    }, ms).unref();
  }

  sendPublish(d: Delivery, packetId: number, dup: boolean): boolean {
    const msg = d.msg;
    let buf: Buffer;
    const expiry = msg.expiresAt === 0 ? undefined : msg.remainingExpiry(Date.now());
    if (this.v5 && (d.subscriptionIds !== undefined || expiry !== undefined || this.topicAliasMaximumOut > 0)) {
      let topicAlias: number | undefined;
      let omitTopic = false;
      let newAlias = false;
      let replaced: string | undefined;
      if (this.topicAliasMaximumOut > 0) {
        const aliases = (this.aliasesOut ??= new Map());
        topicAlias = aliases.get(msg.topic);
        if (topicAlias !== undefined) omitTopic = true;
        else if (aliases.size < this.topicAliasMaximumOut) {
          topicAlias = aliases.size + 1;
          newAlias = true;
        } else {
          // Every alias is in use: the oldest mapping is re-bound to this topic; a PUBLISH with
          // topic and alias tells the client (§3.3.2.3.4).
          replaced = aliases.keys().next().value as string;
          topicAlias = aliases.get(replaced);
          newAlias = true;
        }
      }
      buf = encodePublish(msg, {
        qos: d.qos,
        retain: d.retain,
        dup,
        packetId,
        v5: true,
        messageExpiryInterval: expiry,
        subscriptionIds: d.subscriptionIds,
        topicAlias,
        omitTopic,
      }).buf;
      // The alias is known to the client only once a PUBLISH carrying it was sent.
      if (newAlias && buf.length <= this.maxPacketSizeOut) {
        if (replaced !== undefined) this.aliasesOut!.delete(replaced);
        this.aliasesOut!.set(msg.topic, topicAlias!);
      }
    } else {
      const template = msg.encoded(this.v5, d.qos, d.retain);
      buf = d.qos === 0 ? template.buf : patchPacketId(template.buf, template.packetIdOffset, packetId, dup);
    }
    // Never send a packet larger than the client's Maximum Packet Size (v5 [MQTT-3.1.2-24]); it is discarded as if sent [MQTT-3.1.2-25].
    if (buf.length > this.maxPacketSizeOut) return false;
    this.write(buf);
    // qos0Pushed/qos1Pushed/qos2Pushed: one boolean when no collector wants them.
    if (this.engine.pushWanted) this.engine.pushed(this.client!, d, packetId, dup);
    const size = buf.length;
    const tenant = this.tenant;
    tenant.counters[COUNTER.messagesOut]++;
    tenant.counters[COUNTER.bytesOut]! += size;
    const now = this.engine.wheel.now;
    tenant.countRate(OUTBOUND_RATE, size, now);
    const m = this.m;
    m.outSinceCheck += size;
    if (now - m.outWindowStart >= 1000) this.rollOutWindow(now);
    m.outWindowMessages++;
    m.outWindowBytes += size;
    return true;
  }

  private rollOutWindow(now: number): void {
    const m = this.m;
    m.lastWindowMessages = now - m.outWindowStart >= 2000 ? 0 : m.outWindowMessages;
    m.outWindowStart = now;
    m.outWindowMessages = 0;
    m.outWindowBytes = 0;
    m.stallReported = false;
  }

  /**
   * The session queue overflowed: when fewer PUBLISH packets left in the last second than the
   * tenant's MinSendPerSec, the subscriber is reported stalled (once per second).
   */
  queueOverflowed(): void {
    const m = this.m;
    if (this.state !== 'connected' || !this.engine.events.wants('subscriberStalled')) return;
    const now = this.engine.wheel.now;
    if (now - m.outWindowStart >= 1000) this.rollOutWindow(now);
    if (m.stallReported) return;
    const sent = Math.max(m.lastWindowMessages, m.outWindowMessages);
    const min = this.engine.setting(this.client!.tenantId, 'MinSendPerSec');
    if (sent >= min) return;
    m.stallReported = true;
    this.engine.emit('subscriberStalled', this.client, { reason: 'MinSendPerSec', sentPerSecond: sent, minSendPerSec: min });
  }

  sendPubrel(packetId: number): void {
    this.write(encodeAck(PACKET.PUBREL, packetId, 0, this.v5));
  }

  /** Send an acknowledgement; a PUBACK or PUBREC is reported as `pubAcked` / `pubReceived` with the PUBLISH's `topic`. */
  sendAck(type: AckType, packetId: number, reasonCode: number, topic?: string): void {
    this.write(encodeAck(type, packetId, reasonCode, this.v5));
    if (type === PACKET.PUBREL || type === PACKET.PUBCOMP) return;
    const event = type === PACKET.PUBACK ? 'pubAcked' : 'pubReceived';
    if (this.engine.events.wants(event)) this.engine.emit(event, this.client, { topic, packetId, reasonCode });
  }

  /**
   * Acknowledge a PUBLISH (or PUBREL) whose storage writes are tracked by `ack`: it leaves when
   * they are done and every earlier acknowledgement has left [MQTT-4.6.0-2], [MQTT-4.6.0-3]; with
   * nothing to wait for and nothing before it, at once. A failed write is not acknowledged as a
   * success: v5 gets 0x80, a v3 client is disconnected (it will resend); PUBCOMP goes out anyway.
   */
  queueAck(ack: PublishAck): void {
    const queue = this.ackQueue;
    if (!ack.mustQueue() && (queue === undefined || queue.length === 0)) {
      this.sendAck(ack.type, ack.packetId, ack.reasonCode, ack.topic);
      return;
    }
    (this.ackQueue ??= []).push(ack);
    ack.release();
  }

  flushAcks(): void {
    const queue = this.ackQueue;
    if (queue === undefined) return;
    while (queue.length > 0 && queue[0]!.state !== 'waiting') {
      const entry = queue.shift()!;
      if (this.state === 'closed') continue;
      if (entry.state === 'ready' || entry.type === PACKET.PUBCOMP) {
        // PUBCOMP: the release is done in memory whatever storage said (the failure was logged).
        this.sendAck(entry.type, entry.packetId, entry.reasonCode, entry.topic);
      } else if (this.v5) {
        this.reportDistError(entry);
        if (entry.type === PACKET.PUBREC) this.session?.inboundQoS2.delete(entry.packetId);
        this.sendAck(entry.type, entry.packetId, RC.UnspecifiedError, entry.topic);
      } else {
        this.reportDistError(entry);
        this.disconnect(RC.UnspecifiedError, 'storage write failed');
      }
    }
  }

  private reportDistError(entry: PublishAck): void {
    const error = describeError(entry.error);
    this.engine.emit('distError', this.client, { what: 'publish', topic: entry.topic, qos: entry.type === PACKET.PUBACK ? 1 : 2, error });
  }

  // ---- closing ----

  /**
   * Close because of the client's fault: v5 gets DISCONNECT with the reason code first where the
   * spec allows it [MQTT-4.13.1-1]; v3 connections are just closed.
   */
  protocolError(
    reasonCode: number,
    why: string,
    event:
      | 'badPacket'
      | 'protocolViolation'
      | 'oversizePacketDropped'
      | 'invalidTopic'
      | 'malformedTopic'
      | 'receiveLimitExceeded'
      | 'exceedPubRate'
      | DecodeFailureEvent,
  ): void {
    if (this.state === 'closed') return;
    this.engine.logger.debug({ clientId: this.client?.clientId, remote: this.origin.remoteAddress, reasonCode, why }, 'closing connection');
    this.engine.emit(event, this.client, { reasonCode, reason: why, remoteAddress: this.origin.remoteAddress });
    this.closeCause = 'reported';
    if (this.state === 'connected') this.disconnect(reasonCode, why);
    else this.destroy();
  }

  /**
   * The client balancer moves this client (periodic check): v5 DISCONNECT 0x9D (permanent) or
   * 0x9C with the Server Reference; a v3 client is disconnected (it reconnects through whatever
   * routes it).
   */
  redirect(permanent: boolean, serverReference: string | undefined): void {
    if (this.state !== 'connected') return;
    this.engine.emit('redirected', this.client, { remoteAddress: this.origin.remoteAddress, serverReference, permanent });
    this.closeCause = 'reported';
    this.disconnect(permanent ? RC.ServerMoved : RC.UseAnotherServer, undefined, serverReference);
  }

  /** Server-initiated close: v5 DISCONNECT with a reason code, then close. */
  disconnect(reasonCode: number, reasonString?: string, serverReference?: string): void {
    if (this.state === 'closed') return;
    this.closeCause ??= { type: 'byServer', reasonCode, reason: reasonString };
    if (this.v5 && this.state === 'connected') {
      const packet: IDisconnectPacket = { cmd: 'disconnect', reasonCode };
      const properties: IDisconnectPacket['properties'] = {};
      if (reasonString !== undefined && this.requestProblemInfo) properties.reasonString = reasonString;
      if (serverReference !== undefined) properties.serverReference = serverReference;
      if (Object.keys(properties).length > 0) packet.properties = properties;
      this.send(packet);
    }
    this.end();
  }

  /** Flush what is queued, then close the socket. */
  end(): void {
    if (this.state === 'closed') return;
    this.flush();
    this.socket.end();
    this.closed();
  }

  /**
   * Worker mode: let go of the socket without closing it, before CONNACK, when it is handed to the
   * worker owning its tenant. Nothing needs undoing then: no will, no event, nothing counted.
   */
  detach(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.engine.connections.delete(this);
    this.reader.stop();
    this.engine.wheel.cancel(this);
    this.held = undefined;
  }

  /** Close at once. */
  destroy(): void {
    if (this.state === 'closed') return;
    this.socket.destroy();
    this.closed();
  }

  /** The socket is gone (or going): detach from the session, handle will and expiry, once. */
  private closed(): void {
    if (this.state === 'closed') return;
    const wasConnected = this.state === 'connected';
    this.state = 'closed';
    this.engine.connections.delete(this);
    this.reader.stop();
    this.engine.wheel.cancel(this);
    this.held = undefined;
    if (!this.socket.destroyed) {
      if (!this.socket.writableEnded) this.socket.destroy();
      else {
        // Ended by end(): read on (reading may be paused by hold() or slowDown()) so the peer's FIN
        // is seen and the socket closes; what still comes is discarded by onData. A peer that never
        // closes its side is cut off after END_LINGER_MS (onWheelTick). docs/security.md § Socket cleanup.
        this.socket.resume();
        this.engine.wheel.schedule(this, Date.now() + END_LINGER_MS);
      }
    }
    const session = this.session;
    if (!wasConnected || session === undefined || this.client === undefined) return;
    this.engine.usage.add(this.client.tenantId, 'TotalConnections', -1);
    // Flapping detection (security.flapping): every end of a connected session counts, except at shutdown.
    if (!this.engine.shuttingDown) this.engine.gate.disconnected(this.client);
    if (session.link === this) this.engine.sessionDisconnected(session, !this.normalDisconnect);
    const cause = this.closeCause;
    if (cause === 'reported') return;
    const remoteAddress = this.origin.remoteAddress;
    if (cause !== undefined)
      this.engine.emit(cause.type, this.client, { remoteAddress, reasonCode: cause.reasonCode, reason: cause.reason });
    // Closed without a reason while the broker stops: the broker's doing.
    else this.engine.emit(this.engine.shuttingDown ? 'byServer' : 'channelError', this.client, { remoteAddress });
  }

  /** A slow consumer: closed at once (what is buffered for it is discarded), reported as `serverBusy`. */
  private closeSlowConsumer(stalledMs: number): void {
    if (this.state === 'closed') return;
    this.closeCause = 'reported';
    this.engine.emit('serverBusy', this.client, {
      remoteAddress: this.origin.remoteAddress,
      reason: 'slow consumer',
      buffered: this.socket.writableLength,
      stalledMs,
    });
    this.destroy();
  }
}
