import type { Packet } from 'mqtt-packet';
import type { AuthRequest, ClientInfo, ProtocolVersion } from '@bifro/spi';
import type { Engine } from '../broker/engine';
import type { ConnectLimits, LiveLimits } from '../tenancy/tenant-limits';
import type { ConnectionOrigin } from '../transport/connection-origin';
import type { Identity } from './identity';
import type { TenantState } from '../tenancy/tenant-usage';
import type { Session, SessionLink } from '../session/session';
import type { DecodedConnect, DecodeFailureEvent } from '../codec/packet-decoder';
import type { AckType } from '../codec/packet-types';
import type { AckSink, PublishAck } from './publish-ack';

// ---- worker mode (docs/multicore.md): implemented in workers/handover.ts ----

/** The outcome of an enhanced authentication exchange that ran in the accepting worker. */
export interface AdoptedAuth {
  readonly identity: Identity;
  readonly clientId: string;
  readonly assigned: boolean;
  readonly method: string;
  readonly data: Uint8Array | undefined;
}

/** Consulted by CONNECT handling, in worker mode only. */
export interface ConnectionHandover {
  /** Owner side: the outcome of an enhanced authentication exchange the accepting worker ran, once; else undefined. */
  takeAdoptedAuth(): AdoptedAuth | undefined;
  /**
   * True when this worker must not serve the connection: it was handed to the worker owning the
   * tenant (the connection is detached: no will, no event, nothing counted), or refused.
   * `auth` is the outcome of an enhanced authentication exchange, when there was one.
   */
  handOver(
    conn: ConnectionPort,
    identity: Identity,
    clientId: string,
    assigned: boolean,
    auth: { readonly method: string; readonly data: Uint8Array | undefined } | undefined,
  ): boolean;
}

/** `awaiting-connect` → `authenticating` (CONNECT received) → `connected` (CONNACK sent) → `closed`. */
export type ConnectionState = 'awaiting-connect' | 'authenticating' | 'connected' | 'closed';

/**
 * Why a connection ends, for the event reported when it closes: the client's DISCONNECT
 * (`byClient`), a close by the broker (`byServer`), or `reported` when its reason was reported
 * already (badPacket, idle, kicked, serverBusy...). Unset: the network connection was lost (`channelError`).
 */
export type CloseCause = { readonly type: 'byClient' | 'byServer'; readonly reasonCode: number; readonly reason?: string } | 'reported';

/** The events a close for the client's fault ({@link ConnectionPort.protocolError}) reports. */
export type ProtocolErrorEvent =
  | 'badPacket'
  | 'protocolViolation'
  | 'oversizePacketDropped'
  | 'invalidTopic'
  | 'malformedTopic'
  | 'receiveLimitExceeded'
  | 'exceedPubRate'
  | DecodeFailureEvent;

/** State of a v5 enhanced authentication exchange in progress (§4.12). */
export interface AuthExchange {
  method: string;
  state: Map<string, unknown>;
  /** A re-authentication of a connected client, not the exchange of its CONNECT. */
  reauth: boolean;
}

/** A CONNECT waiting for the end of an enhanced authentication exchange. */
export interface PendingConnect {
  packet: DecodedConnect;
  clientId: string;
  /** The client id was assigned by the broker (v5 Assigned Client Identifier). */
  assigned: boolean;
  request: AuthRequest;
}

/**
 * What a packet handler (./handlers) sees of its connection: MqttConnection implements it; a unit
 * test implements it to drive a handler alone. It is also the link the connection's session sends
 * through ({@link SessionLink}, attached by CONNECT) and where its acknowledgements settle
 * ({@link AckSink}, for {@link PublishAck}).
 */
export interface ConnectionPort extends SessionLink, AckSink {
  // ---- who and where ----

  /** Where the connection came from (listener, remote address and port, TLS certificate). */
  readonly origin: ConnectionOrigin;
  /** Where the connection is in its life; handlers look for `closed` after an await. */
  readonly state: ConnectionState;
  /** Whether the connection is closed (a check after an await, where the compiler narrows too eagerly). */
  isClosed(): boolean;
  /** MQTT level from CONNECT (3, 4 or 5); 4 until then. */
  protocolVersion: ProtocolVersion;
  /** `protocolVersion === 5`, set with it. */
  v5: boolean;
  /** Who the client is, once CONNACK accepted it. */
  readonly client: ClientInfo | undefined;
  /** The client's session, set by CONNECT before CONNACK. */
  session: Session | undefined;
  /** The broker's services (settings, events, ACL, routing, sessions, storage). */
  readonly engine: Engine;

  // ---- what was agreed at CONNECT ----

  /** The client's Receive Maximum (v5), 65535 otherwise. */
  receiveMaximum: number;
  /** The client's Maximum Packet Size (v5): nothing larger is sent to it [MQTT-3.1.2-24]. */
  maxPacketSizeOut: number;
  /** Topic aliases the client accepts from us (v5 Topic Alias Maximum in CONNECT). */
  topicAliasMaximumOut: number;
  /** Topic aliases we accept (v5 Topic Alias Maximum in CONNACK). */
  topicAliasMaximumIn: number;
  /** Inbound topic aliases (v5), alias → topic; allocated by the handler at the first alias. */
  aliasesIn: (string | undefined)[] | undefined;
  /** v5 Request Problem Information (default true): whether Reason Strings may be sent [MQTT-3.1.2-29]. */
  requestProblemInfo: boolean;
  /** The tenant's settings fixed at CONNECT (set before CONNACK, announced in it). */
  limits: ConnectLimits;
  /** Largest inbound packet accepted from now on (the Maximum Packet Size CONNACK announces). */
  setMaxInboundPacket(size: number): void;

  // ---- limits that follow the tenant's settings ----

  /** Live per-connection limits; `stale` once the tenant's settings changed: then {@link refreshLiveLimits}. */
  readonly live: LiveLimits;
  /** Fetch the tenant's current live limits after a settings change. */
  refreshLiveLimits(): LiveLimits;
  /** The tenant's usage and counters (set at CONNACK). */
  readonly tenant: TenantState;
  /** Count one inbound PUBLISH against MsgPubPerSec; true when it is over `maxPerSecond` this second. */
  overPublishRate(maxPerSecond: number): boolean;

  // ---- authentication ----

  /** An enhanced authentication exchange in progress (v5 AUTH). */
  authExchange: AuthExchange | undefined;
  /** The v5 Authentication Method the client connected with (re-authentication must use it). */
  authMethod: string | undefined;
  /** CONNECT waiting for the end of an enhanced authentication exchange. */
  pendingConnect: PendingConnect | undefined;
  /** Worker mode only (docs/multicore.md): hands the connection to the worker owning its tenant once auth names it. */
  handover: ConnectionHandover | undefined;

  // ---- reading ----

  /** Hold further frames until `work` settles (a plugin answered asynchronously): packet order is kept. */
  hold(work: Promise<unknown>): void;
  /**
   * CONNACK accepted: the client is connected; keep alive (seconds, never 0) is armed, and the end
   * of the connection when its credentials expire (`credentialsExpireAt`, ms since the epoch; 0: never).
   */
  accept(client: ClientInfo, keepAlive: number, credentialsExpireAt?: number): void;
  /** A re-authentication succeeded: its credentials expire at `expiresAt` (0: never). */
  renewCredentials(expiresAt: number): void;
  /** Handle the packets that came after CONNECT and before CONNACK (called once CONNACK is sent). */
  replayEarlyFrames(): void;

  // ---- writing ----

  /** Queue bytes; everything written in one tick leaves in one flush. Nothing is written once closed. */
  write(buf: Buffer): void;
  /** Encode a packet with mqtt-packet for the connection's protocol level (CONNACK, SUBACK, ...: not the hot path). */
  send(packet: Packet): void;
  /** Send an acknowledgement; a PUBACK or PUBREC is reported as `pubAcked` / `pubReceived` with the PUBLISH's `topic`. */
  sendAck(type: AckType, packetId: number, reasonCode: number, topic?: string): void;
  /**
   * Acknowledge a PUBLISH (or PUBREL) once the storage writes `ack` tracks are done and every
   * earlier acknowledgement has left [MQTT-4.6.0-2], [MQTT-4.6.0-3] (see ./ack-queue.ts).
   */
  queueAck(ack: PublishAck): void;

  // ---- closing ----

  /** Set when the client sent DISCONNECT: no will unless reason 0x04 [MQTT-3.1.2-10]. */
  normalDisconnect: boolean;
  /** Why the connection ends, for the event reported when it closes (see {@link CloseCause}). */
  closeCause: CloseCause | undefined;
  /**
   * Close because of the client's fault, reporting `event`: v5 gets DISCONNECT with the reason
   * code first where the spec allows it [MQTT-4.13.1-1]; v3 connections are just closed.
   */
  protocolError(reasonCode: number, why: string, event: ProtocolErrorEvent): void;
  /** Server-initiated close: v5 DISCONNECT with a reason code (and Reason String, Server Reference), then close. */
  disconnect(reasonCode: number, reasonString?: string, serverReference?: string): void;
  /** Flush what is queued, then close the socket. */
  end(): void;
  /** Close at once. */
  destroy(): void;
  /** Worker mode: let go of the socket without closing it (handed to another worker before CONNACK). */
  detach(): void;
}
