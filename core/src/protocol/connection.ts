import type { Duplex } from 'node:stream';
import mqtt, { type IDisconnectPacket, type Packet } from 'mqtt-packet';
import type { ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { ConnectLimits, Engine, LiveLimits } from '../broker/engine';
import type { TenantState } from '../tenancy/tenant-usage';
import type { Session, Delivery } from '../session/session';
import type { WheelEntry } from '../session/timer-wheel';
import { FrameReader, type FrameSink } from '../codec/frame-reader';
import { encodeAck, patchPacketId } from '../codec/publish-codec';
import { RC } from '../codec/reason-codes';
import { PACKET, type AckType } from '../codec/packet-types';
import type { PublishAck } from './publish-ack';
import { CONNECTED_HANDLERS } from './handlers';
import { PRE_CONNECT_MAX_PACKET, preConnectFrame, type EarlyFrames } from './pre-connect';
import type {
  AuthExchange,
  CloseCause,
  ConnectionHandover,
  ConnectionPort,
  ConnectionState,
  PendingConnect,
  ProtocolErrorEvent,
} from './connection-port';
import { canWrite, ConnectionMeters, meterInbound, meterOutbound, queueOverflowed, throttleTenantInbound } from './flow-control';
import { encodeV5Publish, type OutboundAliases } from './outbound-aliases';
import { flushAcks, queueAck } from './ack-queue';
import { connectionEnded } from './connection-end';

import type { ConnectionOrigin } from '../transport/connection-origin';

/** Fixed header flags each packet type must carry [MQTT-2.2.2-1], [MQTT-2.2.2-2] (PUBLISH checked by its decoder). */
const REQUIRED_FLAGS = [-1, 0, 0, -1, 0, 0, 2, 0, 2, 0, 2, 0, 0, 0, 0, 0];

/**
 * How long a socket the broker ended (socket.end(), after a DISCONNECT or CONNACK it had to send)
 * may wait for the peer's FIN before it is destroyed (docs/security.md § Socket cleanup).
 */
const END_LINGER_MS = 1000;

// mqtt-packet pre-builds 65,536 two-byte buffers (≈ 6 MB) the first time it encodes a packet id;
// Bifro encodes PUBLISH and its acknowledgements itself, so the few packets left to mqtt-packet
// (CONNACK, SUBACK, ...) allocate their numbers as needed instead.
(mqtt.writeToStream as typeof mqtt.writeToStream & { cacheNumbers: boolean }).cacheNumbers = false;

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
export class MqttConnection implements ConnectionPort, WheelEntry, FrameSink {
  // Members of ConnectionPort are documented there. Field order is the object's layout: keep it.
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
  receiveMaximum = 65535;
  maxPacketSizeOut = Number.MAX_SAFE_INTEGER;
  topicAliasMaximumOut = 0;
  topicAliasMaximumIn = 0;
  requestProblemInfo = true;
  normalDisconnect = false;
  closeCause: CloseCause | undefined;
  /** When the client's credentials expire (the auth plugin's `expiresAt`, ms since the epoch; 0: never). */
  private credentialsExpireAt = 0;
  authExchange: AuthExchange | undefined;
  authMethod: string | undefined;
  pendingConnect: PendingConnect | undefined;
  handover: ConnectionHandover | undefined;
  limits!: ConnectLimits;
  live!: LiveLimits;
  tenant!: TenantState;
  /** Rate windows and flow state (./flow-control.ts), allocated when the connection first publishes, sends or reads metered data. */
  private meters: ConnectionMeters | undefined;
  /** Packets received after CONNECT and before CONNACK (./pre-connect.ts), replayed after CONNACK. */
  early: EarlyFrames | undefined;
  aliasesIn: (string | undefined)[] | undefined;
  /** Outbound topic aliases (./outbound-aliases.ts), allocated at the first aliased PUBLISH. */
  private aliasesOut: OutboundAliases | undefined;
  private readonly reader: FrameReader;
  private readonly connectDeadline: number;
  /** Writes of the current tick are corked (flushed on the next tick). */
  corked = false;
  /** Reading is paused by flow control (slowDown in ./flow-control.ts). */
  slowed = false;
  /** Acknowledgements waiting for storage writes, in PUBLISH order (./ack-queue.ts). */
  ackQueue: PublishAck[] | undefined;
  /** A handler that awaits a plugin holds further frames until it is done, keeping packet order. */
  private held: Buffer[] | undefined;

  constructor(
    readonly socket: Duplex,
    readonly origin: ConnectionOrigin,
    readonly engine: Engine,
  ) {
    this.lastActivity = engine.wheel.now;
    this.connectDeadline = engine.wheel.clock() + engine.config.mqtt.connectTimeoutMs;
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
    // A cluster node whose lease ran out (this process was paused, or cut off from NATS) fences
    // its sessions, this one's included, before any of their bytes is served.
    if (!this.engine.topology.serving() && (this.state as string) === 'closed') return;
    meterInbound(this, chunk.length, now);
    this.receive(chunk);
    if (this.state === 'connected') throttleTenantInbound(this);
  }

  /** The socket closed or failed. */
  onSocketGone(): void {
    this.closed();
  }

  /** The connection's meters, allocated on first use. */
  get m(): ConnectionMeters {
    return (this.meters ??= new ConnectionMeters());
  }

  /** Reading is held until a plugin answers ({@link hold}). */
  get holding(): boolean {
    return this.held !== undefined;
  }

  overPublishRate(maxPerSecond: number): boolean {
    return this.m.countPublish(this.engine.wheel.now, maxPerSecond);
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

  isClosed(): boolean {
    return this.state === 'closed';
  }

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
      preConnectFrame(this, header, type, body, frame);
      return;
    }
    CONNECTED_HANDLERS[type]!(this, header, body, frame);
  }

  replayEarlyFrames(): void {
    const early = this.early;
    if (early === undefined) return;
    this.early = undefined;
    const f = early.frames;
    for (let i = 0; i < f.length && this.state === 'connected'; i += 3)
      this.onFrame(f[i] as number, f[i + 1] as Buffer, f[i + 2] as Buffer);
  }

  refreshLiveLimits(): LiveLimits {
    this.live = this.engine.liveLimits(this.client!.tenantId);
    return this.live;
  }

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
    if (this.credentialsExpireAt !== 0 && now >= this.credentialsExpireAt) {
      // The auth plugin's expiresAt passed without a re-authentication (v5 AUTH 0x19) moving it: event byServer.
      this.disconnect(RC.MaximumConnectTime, 'credentials expired');
      return 0;
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
    const next = Math.min(keepAlive, packet, this.credentialsExpireAt === 0 ? Infinity : this.credentialsExpireAt);
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

  /** Arms keep alive (and the packet deadline of a packet already begun). */
  accept(client: ClientInfo, keepAlive: number, credentialsExpireAt = 0): void {
    this.client = client;
    this.live = this.engine.liveLimits(client.tenantId);
    this.tenant = this.engine.usage.state(client.tenantId);
    this.keepAlive = keepAlive;
    this.state = 'connected';
    this.renewCredentials(credentialsExpireAt);
  }

  renewCredentials(expiresAt: number): void {
    this.credentialsExpireAt = expiresAt;
    const next = this.nextDeadline();
    if (next > 0) this.engine.wheel.schedule(this, next);
    else this.engine.wheel.cancel(this);
  }

  // ---- writing ----

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

  /** Flow control decides (canWrite in ./flow-control.ts): socket high-water mark, slow consumers, bandwidth windows. */
  writable(): boolean {
    return canWrite(this);
  }

  sendPublish(d: Delivery, packetId: number, dup: boolean): boolean {
    const msg = d.msg;
    let buf: Buffer;
    const expiry = msg.expiresAt === 0 ? undefined : msg.remainingExpiry(this.engine.wheel.clock());
    const aliasMax = this.topicAliasMaximumOut;
    if (this.v5 && (d.subscriptionIds !== undefined || expiry !== undefined || aliasMax > 0)) {
      const aliases = aliasMax > 0 ? (this.aliasesOut ??= new Map()) : undefined;
      buf = encodeV5Publish(d, packetId, dup, expiry, aliases, aliasMax, this.maxPacketSizeOut);
    } else {
      const template = msg.encoded(this.v5, d.qos, d.retain);
      buf = d.qos === 0 ? template.buf : patchPacketId(template.buf, template.packetIdOffset, packetId, dup);
    }
    // Never send a packet larger than the client's Maximum Packet Size (v5 [MQTT-3.1.2-24]); it is discarded as if sent [MQTT-3.1.2-25].
    if (buf.length > this.maxPacketSizeOut) return false;
    this.write(buf);
    // qos0Pushed/qos1Pushed/qos2Pushed: one boolean when no collector wants them.
    if (this.engine.pushWanted) this.engine.pushed(this.client!, d, packetId, dup);
    meterOutbound(this, buf.length);
    return true;
  }

  queueOverflowed(): void {
    queueOverflowed(this);
  }

  sendPubrel(packetId: number): void {
    this.write(encodeAck(PACKET.PUBREL, packetId, 0, this.v5));
  }

  sendAck(type: AckType, packetId: number, reasonCode: number, topic?: string): void {
    this.write(encodeAck(type, packetId, reasonCode, this.v5));
    if (type === PACKET.PUBREL || type === PACKET.PUBCOMP) return;
    const event = type === PACKET.PUBACK ? 'pubAcked' : 'pubReceived';
    if (this.engine.events.wants(event)) this.engine.emit(event, this.client, { topic, packetId, reasonCode });
  }

  queueAck(ack: PublishAck): void {
    queueAck(this, ack);
  }

  flushAcks(): void {
    flushAcks(this);
  }

  // ---- closing ----

  protocolError(reasonCode: number, why: string, event: ProtocolErrorEvent): void {
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
        this.engine.wheel.schedule(this, this.engine.wheel.clock() + END_LINGER_MS);
      }
    }
    const session = this.session;
    if (!wasConnected || session === undefined || this.client === undefined) return;
    connectionEnded(this.engine, {
      client: this.client,
      session,
      link: this,
      normal: this.normalDisconnect,
      cause: this.closeCause,
      remoteAddress: this.origin.remoteAddress,
    });
  }
}
