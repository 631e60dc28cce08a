import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './api-context';
import { requireAdmin, requireTenant } from './api-auth';
import { TENANT_PARAMS } from './api-message';
import { HISTORY_SERIES, TrafficHistory } from './traffic-history';

const ERR = { $ref: 'ApiError#' } as const;
const TAGS = ['history'];
const NUMBERS = { type: 'array', items: { type: 'number' } } as const;

const SINCE_QUERY = {
  type: 'object',
  additionalProperties: false,
  properties: {
    since: {
      type: 'number',
      minimum: 0,
      description: 'Only points after this time (ms since the epoch): the `t` of the last point already held. Default 0: all 15 minutes.',
    },
  },
} as const;

function pointsSchema(description: string): Record<string, unknown> {
  return {
    type: 'object',
    description,
    required: ['sampleMs', 't', 'series'],
    properties: {
      sampleMs: { type: 'integer', description: 'Time between points, ms.' },
      t: { ...NUMBERS, description: 'When each point was sampled, ms since the epoch, oldest first.' },
      series: {
        type: 'object',
        description:
          'One array per series, aligned with `t`: messagesIn and messagesOut (PUBLISH packets per second), connections, dropped (deliveries dropped per second), eventLoopLagMs (p99 of the event-loop delay over the point; the broker only).',
        properties: Object.fromEntries(HISTORY_SERIES.map((s) => [s, NUMBERS])),
      },
    },
  };
}

/**
 * `GET /api/v1/history`: the broker's last 15 minutes, a point every 2 s (admin token).
 * `GET /api/v1/tenants/{tenant}/history`: one tenant's, kept from the first time it is asked for.
 * Polled by the dashboard with `since`, so each poll carries only the new points.
 */
export function historyRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const history = new TrafficHistory(ctx.engine.usage, ctx.clock);
  history.start();
  app.addHook('onClose', async () => history.stop());

  app.get<{ Querystring: { since?: number } }>(
    '/api/v1/history',
    {
      schema: {
        tags: TAGS,
        summary: "The broker's traffic, connections, dropped deliveries and event-loop lag over the last 15 minutes",
        querystring: SINCE_QUERY,
        response: { 200: pointsSchema('The broker, every tenant together.'), 400: ERR, 401: ERR, 403: ERR },
      },
    },
    async (request) => {
      requireAdmin(request);
      return history.brokerAfter(request.query.since ?? 0);
    },
  );

  app.get<{ Params: { tenant: string }; Querystring: { since?: number } }>(
    '/api/v1/tenants/:tenant/history',
    {
      schema: {
        tags: TAGS,
        summary: "One tenant's traffic, connections and dropped deliveries, kept from the first request for up to 15 minutes",
        params: TENANT_PARAMS,
        querystring: SINCE_QUERY,
        response: { 200: pointsSchema('One tenant.'), 400: ERR, 401: ERR, 403: ERR },
      },
    },
    async (request) => {
      requireTenant(request, request.params.tenant);
      return history.tenantAfter(request.params.tenant, request.query.since ?? 0);
    },
  );
}
