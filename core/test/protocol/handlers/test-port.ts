import type { Packet } from 'mqtt-packet';
import type { ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { ConnectLimits, Engine, LiveLimits } from '../../../src/broker/engine';
import type {
  AuthExchange,
  CloseCause,
  ConnectionHandover,
  ConnectionPort,
  ConnectionState,
  PendingConnect,
  ProtocolErrorEvent,
} from '../../../src/protocol/connection-port';
import type { Delivery, Session } from '../../../src/session/session';
import type { TenantState } from '../../../src/tenancy/tenant-usage';
import type { ConnectionOrigin } from '../../../src/transport/connection-origin';
import type { AckType } from '../../../src/codec/packet-types';
import type { PublishAck } from '../../../src/protocol/publish-ack';
import { flushAcks, queueAck } from '../../../src/protocol/ack-queue';
import { client } from '../../plugin-host/plugin-host-fixtures';

/** What the handler did to its connection, in order. */
export type PortCall =
  | { readonly op: 'write'; readonly bytes: Buffer }
  | { readonly op: 'send'; readonly packet: Packet }
  | { readonly op: 'ack'; readonly type: AckType; readonly packetId: number; readonly reasonCode: number; readonly topic?: string }
  | { readonly op: 'protocolError'; readonly reasonCode: number; readonly why: string; readonly event: ProtocolErrorEvent }
  | { readonly op: 'disconnect'; readonly reasonCode: number; readonly reasonString?: string }
  | { readonly op: 'end' | 'destroy' | 'detach' };

/**
 * A connection port for driving one handler alone: it records what the handler sends and how it
 * closes, and holds whatever session and engine parts the test gives it. Acknowledgements go
 * through the real acknowledgement queue (../../../src/protocol/ack-queue.ts).
 */
export class TestPort implements ConnectionPort {
  readonly calls: PortCall[] = [];
  readonly held: Promise<unknown>[] = [];
  readonly origin: ConnectionOrigin = { listener: 'tcp', remoteAddress: '127.0.0.1', remotePort: 50000 };
  state: ConnectionState = 'connected';
  protocolVersion: ProtocolVersion;
  v5: boolean;
  client: ClientInfo | undefined = client();
  session: Session | undefined;
  engine: Engine;
  receiveMaximum = 65535;
  maxPacketSizeOut = Number.MAX_SAFE_INTEGER;
  topicAliasMaximumOut = 0;
  topicAliasMaximumIn = 0;
  aliasesIn: (string | undefined)[] | undefined;
  requestProblemInfo = true;
  limits = {} as ConnectLimits;
  live = { stale: false } as LiveLimits;
  tenant = {} as TenantState;
  authExchange: AuthExchange | undefined;
  authMethod: string | undefined;
  pendingConnect: PendingConnect | undefined;
  handover: ConnectionHandover | undefined;
  normalDisconnect = false;
  closeCause: CloseCause | undefined;
  ackQueue: PublishAck[] | undefined;
  readonly maxQueuedBytes = 1 << 20;
  /** The MsgPubPerSec answer {@link overPublishRate} gives. */
  overRate = false;

  constructor(options: { version?: ProtocolVersion; session?: Partial<Session>; engine?: Partial<Engine> } = {}) {
    this.protocolVersion = options.version ?? 5;
    this.v5 = this.protocolVersion === 5;
    this.session = options.session as Session | undefined;
    this.engine = (options.engine ?? {}) as Engine;
  }

  /** The calls of one kind. */
  of<K extends PortCall['op']>(op: K): Extract<PortCall, { op: K }>[] {
    return this.calls.filter((c): c is Extract<PortCall, { op: K }> => c.op === op);
  }

  isClosed(): boolean {
    return this.state === 'closed';
  }
  setMaxInboundPacket(): void {}
  refreshLiveLimits(): LiveLimits {
    return this.live;
  }
  overPublishRate(): boolean {
    return this.overRate;
  }
  hold(work: Promise<unknown>): void {
    this.held.push(work);
  }
  /** The credentials' expiry the handlers armed (0: never). */
  credentialsExpireAt = 0;
  accept(client: ClientInfo, _keepAlive: number, credentialsExpireAt = 0): void {
    this.client = client;
    this.state = 'connected';
    this.credentialsExpireAt = credentialsExpireAt;
  }
  renewCredentials(expiresAt: number): void {
    this.credentialsExpireAt = expiresAt;
  }
  replayEarlyFrames(): void {}

  write(bytes: Buffer): void {
    if (this.state !== 'closed') this.calls.push({ op: 'write', bytes });
  }
  send(packet: Packet): void {
    if (this.state !== 'closed') this.calls.push({ op: 'send', packet });
  }
  sendAck(type: AckType, packetId: number, reasonCode: number, topic?: string): void {
    this.calls.push({ op: 'ack', type, packetId, reasonCode, ...(topic === undefined ? {} : { topic }) });
  }
  queueAck(ack: PublishAck): void {
    queueAck(this, ack);
  }
  flushAcks(): void {
    flushAcks(this);
  }

  protocolError(reasonCode: number, why: string, event: ProtocolErrorEvent): void {
    this.calls.push({ op: 'protocolError', reasonCode, why, event });
    this.state = 'closed';
  }
  disconnect(reasonCode: number, reasonString?: string): void {
    this.calls.push({ op: 'disconnect', reasonCode, ...(reasonString === undefined ? {} : { reasonString }) });
    this.state = 'closed';
  }
  end(): void {
    this.calls.push({ op: 'end' });
    this.state = 'closed';
  }
  destroy(): void {
    this.calls.push({ op: 'destroy' });
    this.state = 'closed';
  }
  detach(): void {
    this.calls.push({ op: 'detach' });
    this.state = 'closed';
  }

  // SessionLink: the handlers tested here do not deliver.
  writable(): boolean {
    return this.state === 'connected';
  }
  bufferedBytes(): number {
    return 0;
  }
  sendPublish(_d: Delivery): boolean {
    return true;
  }
  sendPubrel(): void {}
  queueOverflowed(): void {}
}
