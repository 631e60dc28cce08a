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
  /** Queues a message published here for every other live node with a matching route; returns how many nodes. */
  forward(tenantId: string, msg: ForwardMessage, waiter: ForwardWaiter | undefined): number;
  stop(): Promise<void>;
}

/** A standalone broker as a one-node view: not connected, itself the only node. */
export function standaloneView(nodeId: string, record: () => NodeRecord, clock: () => number): ClusterView {
  const none: ClusterTraffic = { forwarded: 0, received: 0, forwardFailures: 0, routes: 0 };
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
}

/** Topic filters to values, matched against topic names (the broker's TopicTrie, structurally). */
export interface FilterIndex<V> {
  add(filter: string, value: V): void;
  remove(filter: string, value: V): boolean;
  match(topic: string, visit: (value: V) => void): void;
}

/** This node's (tenant, filter) pairs with local non-shared subscribers, and their changes (the cluster router). */
export interface LocalRoutes {
  /** Every pair now. */
  current(): Iterable<readonly [tenantId: string, filter: string]>;
  /** Called for every first subscriber of a pair (`added`) and every last one gone. */
  listen(onChange: (tenantId: string, filter: string, added: boolean) => void): void;
}
