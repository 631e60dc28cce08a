import type { FastifyInstance } from 'fastify';
import type { ClusterNode } from '../cluster/cluster-view';
import type { ApiContext } from './api-context';
import { requireAdmin } from './api-auth';

const NODE = {
  type: 'object',
  required: ['id', 'self', 'version', 'startedAt', 'listeners', 'load', 'lastSeen'],
  properties: {
    id: { type: 'string', description: 'The node id (cluster.nodeId, or `<nodeId>-<first listener port>`).' },
    self: { type: 'boolean', description: 'The node that answered this request.' },
    version: { type: 'string' },
    startedAt: { type: 'string', format: 'date-time' },
    listeners: { type: 'array', items: { type: 'string' }, description: '`host:port` of each MQTT listener.' },
    load: {
      type: 'object',
      required: ['connections', 'sessions', 'msgInPerSec', 'msgOutPerSec'],
      properties: {
        connections: { type: 'integer', description: 'MQTT connections past CONNACK.' },
        sessions: { type: 'integer', description: 'Live sessions, transient and persistent.' },
        msgInPerSec: { type: 'number', description: 'PUBLISH packets accepted per second (last 5 s sample).' },
        msgOutPerSec: { type: 'number', description: 'PUBLISH packets delivered per second (last 5 s sample).' },
      },
    },
    lastSeen: { type: 'string', format: 'date-time', description: "When the answering node last saw this node's heartbeat." },
  },
} as const;

const NODES = {
  type: 'object',
  required: ['cluster', 'connected', 'nodes'],
  properties: {
    cluster: { type: 'boolean', description: 'Cluster mode is configured (false: a standalone broker, the one node listed).' },
    connected: { type: 'boolean', description: 'Connected to NATS now (always false standalone).' },
    nodes: { type: 'array', items: NODE },
  },
} as const;

function nodeBody(n: ClusterNode): Record<string, unknown> {
  const r = n.record;
  return {
    id: r.nodeId,
    self: n.self,
    version: r.version,
    startedAt: new Date(r.startedAt).toISOString(),
    listeners: r.listeners,
    load: { connections: r.connections, sessions: r.sessions, msgInPerSec: r.msgInPerSec, msgOutPerSec: r.msgOutPerSec },
    lastSeen: new Date(n.lastSeen).toISOString(),
  };
}

/** `GET /api/v1/nodes`: the live nodes of the cluster with their listeners and load (admin token). */
export function nodeRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get(
    '/api/v1/nodes',
    {
      schema: {
        tags: ['nodes'],
        summary: 'Cluster nodes with their listeners and load',
        description:
          'Every live node this node knows of, itself first (docs/cluster.md). A node is gone when it stopped (its key deleted) or sent no heartbeat for 10 s. Standalone: this broker alone, with `cluster: false`.',
        response: { 200: NODES, 401: { $ref: 'ApiError#' }, 403: { $ref: 'ApiError#' } },
      },
    },
    async (request) => {
      requireAdmin(request);
      const view = ctx.nodes;
      return { cluster: view.clustered, connected: view.connected(), nodes: view.nodes().map(nodeBody) };
    },
  );
}
