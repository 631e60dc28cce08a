import type { Duplex } from 'node:stream';
import mqtt, { type IConnectPacket, type IDisconnectPacket, type Packet } from 'mqtt-packet';
import type { AuthRequest, ClientCertificate, ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { Engine } from './engine';
import type { Session, SessionLink, Delivery } from '../session/session';
import type { WheelEntry } from '../session/timer-wheel';
import { FrameReader, type FrameSink } from './codec/frame-reader';
import { decodePublish, encodeAck, encodePublish, patchPacketId } from './codec/publish-codec';
import { RC } from './reason-codes';
import { handleConnect, handleUnsupportedConnect } from './handlers/connect';
import { handleAuth } from './handlers/auth';
import { handleDisconnect } from './handlers/disconnect';
import { handlePingreq } from './handlers/pingreq';
import { handlePublish } from './handlers/publish';
import { handlePuback } from './handlers/puback';
import { handlePubrec } from './handlers/pubrec';
import { handlePubrel } from './handlers/pubrel';
import { handlePubcomp } from './handlers/pubcomp';
import { handleSubscribe } from './handlers/subscribe';
import { handleUnsubscribe } from './handlers/unsubscribe';

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

/** A PUBACK/PUBREC waiting for its storage writes. */
interface PendingAck {
  readonly type: 4 | 5 | 7;
  readonly packetId: number;
  readonly reasonCode: number;
  state: 'waiting' | 'ready' | 'failed';
}

/** U+FFFD encoded as UTF-8. */
const REPLACEMENT_CHAR = Buffer.from([0xef, 0xbf, 0xbd]);

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
  /** State of an enhanced authentication exchange in progress. */
  authExchange: { method: string; state: Map<string, unknown>; reauth: boolean } | undefined;
  /** The v5 Authentication Method the client connected with (re-authentication must use it). */
  authMethod: string | undefined;
  /** CONNECT waiting for the end of an enhanced authentication exchange. */
  pendingConnect: { packet: IConnectPacket; clientId: string; assigned: boolean; request: AuthRequest } | undefined;
  /** Per-connection publish rate window (MsgPubPerSec). */
  pubWindowStart = 0;
  pubWindowCount = 0;
  aliasesIn: (string | undefined)[] = [];
  private aliasesOut: Map<string, number> | undefined;
  private readonly reader: FrameReader;
  private parser: mqtt.Parser | undefined;
  private readonly connectDeadline: number;
  private corked = false;
  /** Reading is paused by {@link slowDown}. */
  private slowed = false;
  /** Acknowledgements waiting for storage writes, in PUBLISH order. */
  private ackQueue: PendingAck[] | undefined;
  /** The frame mqtt-packet is parsing (its handlers run synchronously inside parse). */
  private currentFrame: Buffer | undefined;
  /** Since when the socket has been over its write high-water mark (0: it is not). */
  private stalledSince = 0;
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
    socket.on('data', (chunk: Buffer) => {
      this.lastActivity = engine.wheel.now;
      this.receive(chunk);
    });
    socket.on('drain', () => this.session?.drain());
    socket.on('error', () => this.closed());
    socket.on('close', () => this.closed());
    engine.wheel.schedule(this, this.connectDeadline);
  }

  // ---- reading ----

  private receive(chunk: Buffer): void {
    if (this.held !== undefined) this.held.push(chunk);
    else this.reader.push(chunk);
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
      this.onPreConnectFrame(type, body, frame);
      return;
    }
    switch (type) {
      case 3: {
        const decoded = decodePublish(header, body, this.v5);
        if (typeof decoded === 'number') {
          this.protocolError(decoded, 'invalid PUBLISH', 'badPacket');
          return;
        }
        handlePublish(this, decoded);
        return;
      }
      case 4:
      case 5:
      case 6:
      case 7: {
        if (body.length < 2) {
          this.protocolError(RC.MalformedPacket, 'acknowledgement without packet id', 'badPacket');
          return;
        }
        const packetId = body.readUInt16BE(0);
        const reasonCode = body.length > 2 ? body[2]! : 0;
        if (type === 4) handlePuback(this, packetId);
        else if (type === 5) handlePubrec(this, packetId, reasonCode);
        else if (type === 6) handlePubrel(this, packetId);
        else handlePubcomp(this, packetId);
        return;
      }
      case 12:
        handlePingreq(this);
        return;
      case 1:
        // A second CONNECT is a protocol error [MQTT-3.1.0-2].
        this.protocolError(RC.ProtocolError, 'second CONNECT', 'protocolViolation');
        return;
      default:
        this.parseWithLibrary(frame);
    }
  }

  private onPreConnectFrame(type: number, body: Buffer, frame: Buffer): void {
    if (this.state === 'awaiting-connect') {
      // The first packet MUST be CONNECT [MQTT-3.1.0-1].
      if (type !== 1) {
        this.destroy();
        return;
      }
      if (handleUnsupportedConnect(this, body)) return;
      this.parseWithLibrary(frame);
      return;
    }
    // While authenticating only AUTH (v5) may arrive [MQTT-3.1.0-2], (§4.12.0).
    if (type === 15 && this.v5) {
      this.parseWithLibrary(frame);
      return;
    }
    this.protocolError(RC.ProtocolError, 'packet before CONNACK', 'protocolViolation');
  }

  /**
   * mqtt-packet decodes ill-formed UTF-8 into U+FFFD instead of refusing it. A U+FFFD in a
   * decoded string whose packet does not carry its encoding (EF BF BD) therefore came from
   * ill-formed bytes: a malformed packet [MQTT-1.5.4-1].
   */
  private illFormed(...strings: (string | undefined)[]): boolean {
    for (const s of strings) {
      if (s !== undefined && s.includes('\uFFFD') && this.currentFrame?.includes(REPLACEMENT_CHAR) !== true) return true;
    }
    return false;
  }

  private parseWithLibrary(frame: Buffer): void {
    let parser = this.parser;
    if (parser === undefined) {
      parser = mqtt.parser({ protocolVersion: this.protocolVersion });
      parser.on('packet', (packet: Packet) => this.onPacket(packet));
      parser.on('error', (err: Error) => this.protocolError(RC.MalformedPacket, err.message, 'badPacket'));
      this.parser = parser;
    }
    this.currentFrame = frame;
    parser.parse(frame);
    this.currentFrame = undefined;
  }

  private onPacket(packet: Packet): void {
    if (this.state === 'closed') return;
    const ill =
      packet.cmd === 'subscribe'
        ? this.illFormed(...packet.subscriptions.map((s) => s.topic))
        : packet.cmd === 'unsubscribe'
          ? this.illFormed(...packet.unsubscriptions)
          : packet.cmd === 'connect'
            ? this.illFormed(packet.clientId, packet.username, packet.will?.topic)
            : false;
    if (ill) {
      this.protocolError(RC.MalformedPacket, 'ill-formed UTF-8 string', 'badPacket');
      return;
    }
    switch (packet.cmd) {
      case 'connect':
        this.state = 'authenticating';
        handleConnect(this, packet);
        return;
      case 'auth':
        handleAuth(this, packet);
        return;
      case 'subscribe':
        handleSubscribe(this, packet);
        return;
      case 'unsubscribe':
        handleUnsubscribe(this, packet);
        return;
      case 'disconnect':
        handleDisconnect(this, packet);
        return;
      default:
        // Packets only a server sends (CONNACK, SUBACK, ...) are a protocol error from a client.
        this.protocolError(RC.ProtocolError, `unexpected ${packet.cmd}`, 'protocolViolation');
    }
  }

  /**
   * Stop reading the socket for a while (the tenant's inbound bandwidth quota is exhausted): the
   * client is slowed by TCP flow control, nothing is dropped (ARCHITECTURE §5 "slowed reading").
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

  /** Timer wheel callback: connect timeout before CONNACK, keep alive (1.5 × keepAlive) after (3.1.1 [MQTT-3.1.2-24], 5.0 [MQTT-3.1.2-22]). */
  onWheelTick(now: number): number {
    if (this.state === 'closed') return 0;
    if (this.state !== 'connected') {
      if (now < this.connectDeadline) return this.connectDeadline;
      this.engine.emit('connectTimeout', undefined, { remoteAddress: this.origin.remoteAddress });
      this.destroy();
      return 0;
    }
    if (this.keepAlive === 0) return 0;
    const deadline = this.keepAliveDeadline();
    if (now < deadline) return deadline;
    this.engine.emit('idle', this.client, { keepAlive: this.keepAlive });
    this.disconnect(RC.KeepAliveTimeout);
    return 0;
  }

  /**
   * 1.5 × keep alive after the last packet. `lastActivity` is read from the wheel's
   * coarse clock, which lags by up to one slot: one slot is added so the deadline is never early.
   */
  private keepAliveDeadline(): number {
    return this.lastActivity + this.keepAlive * 1500 + this.engine.wheel.slotMs;
  }

  /** CONNACK accepted: arm keep alive. */
  accept(client: ClientInfo, keepAlive: number): void {
    this.client = client;
    this.keepAlive = keepAlive;
    this.state = 'connected';
    if (keepAlive > 0) this.engine.wheel.schedule(this, this.keepAliveDeadline());
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

  /**
   * Whether the socket takes more now. Over the high-water mark deliveries wait in the session
   * queue (bounded by SessionInboxSize, QoS0DropOldest decides what goes); a subscriber that stays over
   * it for slowConsumerTimeoutMs is disconnected, so one slow reader never holds memory for long.
   */
  writable(): boolean {
    if (this.state !== 'connected') return false;
    const mqtt = this.engine.config.mqtt;
    if (this.socket.writableLength < mqtt.writeHighWaterBytes) {
      this.stalledSince = 0;
      return true;
    }
    const now = this.engine.wheel.now;
    if (this.stalledSince === 0) {
      this.stalledSince = now;
      this.engine.emit('subscriberStalled', this.client, { buffered: this.socket.writableLength });
    } else if (now - this.stalledSince > mqtt.slowConsumerTimeoutMs) {
      // Not from inside the delivery loop that asked.
      setImmediate(() => this.destroy());
    }
    return false;
  }

  sendPublish(d: Delivery, packetId: number, dup: boolean): boolean {
    const msg = d.msg;
    let buf: Buffer;
    const expiry = msg.expiresAt === 0 ? undefined : msg.remainingExpiry(Date.now());
    if (this.v5 && (d.subscriptionIds !== undefined || expiry !== undefined || this.topicAliasMaximumOut > 0)) {
      let topicAlias: number | undefined;
      let omitTopic = false;
      let newAlias = false;
      if (this.topicAliasMaximumOut > 0) {
        const aliases = (this.aliasesOut ??= new Map());
        topicAlias = aliases.get(msg.topic);
        if (topicAlias !== undefined) omitTopic = true;
        else if (aliases.size < this.topicAliasMaximumOut) {
          topicAlias = aliases.size + 1;
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
      if (newAlias && buf.length <= this.maxPacketSizeOut) this.aliasesOut!.set(msg.topic, topicAlias!);
    } else {
      const template = msg.encoded(this.v5, d.qos, d.retain);
      buf = d.qos === 0 ? template.buf : patchPacketId(template.buf, template.packetIdOffset, packetId, dup);
    }
    // Never send a packet larger than the client's Maximum Packet Size (v5 [MQTT-3.1.2-24]); it is discarded as if sent [MQTT-3.1.2-25].
    if (buf.length > this.maxPacketSizeOut) return false;
    this.write(buf);
    return true;
  }

  sendPubrel(packetId: number): void {
    this.write(encodeAck(6, packetId, 0, this.v5));
  }

  sendAck(type: 4 | 5 | 6 | 7, packetId: number, reasonCode: number): void {
    this.write(encodeAck(type, packetId, reasonCode, this.v5));
  }

  /**
   * Acknowledge a PUBLISH once `wait` (its storage writes) resolves, keeping acknowledgements in
   * the order the PUBLISH packets came [MQTT-4.6.0-2], [MQTT-4.6.0-3]. A failed write is not
   * acknowledged as a success: v5 gets 0x80, a v3 client is disconnected (it will resend).
   */
  ackAfter(type: 4 | 5 | 7, packetId: number, reasonCode: number, wait: Promise<unknown> | undefined): void {
    const queue = this.ackQueue;
    if (wait === undefined && (queue === undefined || queue.length === 0)) {
      this.sendAck(type, packetId, reasonCode);
      return;
    }
    const entry: PendingAck = { type, packetId, reasonCode, state: wait === undefined ? 'ready' : 'waiting' };
    (this.ackQueue ??= []).push(entry);
    wait?.then(
      () => {
        entry.state = 'ready';
        this.flushAcks();
      },
      () => {
        entry.state = 'failed';
        this.flushAcks();
      },
    );
  }

  private flushAcks(): void {
    const queue = this.ackQueue;
    if (queue === undefined) return;
    while (queue.length > 0 && queue[0]!.state !== 'waiting') {
      const entry = queue.shift()!;
      if (this.state === 'closed') continue;
      if (entry.state === 'ready' || entry.type === 7) {
        // PUBCOMP: the release is done in memory whatever storage said (the failure was logged).
        this.sendAck(entry.type, entry.packetId, entry.reasonCode);
      } else if (this.v5) {
        if (entry.type === 5) this.session?.inboundQoS2.delete(entry.packetId);
        this.sendAck(entry.type, entry.packetId, RC.UnspecifiedError);
      } else {
        this.disconnect(RC.UnspecifiedError, 'storage write failed');
      }
    }
  }

  // ---- closing ----

  /**
   * Close because of the client's fault: v5 gets DISCONNECT with the reason code first where the
   * spec allows it [MQTT-4.13.1-1]; v3 connections are just closed.
   */
  protocolError(
    reasonCode: number,
    why: string,
    event: 'badPacket' | 'protocolViolation' | 'oversizePacketDropped' | 'invalidTopic' | 'receiveLimitExceeded' | 'exceedPubRate',
  ): void {
    if (this.state === 'closed') return;
    this.engine.logger.debug({ clientId: this.client?.clientId, remote: this.origin.remoteAddress, reasonCode, why }, 'closing connection');
    this.engine.emit(event, this.client, { reasonCode, reason: why, remoteAddress: this.origin.remoteAddress });
    if (this.state === 'connected') this.disconnect(reasonCode, why);
    else this.destroy();
  }

  /** Server-initiated close: v5 DISCONNECT with a reason code, then close. */
  disconnect(reasonCode: number, reasonString?: string, serverReference?: string): void {
    if (this.state === 'closed') return;
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
    this.reader.stop();
    this.engine.wheel.cancel(this);
    if (!this.socket.destroyed && !this.socket.writableEnded) this.socket.destroy();
    const session = this.session;
    if (!wasConnected || session === undefined || this.client === undefined) return;
    this.engine.usage.add(this.client.tenantId, 'TotalConnections', -1);
    if (session.link === this) this.engine.sessionDisconnected(session, !this.normalDisconnect);
    this.engine.emit(this.normalDisconnect ? 'byClient' : 'channelError', this.client, { remoteAddress: this.origin.remoteAddress });
  }
}
