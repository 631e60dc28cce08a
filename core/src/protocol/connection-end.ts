import type { ClientInfo } from '@bifro/spi';
import type { Engine } from '../broker/engine';
import type { Session, SessionLink } from '../session/session';
import type { CloseCause } from './connection-port';

/** How a connected client's connection ended, as the connection saw it. */
export interface ConnectionEnd {
  readonly client: ClientInfo;
  readonly session: Session;
  /** The connection that ended (the session may already be served by a newer one after a takeover). */
  readonly link: SessionLink;
  /** DISCONNECT 0x00 from the client: no will [MQTT-3.14.4-3]. */
  readonly normal: boolean;
  readonly cause: CloseCause | undefined;
  readonly remoteAddress: string;
}

/**
 * The broker's side of a connected client's end: the tenant's connection count, flapping
 * detection (security.flapping; not at shutdown, not after the client's DISCONNECT), the session's disconnect (will, expiry) when
 * this connection still served it, and exactly one disconnect event.
 */
export function connectionEnded(engine: Engine, end: ConnectionEnd): void {
  const { client, session, cause, remoteAddress } = end;
  engine.usage.add(client.tenantId, 'TotalConnections', -1);
  if (!engine.shuttingDown) engine.gate.disconnected(client, cause !== undefined && cause !== 'reported' && cause.type === 'byClient');
  // A cluster node whose lease ran out (paused, cut off) lets its sessions go first, this one's
  // included: its will and expiry are then the next owner's, not this node's.
  const serving = engine.topology.serving();
  if (serving && session.link === end.link) engine.sessionDisconnected(session, !end.normal);
  if (cause === 'reported') return;
  if (cause !== undefined) engine.emit(cause.type, client, { remoteAddress, reasonCode: cause.reasonCode, reason: cause.reason });
  // Closed without a reason while the broker stops: the broker's doing.
  else engine.emit(engine.shuttingDown ? 'byServer' : 'channelError', client, { remoteAddress });
}
