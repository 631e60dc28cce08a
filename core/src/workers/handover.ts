/**
 * Worker mode (`workers` > 1, docs/multicore.md): a connection accepted by a worker that does not
 * own its tenant is handed to the owner once auth has named the tenant. The accepting worker
 * records the bytes it read until then; the owner gets the socket, replays the CONNECT (and
 * whatever followed it) through a fresh connection and authenticates again. After an enhanced
 * authentication exchange (v5 AUTH), which cannot be replayed, the owner gets its outcome instead.
 * Nothing here runs in a single process: only the worker topology (topology/workers.ts) sets a connection's `handover`.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from '../base/logger';
import type { AdoptedAuth, ConnectionHandover, ConnectionPort } from '../protocol/connection-port';
import type { ConnectionOrigin } from '../transport/connection-origin';
import { refuse } from '../protocol/handlers/connect';
import type { Identity } from '../protocol/identity';
import { RC, RC3 } from '../codec/reason-codes';
import type { HandoverMessage } from './ipc';
import { replayBytes } from './replay-bytes';
import { detachHandle, type TcpHandle } from './socket-handle';
import { ownerOf } from './tenant-owner';

/** This worker's place among the others, and its way to them (through the primary). */
export interface WorkerRouter {
  readonly index: number;
  readonly count: number;
  readonly logger: Logger;
  /** Sends a connection's handle to worker `message.to`; this process no longer reads or closes it. */
  send(message: HandoverMessage, handle: TcpHandle): void;
  /** Where connections handed to this worker go (MqttServer registers itself). */
  receive(adopt: (socket: net.Socket, message: HandoverMessage) => void): void;
}

/** Whether the connection can be handed over: only plain TCP sockets (TLS and WebSocket carry protocol state). */
export function canHandOver(socket: unknown): socket is net.Socket {
  return socket instanceof net.Socket && !(socket instanceof tls.TLSSocket);
}

/** The accepting side: records what the socket delivers until the tenant is known. */
export class CapturingHandover implements ConnectionHandover {
  private chunks: Buffer[] | undefined = [];
  private readonly record = (chunk: Buffer): void => {
    this.chunks?.push(chunk);
  };

  /** Attach before the connection reads the socket, so every chunk is recorded. */
  constructor(
    private readonly socket: net.Socket,
    private readonly origin: ConnectionOrigin,
    private readonly router: WorkerRouter,
  ) {
    socket.on('data', this.record);
  }

  takeAdoptedAuth(): undefined {
    return undefined;
  }

  handOver(
    conn: ConnectionPort,
    identity: Identity,
    clientId: string,
    assigned: boolean,
    auth: { readonly method: string; readonly data: Uint8Array | undefined } | undefined,
  ): boolean {
    const chunks = this.chunks ?? [];
    this.chunks = undefined;
    this.socket.off('data', this.record);
    conn.handover = undefined;
    const { router, socket } = this;
    const owner = ownerOf(identity.tenantId, router.count);
    if (owner === router.index) return false;
    conn.detach();
    const detached = socket.destroyed ? undefined : detachHandle(socket);
    // Without its handle the socket closes nothing: this only ends this process's bookkeeping.
    socket.destroy();
    if (detached === undefined) return true;
    const bytes = replayBytes(Buffer.concat([...chunks, ...detached.buffered]));
    const message: HandoverMessage = {
      bifro: 'handover',
      from: router.index,
      to: owner,
      tenantId: identity.tenantId,
      origin: { listener: this.origin.listener, remoteAddress: this.origin.remoteAddress, remotePort: this.origin.remotePort },
      bytes: bytes.toString('base64'),
      ...(auth === undefined
        ? {}
        : {
            auth: {
              identity,
              clientId,
              assigned,
              method: auth.method,
              ...(auth.data === undefined ? {} : { data: Buffer.from(auth.data).toString('base64') }),
            },
          }),
    };
    router.logger.debug({ tenantId: identity.tenantId, clientId, to: owner }, `connection handed over to worker ${owner}`);
    router.send(message, detached.handle);
    return true;
  }
}

/**
 * The owner side: carries the enhanced authentication outcome the connection arrived with, and
 * makes sure a connection that was handed over is never handed on. Should auth name a tenant of
 * another worker this time (an auth plugin that is not deterministic), it is refused with 0x88
 * Server unavailable rather than served by a worker that does not hold the tenant.
 */
export class AdoptedConnection implements ConnectionHandover {
  constructor(
    private readonly router: WorkerRouter,
    private adoptedAuth: AdoptedAuth | undefined,
  ) {}

  takeAdoptedAuth(): AdoptedAuth | undefined {
    const auth = this.adoptedAuth;
    this.adoptedAuth = undefined;
    return auth;
  }

  handOver(conn: ConnectionPort, identity: Identity, clientId: string): boolean {
    conn.handover = undefined;
    const owner = ownerOf(identity.tenantId, this.router.count);
    if (owner === this.router.index) return false;
    this.router.logger.warn(
      { tenantId: identity.tenantId, clientId, owner },
      'a handed-over connection authenticated as a tenant of another worker this time (is the auth plugin deterministic?): refused',
    );
    refuse(conn, RC.ServerUnavailable, RC3.ServerUnavailable, 'tenant is served by another worker');
    return true;
  }
}

/** The enhanced-authentication outcome of a handover message, as CONNECT handling takes it. */
export function adoptedAuthOf(message: HandoverMessage): AdoptedAuth | undefined {
  const auth = message.auth;
  if (auth === undefined) return undefined;
  return {
    identity: auth.identity,
    clientId: auth.clientId,
    assigned: auth.assigned,
    method: auth.method,
    data: auth.data === undefined ? undefined : Buffer.from(auth.data, 'base64'),
  };
}
