import type { Duplex } from 'node:stream';
import type { ClientInfo } from '@bifro/spi';
import type { ClusterView, NodeLoad } from '../cluster/cluster-view';
import type { SharedGroupMatch, SharedGroupRef } from '../routing/shared-group';
import type { Message } from '../session/message';
import type { Session, SessionWill, WriteWaiter } from '../session/session';
import type { ConnectionOrigin } from '../transport/connection-origin';
import type { ListenerAddress } from '../transport/listener-address';

/**
 * Where this broker stands among others, and everything that differs with it (D37): alone
 * (`topology/standalone.ts`), one of several worker processes of a node
 * (`topology/workers.ts`: connections handed to the worker owning their tenant), or a node of a
 * cluster (`topology/cluster.ts`: session ownership with leases and fencing, routes, cross-node
 * delivery). The composition root builds one before the engine, the engine receives it in its
 * constructor, and the composition root binds it to the engine once that exists (its `bind`, not
 * part of this interface: nothing here names the engine). The engine and the protocol handlers
 * call it at the few points where the modes differ and never ask which mode they run in.
 */
export interface Topology {
  /** An accepted stream: the connection that serves it. */
  accept(socket: Duplex, origin: ConnectionOrigin): void;

  /**
   * Whether this broker may serve its sessions now (a cluster node: while it holds its lease).
   * Looked at before a connected client's bytes are served; a lapse seen here cuts the sessions
   * off first, so the caller finds its connection closed.
   */
  serving(): boolean;

  /**
   * A CONNECT accepted by auth and quotas: the session is claimed where another owner may hold it
   * (a cluster node asks the owner to hand it over). `true` at once when nothing is to claim;
   * otherwise resolves whether the session may be opened here.
   */
  claim(client: ClientInfo, clean: boolean, persistent: boolean, will: SessionWill | undefined): true | Promise<boolean>;

  /** The connection of a {@link claim} that resolved closed before its session was opened. */
  abandoned(client: ClientInfo): void;

  /**
   * Which of a message's matched local shared groups this broker serves (`here[i]` false: group
   * `i` is served elsewhere); undefined when it serves all. `fromNode`: the groups the sending node
   * named, for a forwarded message.
   */
  groupsHere(groups: readonly SharedGroupMatch<Session>[], fromNode: readonly SharedGroupRef[] | undefined): boolean[] | undefined;

  /**
   * Offers a message published here to the rest of the topology; returns the deliveries made
   * there. QoS 1/2 hold `waiter` until they are confirmed, or fail it when they cannot be (the
   * publisher gets no success and sends again).
   */
  forward(
    tenantId: string,
    msg: Message,
    waiter: WriteWaiter | undefined,
    groups: readonly SharedGroupMatch<Session>[],
    here: boolean[] | undefined,
  ): number;

  /**
   * Subscriptions were just added: resolves once the rest of the topology can route to them (a
   * cluster node: its routes are written to the shared table), so SUBACK promises what it says;
   * undefined when they already can.
   */
  announced(): Promise<void> | undefined;

  /** Before the listeners bind: restores the persistent sessions this broker serves from storage; resolves how many. */
  restore(): Promise<number>;

  /** The listeners are bound: starts what the topology runs beside the engine; returns its node list. */
  start(context: TopologyStart): ClusterView;

  /** Stops what {@link start} started (forwarding first); the engine is closed after. */
  stop(): Promise<void>;
}

/** What {@link Topology.start} is given. */
export interface TopologyStart {
  readonly bound: readonly ListenerAddress[];
  readonly startedAt: number;
  /** This node's load for its heartbeat and node list. */
  load(): NodeLoad;
}
