/**
 * Draining a node before it is removed (docs/cluster.md § Drain and removal). Types and plain
 * code only: the composition root loads it in cluster mode without loading NATS through it.
 */
import type { ClientInfo, MaybePromise, RedirectDecision } from '@bifro/spi';
import type { Logger } from '../base/logger';
import type { ClusterNode, DrainReply, DrainRequest, NodeRecord } from '../cluster/cluster-view';

/** Clients moved off per second unless the drain request says otherwise. */
export const DEFAULT_DRAIN_RATE = 500;

/** What a drain needs of the running node, given once cluster mode is up. */
export interface DrainHost {
  /** The live nodes, this one first (membership). */
  nodes(): readonly ClusterNode[];
  /** Names of this node's MQTT listeners, in the order of the heartbeat's `listeners`. */
  readonly listenerNames: readonly string[];
  /** Put this node's record now, so the others see `draining` before the next heartbeat. */
  announce(): void;
  /** Redirects the connected clients, `perSecond` at most, while `active()` (the redirect sweep). */
  sweep(perSecond: () => number, active: () => boolean): Promise<void>;
  /** This node's id. */
  readonly nodeId: string;
  /** MQTT connections on this node now. */
  connections(): number;
  /** Asks another node to start or end its drain; rejects when it does not answer. */
  relay(node: string, request: DrainRequest): Promise<DrainReply>;
}

export interface DrainState {
  readonly draining: boolean;
  /** ms since the epoch; 0 when not draining. */
  readonly since: number;
  /** Clients moved off per second. */
  readonly rate: number;
}

/** Why a drain cannot start. */
export type DrainRefusal = 'not attached' | 'no other node';

const REFUSED: Readonly<Record<DrainRefusal, string>> = {
  'not attached': 'cluster mode is not started yet; retry',
  'no other node': 'no other live node that is not draining: its clients would have nowhere to go. Start another node first',
};

/**
 * The client balancer of a node in cluster mode: the balancer plugin's answers, except while the
 * node drains, when every client (at CONNECT and in the paced sweep) is sent to the least loaded
 * other live node that is not draining. Memory only: a restarted node is not draining.
 */
/** The client balancer as the broker calls it (its guarded manager, structurally). */
export interface BalancerCalls {
  needRedirect(client: ClientInfo): MaybePromise<RedirectDecision>;
}

export class NodeDrain implements BalancerCalls {
  private host: DrainHost | undefined;
  private state: DrainState = { draining: false, since: 0, rate: DEFAULT_DRAIN_RATE };
  /** Clients sent to each node since its last heartbeat, so one heartbeat's figures do not send them all to one node. */
  private readonly sent = new Map<string, { record: NodeRecord; sent: number }>();
  /** Clients redirected by the drain (CONNECTs refused and connections moved). */
  redirected = 0;

  constructor(
    private readonly plugin: BalancerCalls,
    private readonly clock: () => number,
    private readonly logger: Logger,
  ) {}

  attach(host: DrainHost): void {
    this.host = host;
  }

  get draining(): boolean {
    return this.state.draining;
  }

  status(): DrainState {
    return this.state;
  }

  needRedirect(client: ClientInfo): MaybePromise<RedirectDecision> {
    if (!this.state.draining) return this.plugin.needRedirect(client);
    const serverReference = this.target(client.listener);
    // No node to send it to (the others left meanwhile): the plugin decides, as before the drain.
    if (serverReference === undefined) return this.plugin.needRedirect(client);
    this.redirected++;
    return { type: 'redirect', permanent: false, serverReference };
  }

  /** Starts draining (again: a new rate); refused when no other node could take the clients. */
  start(perSecond: number): DrainState | DrainRefusal {
    const host = this.host;
    if (host === undefined) return 'not attached';
    if (this.target(undefined) === undefined) return 'no other node';
    const already = this.state.draining;
    this.state = { draining: true, since: already ? this.state.since : this.clock(), rate: perSecond };
    this.logger.info({ rate: perSecond }, `draining this node: ${perSecond} clients a second are sent to the other nodes`);
    if (!already) {
      host.announce();
      void host.sweep(
        () => this.state.rate,
        () => this.state.draining,
      );
    }
    return this.state;
  }

  /** A drain request, from this node's admin API or relayed by another node's. */
  handle(request: DrainRequest): DrainReply {
    const s = request.cancel ? this.cancel() : this.start(request.rate);
    if (typeof s === 'string') return { ok: false, message: REFUSED[s] };
    return {
      ok: true,
      answer: {
        id: this.host?.nodeId ?? '',
        draining: s.draining,
        ...(s.draining ? { since: new Date(s.since).toISOString() } : {}),
        rate: s.rate,
        connections: this.host?.connections() ?? 0,
      },
    };
  }

  /** Asks another node (see {@link handle}). */
  relay(node: string, request: DrainRequest): Promise<DrainReply> {
    if (this.host === undefined) return Promise.resolve({ ok: false, message: REFUSED['not attached'] });
    return this.host.relay(node, request);
  }

  /** Stops draining: clients may connect again; those already moved stay where they went. */
  cancel(): DrainState {
    if (this.state.draining) {
      this.state = { draining: false, since: 0, rate: this.state.rate };
      this.logger.info('drain ended: this node accepts clients again');
      this.host?.announce();
    }
    return this.state;
  }

  /**
   * The least loaded other live node that is not draining and has a listener: the fewest
   * connections in its last heartbeat plus the clients sent to it since. Its listener at the
   * index of the client's listener here (nodes of a cluster usually share a configuration), else
   * its first.
   */
  private target(listener: string | undefined): string | undefined {
    const host = this.host;
    if (host === undefined) return undefined;
    let best: { id: string; record: NodeRecord; load: number } | undefined;
    for (const n of host.nodes()) {
      const r = n.record;
      if (n.self || r.draining === true || r.listeners.length === 0) continue;
      let counted = this.sent.get(r.nodeId);
      if (counted === undefined || counted.record !== r) this.sent.set(r.nodeId, (counted = { record: r, sent: 0 }));
      const load = r.connections + counted.sent;
      if (best === undefined || load < best.load) best = { id: r.nodeId, record: r, load };
    }
    if (best === undefined) return undefined;
    if (listener === undefined) return best.record.listeners[0];
    this.sent.get(best.id)!.sent++;
    const index = host.listenerNames.indexOf(listener);
    return best.record.listeners[index] ?? best.record.listeners[0];
  }
}
