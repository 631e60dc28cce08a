/**
 * Messages between the primary and its worker processes (node:cluster IPC, JSON). Sockets
 * travel as raw TCP handles attached to a `handover` message (see socket-handle.ts).
 */
import type { ListenerAddress } from '../transport/listener-address';
import type { BrokerConfig } from '../base/config-types';
import type { Identity } from '../protocol/identity';

/** Where a handed-over connection came from (ConnectionOrigin without the TLS certificate: only plain TCP is handed over). */
export interface HandoverOrigin {
  readonly listener: string;
  readonly remoteAddress: string;
  readonly remotePort: number;
}

/** The outcome of a v5 enhanced authentication exchange, run by the accepting worker. */
export interface HandoverAuth {
  readonly identity: Identity;
  readonly clientId: string;
  readonly assigned: boolean;
  readonly method: string;
  /** Base64 of the method's final data, if any. */
  readonly data?: string;
}

/** A connection on its way to the worker that owns its tenant: worker → primary → owner. */
export interface HandoverMessage {
  readonly bifro: 'handover';
  readonly from: number;
  readonly to: number;
  readonly tenantId: string;
  readonly origin: HandoverOrigin;
  /** Base64 of the bytes to replay: the CONNECT frame, then whatever followed it that was read. */
  readonly bytes: string;
  /** Set when enhanced authentication already ran: the owner does not authenticate again. */
  readonly auth?: HandoverAuth;
}

/** Primary → worker. */
export type PrimaryMessage =
  | { readonly bifro: 'start'; readonly index: number; readonly count: number; readonly config: BrokerConfig }
  | { readonly bifro: 'stop'; readonly reason: string }
  | HandoverMessage;

/** Worker → primary. */
export type WorkerMessage =
  | { readonly bifro: 'hello' }
  | { readonly bifro: 'ready'; readonly listeners: readonly ListenerAddress[]; readonly plugins: readonly string[] }
  | { readonly bifro: 'failed'; readonly code: string | undefined; readonly message: string }
  | HandoverMessage;

function kindOf(message: unknown): unknown {
  return typeof message === 'object' && message !== null ? (message as { bifro?: unknown }).bifro : undefined;
}

export function isPrimaryMessage(message: unknown): message is PrimaryMessage {
  const kind = kindOf(message);
  return kind === 'start' || kind === 'stop' || kind === 'handover';
}

export function isWorkerMessage(message: unknown): message is WorkerMessage {
  const kind = kindOf(message);
  return kind === 'hello' || kind === 'ready' || kind === 'failed' || kind === 'handover';
}
