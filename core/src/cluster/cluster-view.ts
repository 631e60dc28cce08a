/**
 * What the rest of core sees of cluster mode: types only, so a standalone broker (and the admin
 * API) can name them without loading NATS.
 */

/** A node's load, as it publishes it with every heartbeat. */
export interface NodeLoad {
  /** MQTT connections past CONNACK. */
  readonly connections: number;
  /** Live sessions, transient and persistent. */
  readonly sessions: number;
  /** PUBLISH packets accepted from clients per second (last 5 s sample). */
  readonly msgInPerSec: number;
  /** PUBLISH packets written to subscribers per second (last 5 s sample). */
  readonly msgOutPerSec: number;
}

/** The record a node puts in the `bifro_nodes` bucket every heartbeat. */
export interface NodeRecord extends NodeLoad {
  readonly nodeId: string;
  /** ms since the epoch, the node's clock. */
  readonly startedAt: number;
  /** Core version of the node. */
  readonly version: string;
  /** `host:port` of each MQTT listener of the node. */
  readonly listeners: readonly string[];
  /** The node is draining (docs/cluster.md § Drain and removal): send no clients there. Absent from older nodes. */
  readonly draining?: boolean;
}

/** A node of the live list. */
export interface ClusterNode {
  readonly record: NodeRecord;
  /** When this node last saw the node's heartbeat (ms since the epoch, this node's clock). */
  readonly lastSeen: number;
  /** This node itself. */
  readonly self: boolean;
}

/** The live cluster, as the admin API and the metrics read it. */
export interface ClusterView {
  /** Cluster mode is configured; false: a standalone broker, the one node of its list. */
  readonly clustered: boolean;
  readonly nodeId: string;
  /** Connected to a NATS server now. */
  connected(): boolean;
  /** Live nodes, this one first, then by node id. */
  nodes(): ClusterNode[];
  /** Cross-node delivery counters (all 0 standalone). */
  traffic(): ClusterTraffic;
}

/** A started cluster mode: its view, its forwarding, and its stop (deletes this node's key, drains the connection). */
export interface RunningCluster extends ClusterView {
  /**
   * Queues a message published here for every other live node with a matching route, and picks
   * one node per matching shared group cluster-wide; returns how many nodes. `groups` are the
   * message's local groups: `here[i]` is set false for each one assigned to another node.
   */
  forward(
    tenantId: string,
    msg: ForwardMessage,
    waiter: ForwardWaiter | undefined,
    groups: readonly LocalGroup[],
    here: boolean[] | undefined,
  ): number;
  /** The cluster-wide session registry. */
  readonly sessions: SessionOwnership;
  /** Whether this node has seen `nodeId`'s route of this exact (tenant, filter) in the routes bucket. */
  hasRoute(nodeId: string, tenantId: string, filter: string): boolean;
  /** A session (by key) came to this node from `from`, handed over or adopted: it gets the recent wills it lacks. */
  sessionArrived(key: string, from: string, handedOver: boolean): void;
  /** Resolves true once this node's route writes under way are done (false: one failed and is retried, or NATS is not reached yet). */
  routesWritten(): Promise<boolean>;
  /** Puts this node's record now (a drain starts or ends) rather than at the next heartbeat. */
  announce(): void;
  /** Asks another node to start or end its drain (request/reply on `bifro.drain.<node>`); rejects when it does not answer. */
  relayDrain(node: string, request: DrainRequest): Promise<DrainReply>;
  stop(): Promise<void>;
}

/** A standalone broker as a one-node view: not connected, itself the only node. */
export function standaloneView(nodeId: string, record: () => NodeRecord, clock: () => number): ClusterView {
  const none: ClusterTraffic = {
    forwarded: 0,
    received: 0,
    forwardFailures: 0,
    routes: 0,
    routesMended: 0,
    routesConfirmed: true,
    unconfirmedRefused: 0,
    leaseHeld: true,
  };
  return {
    clustered: false,
    nodeId,
    connected: () => false,
    nodes: () => [{ record: record(), lastSeen: clock(), self: true }],
    traffic: () => none,
  };
}

/** Cross-node delivery counters of this node (0 standalone), for the metrics. */
export interface ClusterTraffic {
  /** Messages this node forwarded to other nodes (one per message per destination node). */
  readonly forwarded: number;
  /** Messages other nodes forwarded to this one. */
  readonly received: number;
  /** Forwarded messages whose destination did not confirm them (no reply in time, NATS away, a refused or malformed frame). */
  readonly forwardFailures: number;
  /** Routes of other live nodes this node knows of: one per (node, tenant, filter). */
  readonly routes: number;
  /** This node's routes written again because they were missing from the bucket (deleted by another node, or found by the reconcile). */
  readonly routesMended: number;
  /** This node's route table is confirmed current (always, standalone): QoS 1/2 is accepted. */
  readonly routesConfirmed: boolean;
  /** QoS 1/2 publishes refused while the route table was unconfirmed. */
  readonly unconfirmedRefused: number;
  /** This node holds its lease (always, standalone): it serves sessions (docs/cluster.md § Leases). */
  readonly leaseHeld: boolean;
}

/**
 * A message as forwarded between nodes: what the broker's `Message` has (structurally), without
 * naming it, so cluster/ needs nothing of the broker.
 */
export interface ForwardMessage {
  readonly topic: string;
  readonly payload: Buffer;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  readonly properties:
    | {
        readonly payloadFormatIndicator?: boolean;
        readonly contentType?: string;
        readonly responseTopic?: string;
        readonly correlationData?: Buffer;
        readonly userProperties?: readonly (readonly [string, string])[];
      }
    | undefined;
  /** When it expires (ms since the epoch, this node's clock), 0 = never. */
  readonly expiresAt: number;
  readonly publisherClientId: string;
}

/** A shared group by name (the routing's SharedGroupRef, structurally). */
export interface GroupRef {
  readonly shareKind: 'share' | 'oshare';
  readonly group: string;
  readonly topicFilter: string;
}

/** A shared group with members on this node (the routing's SharedGroupMatch, structurally). */
export interface LocalGroup extends GroupRef {
  readonly members: readonly { readonly subscriber: { readonly connected: boolean } }[];
}

/** What holds a publisher's acknowledgement back (the broker's WriteWaiter, structurally). */
export interface ForwardWaiter {
  hold(): void;
  release(): void;
  fail(err: unknown): void;
}

/** A message received from another node: the tenant it was published in, and the message. */
export interface ReceivedMessage {
  readonly tenantId: string;
  readonly topic: string;
  readonly payload: Buffer;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  readonly publisherClientId: string;
  /** Milliseconds left before it expires, undefined when it never does. */
  readonly expiryMs: number | undefined;
  readonly payloadFormatIndicator: boolean | undefined;
  readonly contentType: string | undefined;
  readonly responseTopic: string | undefined;
  readonly correlationData: Buffer | undefined;
  readonly userProperties: [string, string][] | undefined;
  /** The shared groups the sender assigned to this node for the message (empty: none; its other local groups get nothing). */
  readonly groups: readonly GroupRef[];
  /** Set on a message its sender may send again (a will): one copy per id is delivered. */
  readonly copyId?: string;
}

/** Topic filters to values, matched against topic names (the broker's TopicTrie, structurally). */
export interface FilterIndex<V> {
  add(filter: string, value: V): void;
  remove(filter: string, value: V): boolean;
  match(topic: string, visit: (value: V) => void): void;
}

/** A will as the session registry of the cluster keeps it (JSON-safe: the payload in base64). */
export interface OwnedWill {
  readonly topic: string;
  /** base64 */
  readonly payload: string;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  readonly delaySeconds: number;
  readonly properties?: {
    readonly payloadFormatIndicator?: boolean;
    readonly messageExpiryInterval?: number;
    readonly contentType?: string;
    readonly responseTopic?: string;
    /** base64 */
    readonly correlationData?: string;
    readonly userProperties?: readonly (readonly [string, string])[];
  };
}

/** What the cluster's session registry knows of a session besides its owner (docs/cluster.md § Sessions). */
export interface OwnedState {
  readonly userId: string;
  readonly protocolVersion: 3 | 4 | 5;
  /** A client is connected to it on the owner. */
  readonly connected: boolean;
  /** Expiry > 0: its state is in storage, so another node can resume it. */
  readonly persistent: boolean;
  /** The will of the connection (connected), or the one still pending after a disconnect. */
  readonly will?: OwnedWill;
  /** When the pending will of a disconnected session fires (ms since the epoch, the owner's clock). */
  readonly willAt?: number;
}

/** A registry entry: the owner node, its epoch (one more at every claim), and the state. */
export interface OwnerEntry extends OwnedState {
  readonly node: string;
  readonly epoch: number;
}

/** A session of a node that left, now owned by this node (picked by rendezvous hash among the live nodes). */
export interface AdoptedSession {
  readonly tenantId: string;
  readonly clientId: string;
  /** The entry as the node that left wrote it last. */
  readonly entry: OwnerEntry;
}

/** What the broker does when the registry moves one of this node's sessions. */
export interface OwnershipHandlers {
  /** Another node claims a session of this one: close its connection (0x8E), write its state out, stop serving it. */
  handOver(tenantId: string, clientId: string, newOwner: string | undefined): Promise<void>;
  /** Another node owns the session now (a registry write failed its compare-and-set, or the entry names `newOwner`); stop serving it. */
  lost(tenantId: string, clientId: string, newOwner?: string): void;
  /**
   * This node's lease ran out: stop serving the session at once, its client disconnected with
   * 0x89 Server busy, without a will or a storage write (whoever adopts it sees to those).
   */
  fenced(tenantId: string, clientId: string): void;
  /** A session of a node that left (or of this node's previous run) is this node's now. */
  adopt(session: AdoptedSession): Promise<void>;
  /** The registry is reachable (again): register the sessions served without it. */
  attached(): void;
}

/** What a claim replaced. */
export interface ClaimOutcome {
  /** The entry before (undefined: none). */
  readonly previous: OwnerEntry | undefined;
  /** Its owner, another node, confirmed it handed the session over (and saw to the old connection's will). */
  readonly handedOver: boolean;
}

/** The cluster-wide session registry, as the broker sees it. */
export interface SessionOwnership {
  /** The registry's buckets are open and NATS is connected: claims can be made. */
  readonly ready: boolean;
  /**
   * Make this node the owner of a session, at CONNECT: a live other owner is asked to hand it over
   * first. Resolves with the entry it replaced (undefined: none), or rejects when the claim could
   * not be made (NATS away, a concurrent claim that kept winning).
   */
  claim(tenantId: string, clientId: string, state: OwnedState): Promise<ClaimOutcome>;
  /** Record a session's new state (compare-and-set on this node's last revision; a conflict calls `lost`); resolves whether it landed. */
  update(tenantId: string, clientId: string, state: OwnedState): Promise<boolean>;
  /** The session ended here: remove its entry (if still this node's); resolves whether the delete landed. */
  release(tenantId: string, clientId: string): Promise<boolean>;
  /** This node holds the session's registry entry. */
  owns(tenantId: string, clientId: string): boolean;
  /**
   * Whether this node holds its lease, looked at now: a lease that ran out since the last look
   * fences this node's sessions (`fenced`) before this returns false. Called before serving what
   * came in (client bytes, forwarded messages), so a process resuming from a pause stops first.
   */
  holdsLease(): boolean;
  serve(handlers: OwnershipHandlers): void;
}

/** A drain asked of a node (docs/cluster.md § Drain and removal), by its own admin API or relayed by another node's. */
export interface DrainRequest {
  /** true: end the drain. */
  readonly cancel: boolean;
  /** Clients moved off per second. */
  readonly rate: number;
}

/** A node's drain as the admin API answers it. */
export interface DrainAnswer {
  readonly id: string;
  readonly draining: boolean;
  /** ISO time the drain started; absent when not draining. */
  readonly since?: string;
  readonly rate: number;
  /** MQTT connections still on the node. */
  readonly connections: number;
}

/** What a node answers to a drain request: its drain now, or why it refused. */
export type DrainReply = { readonly ok: true; readonly answer: DrainAnswer } | { readonly ok: false; readonly message: string };

/**
 * How a node answers a forwarded batch: every message delivered and stored; some could not be
 * (others may have been); or none was, the batch refused whole (a node without its lease).
 */
export type BatchReply = 'delivered' | 'failed' | 'refused';
