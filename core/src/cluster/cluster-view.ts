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
}

/** A started cluster mode: its view, and its stop (deletes this node's key, drains the connection). */
export interface RunningCluster extends ClusterView {
  stop(): Promise<void>;
}

/** A standalone broker as a one-node view: not connected, itself the only node. */
export function standaloneView(nodeId: string, record: () => NodeRecord, clock: () => number): ClusterView {
  return { clustered: false, nodeId, connected: () => false, nodes: () => [{ record: record(), lastSeen: clock(), self: true }] };
}
