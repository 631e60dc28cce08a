import type { FastifyInstance } from 'fastify';
import { describeError } from '../base/errors';
import type { ClusterNode, DrainAnswer, DrainReply, DrainRequest } from '../cluster/cluster-view';
import { DEFAULT_DRAIN_RATE } from '../broker/node-drain';
import type { ApiContext } from './api-context';
import { requireAdmin } from './api-auth';
import { ApiError } from './api-errors';

const ERR = { $ref: 'ApiError#' } as const;

const NODE = {
  type: 'object',
  required: ['id', 'self', 'version', 'startedAt', 'listeners', 'load', 'lastSeen', 'draining'],
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
    draining: { type: 'boolean', description: 'The node is draining: it sends its clients to the other nodes and accepts none.' },
  },
} as const;

const DRAIN_PARAMS = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, description: 'The node id, or `self` for the node answering.' } },
} as const;

const DRAIN_ANSWER = {
  type: 'object',
  required: ['id', 'draining', 'rate', 'connections'],
  properties: {
    id: { type: 'string' },
    draining: { type: 'boolean' },
    since: { type: 'string', format: 'date-time', description: 'When the drain started (absent when not draining).' },
    rate: { type: 'integer', description: 'Clients moved off per second.' },
    connections: { type: 'integer', description: 'MQTT connections still on the node.' },
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
    draining: r.draining === true,
  };
}

/**
 * A drain request for node `id`: this node's own (its id or `self`), or relayed to another live
 * node over NATS, which answers for itself.
 */
async function drainNode(ctx: ApiContext, id: string, request: DrainRequest): Promise<DrainAnswer> {
  const view = ctx.nodes;
  const drain = ctx.drain;
  if (!view.clustered || drain === undefined)
    throw new ApiError('BIFRO_API_CONFLICT', 'a standalone broker cannot be drained: there is no other node to send its clients to');
  let reply: DrainReply;
  if (id === 'self' || id === view.nodeId) reply = drain.handle(request);
  else if (!view.nodes().some((n) => n.record.nodeId === id)) throw new ApiError('BIFRO_API_NOT_FOUND', `no live node ${id}`);
  else {
    try {
      reply = await drain.relay(id, request);
    } catch (err) {
      ctx.logger.warn({ node: id, err: describeError(err) }, `node ${id} did not answer a drain request`);
      throw new ApiError('BIFRO_API_UNAVAILABLE', `node ${id} did not answer over NATS; retry, or use its own admin API`);
    }
  }
  if (!reply.ok)
    throw new ApiError('BIFRO_API_CONFLICT', id === 'self' || id === view.nodeId ? reply.message : `node ${id}: ${reply.message}`);
  return reply.answer;
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

  app.post<{ Params: { id: string }; Body: { rate?: number } }>(
    '/api/v1/nodes/:id/drain',
    {
      // The options are optional: no body is an empty one.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        tags: ['nodes'],
        summary: 'Drain a node before removing it',
        description:
          'The node refuses new CONNECTs (v5 CONNACK 0x9C Use another server with the Server Reference of another node; v3 return code 3) and moves its clients off, `rate` a second: v5 get DISCONNECT 0x9C with the Server Reference of the least loaded other live node, v3 are closed. Then stop it (docs/cluster.md § Drain and removal). Again while draining: sets the rate. `{id}` is the id of this node, `self`, or the id of another live node (the request is relayed to it over NATS). Refused (409) standalone and when no other live node that is not draining could take the clients.',
        params: DRAIN_PARAMS,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            rate: {
              type: 'integer',
              minimum: 1,
              maximum: 1_000_000,
              default: DEFAULT_DRAIN_RATE,
              description: `Clients moved off per second (default ${DEFAULT_DRAIN_RATE}).`,
            },
          },
        },
        response: { 200: DRAIN_ANSWER, 400: ERR, 401: ERR, 403: ERR, 404: ERR, 409: ERR, 503: ERR },
      },
    },
    async (request) => {
      requireAdmin(request);
      return drainNode(ctx, request.params.id, { cancel: false, rate: request.body.rate ?? DEFAULT_DRAIN_RATE });
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/v1/nodes/:id/drain',
    {
      schema: {
        tags: ['nodes'],
        summary: 'Stop draining a node',
        description: 'The node accepts clients again; those it moved off stay where they went. `{id}` as for the POST.',
        params: DRAIN_PARAMS,
        response: { 200: DRAIN_ANSWER, 401: ERR, 403: ERR, 404: ERR, 409: ERR, 503: ERR },
      },
    },
    async (request) => {
      requireAdmin(request);
      return drainNode(ctx, request.params.id, { cancel: true, rate: DEFAULT_DRAIN_RATE });
    },
  );
}
