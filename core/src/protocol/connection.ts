import type { Duplex } from 'node:stream';
import mqtt, { type IConnectPacket, type Packet, type Parser } from 'mqtt-packet';
import type { ClientCertificate, ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { Logger } from '../runtime/logger';
import type { AuthManager, EventManager } from '../plugin-host/managers';
import type { TimerWheel, WheelEntry } from '../session/timer-wheel';
import type { MqttConfig } from '../runtime/config-types';
import { handleConnect } from './handlers/connect';
import { handleDisconnect } from './handlers/disconnect';
import { handlePingreq } from './handlers/pingreq';

/** What every connection needs from the broker, resolved once at boot. */
export interface ProtocolServices {
  readonly auth: AuthManager;
  readonly events: EventManager;
  readonly wheel: TimerWheel;
  readonly mqtt: MqttConfig;
  readonly logger: Logger;
  readonly nodeId: string;
}

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

/**
 * One MQTT connection: owns the socket, its parser and its protocol state. Packets are handled
 * one at a time in arrival order; handlers live in ./handlers, one file per packet type.
 */
export class MqttConnection implements WheelEntry {
  wheelSlot = -1;
  state: ConnectionState = 'awaiting-connect';
  protocolVersion: ProtocolVersion = 4;
  client: ClientInfo | undefined;
  /** Keep alive in seconds as agreed in CONNECT/CONNACK (0 = none). */
  keepAlive = 0;
  /** Coarse time of the last packet received. */
  lastActivity: number;
  private readonly parser: Parser;
  private readonly connectDeadline: number;

  constructor(
    readonly socket: Duplex,
    readonly origin: ConnectionOrigin,
    readonly services: ProtocolServices,
  ) {
    this.lastActivity = services.wheel.now;
    this.connectDeadline = Date.now() + services.mqtt.connectTimeoutMs;
    this.parser = mqtt.parser({ protocolVersion: 5 });
    this.parser.on('packet', (packet: Packet) => this.onPacket(packet));
    this.parser.on('error', (err: Error) => this.onParseError(err));
    socket.on('data', (chunk: Buffer) => {
      this.lastActivity = services.wheel.now;
      this.parser.parse(chunk);
    });
    socket.on('error', () => this.destroy());
    socket.on('close', () => this.destroy());
    services.wheel.schedule(this, this.connectDeadline);
  }

  /** Timer wheel callback: connect timeout before CONNECT, keep alive (1.5 × keepAlive) after [MQTT-3.1.2-24]. */
  onWheelTick(now: number): number {
    if (this.state === 'closed') return 0;
    if (this.state === 'awaiting-connect' || this.state === 'authenticating') {
      if (now < this.connectDeadline) return this.connectDeadline;
      this.services.logger.debug({ remote: this.origin.remoteAddress }, 'connect timeout');
      this.destroy();
      return 0;
    }
    if (this.keepAlive === 0) return 0;
    const deadline = this.keepAliveDeadline();
    if (now < deadline) return deadline;
    this.services.logger.debug({ clientId: this.client?.clientId }, 'keep alive expired');
    this.destroy();
    return 0;
  }

  /** Encode and write one packet. */
  send(packet: Packet): void {
    if (this.state === 'closed') return;
    this.socket.write(mqtt.generate(packet, { protocolVersion: this.protocolVersion }));
  }

  /** Accept the connection after a successful CONNECT: arm keep alive. */
  accept(client: ClientInfo, keepAlive: number): void {
    this.client = client;
    this.keepAlive = keepAlive;
    this.state = 'connected';
    if (keepAlive > 0) this.services.wheel.schedule(this, this.keepAliveDeadline());
    else this.services.wheel.cancel(this);
  }

  /**
   * 1.5 × keep alive after the last packet [MQTT-3.1.2-24]. `lastActivity` is read from the wheel's
   * coarse clock, which lags by up to one slot: one slot is added so the deadline is never early.
   */
  private keepAliveDeadline(): number {
    return this.lastActivity + this.keepAlive * 1500 + this.services.wheel.slotMs;
  }

  /** Send what is queued, then close the socket. */
  end(): void {
    if (this.state === 'closed') return;
    this.markClosed();
    this.socket.end();
  }

  /** Close at once. */
  destroy(): void {
    if (this.state === 'closed') return;
    this.markClosed();
    this.socket.destroy();
  }

  private markClosed(): void {
    this.state = 'closed';
    this.services.wheel.cancel(this);
  }

  private onParseError(err: Error): void {
    this.services.logger.debug({ remote: this.origin.remoteAddress, err: err.message }, 'malformed packet');
    this.destroy();
  }

  private onPacket(packet: Packet): void {
    if (this.state === 'closed') return;
    if (this.state === 'awaiting-connect') {
      // The first packet from a client MUST be CONNECT [MQTT-3.1.0-1].
      if (packet.cmd !== 'connect') {
        this.destroy();
        return;
      }
      this.state = 'authenticating';
      this.protocolVersion = (packet as IConnectPacket).protocolVersion ?? 4;
      handleConnect(this, packet as IConnectPacket);
      return;
    }
    if (this.state === 'authenticating') {
      // Nothing but AUTH may arrive before CONNACK; a second CONNECT is a protocol error [MQTT-3.1.0-2].
      this.destroy();
      return;
    }
    switch (packet.cmd) {
      case 'pingreq':
        handlePingreq(this);
        return;
      case 'disconnect':
        handleDisconnect(this);
        return;
      case 'connect':
        // A second CONNECT is a protocol violation [MQTT-3.1.0-2].
        this.destroy();
        return;
      default:
        this.services.logger.debug({ cmd: packet.cmd }, 'packet type not handled yet');
        this.destroy();
    }
  }
}
