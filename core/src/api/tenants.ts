import type { FastifyInstance } from 'fastify';
import { RESOURCE_TYPES, type ResourceType } from '@bifro/spi';
import { RATE_SERIES, type TrafficRates } from '../tenancy/tenant-rates';
import type { ApiContext } from './api-context';
import { principalOf, requireTenant } from './api-auth';
import { ApiError } from './api-errors';
import { TENANT_PARAMS } from './api-message';
import { decodeCursor, page, pageSchema, PAGE_QUERY_PROPERTIES, type PageQuery } from './api-paging';
import { topK } from './top-k';

const ERR = { $ref: 'ApiError#' } as const;
const TAGS = ['tenants'];
const NUMBER = { type: 'number' } as const;
const INTEGER = { type: 'integer' } as const;

const RATE = {
  type: 'object',
  required: ['perSecond', 'load1m', 'load5m', 'load15m'],
  properties: {
    perSecond: { type: 'number', description: 'Over the last sample (5 s).' },
    load1m: { type: 'number', description: 'Exponentially weighted average over 1 minute, per second.' },
    load5m: { type: 'number', description: 'The same over 5 minutes.' },
    load15m: { type: 'number', description: 'The same over 15 minutes.' },
  },
} as const;

const RESOURCE_USAGE = {
  type: 'object',
  required: ['usage', 'refusals'],
  properties: {
    usage: {
      type: 'number',
      description: 'The value the throttler judges: a gauge, or the count of the current one-second window of a rate.',
    },
    refusals: { type: 'integer', description: 'Negative throttler answers for this resource since the broker started.' },
    limit: {
      type: 'number',
      description:
        "The tenant's limit for this resource as the throttler plugin states it (its `quota`, SPI 1.5.0), which `usage` is compared with. Absent when unlimited, or when the throttler does not say.",
    },
  },
} as const;

const TENANT = {
  type: 'object',
  required: [
    'tenant',
    'connections',
    'sessions',
    'persistentSessions',
    'subscriptions',
    'messages',
    'bytes',
    'rates',
    'retained',
    'memory',
    'quotaScope',
    'quota',
  ],
  properties: {
    tenant: { type: 'string' },
    connections: { type: 'integer', description: 'MQTT connections past CONNACK.' },
    sessions: { type: 'integer', description: 'Live sessions, transient and persistent (disconnected persistent ones included).' },
    persistentSessions: INTEGER,
    subscriptions: {
      type: 'object',
      required: ['transient', 'persistent', 'shared', 'total'],
      properties: { transient: INTEGER, persistent: INTEGER, shared: INTEGER, total: INTEGER },
    },
    messages: {
      type: 'object',
      required: ['received', 'sent', 'dropped'],
      description: 'PUBLISH packets since the broker started: accepted from clients, written to subscribers, deliveries dropped.',
      properties: { received: NUMBER, sent: NUMBER, dropped: NUMBER },
    },
    bytes: {
      type: 'object',
      required: ['received', 'sent', 'dropped'],
      description: 'Payload bytes received, bytes on the wire sent, message bytes of dropped deliveries.',
      properties: { received: NUMBER, sent: NUMBER, dropped: NUMBER },
    },
    rates: {
      type: 'object',
      required: [...RATE_SERIES],
      description: 'Per second, sampled every 5 s from the counters above.',
      properties: Object.fromEntries(RATE_SERIES.map((s) => [s, RATE])),
    },
    retained: { type: 'object', required: ['messages', 'bytes'], properties: { messages: INTEGER, bytes: NUMBER } },
    memory: {
      type: 'object',
      required: ['sessionQueueBytes', 'inboxBytes'],
      properties: {
        sessionQueueBytes: { type: 'number', description: 'Message bytes queued in memory for transient sessions.' },
        inboxBytes: { type: 'number', description: 'Message bytes appended to persistent inboxes by this process and not yet delivered.' },
      },
    },
    quotaScope: {
      type: 'string',
      enum: ['node', 'cluster'],
      description:
        "What `quota` counts: this node's usage (standalone), or the cluster's (every live node's, as of its last update). The other figures are this node's.",
    },
    quota: {
      type: 'object',
      description:
        'Usage of every throttler resource (RESOURCE_TYPES of @bifro/spi), the refusals counted against it, and its limit when the throttler states one.',
      required: [...RESOURCE_TYPES],
      properties: Object.fromEntries(RESOURCE_TYPES.map((r) => [r, RESOURCE_USAGE])),
    },
  },
} as const;

/** One tenant's live figures, as both routes answer them. */
export function tenantFigures(ctx: ApiContext, tenant: string): Record<string, unknown> {
  const usage = ctx.engine.usage;
  const m = usage.metrics(tenant);
  const refusals = usage.peek(tenant)?.refusals;
  const rates: TrafficRates = ctx.rates.of(tenant);
  return {
    tenant,
    connections: m.connections,
    sessions: m.sessions,
    persistentSessions: m.persistentSessions,
    subscriptions: {
      transient: m.transientSubscriptions,
      persistent: m.persistentSubscriptions,
      shared: m.sharedSubscriptions,
      total: m.transientSubscriptions + m.persistentSubscriptions + m.sharedSubscriptions,
    },
    messages: { received: m.messagesIn, sent: m.messagesOut, dropped: m.messagesDropped },
    bytes: { received: m.bytesIn, sent: m.bytesOut, dropped: m.bytesDropped },
    rates,
    retained: { messages: m.retainedMessages, bytes: m.retainedBytes },
    memory: { sessionQueueBytes: m.sessionMemoryBytes, inboxBytes: m.inboxBytes },
    quotaScope: usage.clusterWide ? 'cluster' : 'node',
    quota: Object.fromEntries(RESOURCE_TYPES.map((r, i) => [r, resourceFigures(ctx, tenant, r, refusals?.[i] ?? 0)])),
  };
}

/** One `quota` entry: `limit` only when the throttler states one (unlimited and unknown look alike). */
function resourceFigures(ctx: ApiContext, tenant: string, resource: ResourceType, refusals: number): ResourceFigures {
  const figures: ResourceFigures = { usage: ctx.engine.usage.get(tenant, resource), refusals };
  const limit = ctx.engine.throttler.quota(tenant, resource);
  if (limit !== undefined) figures.limit = limit;
  return figures;
}

interface ResourceFigures {
  usage: number;
  refusals: number;
  limit?: number;
}

/** Whether the broker knows the tenant: recorded usage, or routes. */
function known(ctx: ApiContext, tenant: string): boolean {
  if (ctx.engine.usage.peek(tenant) !== undefined || ctx.engine.usage.usedElsewhere(tenant)) return true;
  for (const id of ctx.engine.router.tenantIds()) if (id === tenant) return true;
  return false;
}

/**
 * `GET /api/v1/tenants`: tenants with recorded usage, by tenant id, with their live figures (an
 * admin token sees all, a tenant token its own). `GET /api/v1/tenants/{tenant}`: one tenant.
 */
export function tenantRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get<{ Querystring: PageQuery }>(
    '/api/v1/tenants',
    {
      schema: {
        tags: TAGS,
        summary: 'Tenants with live figures (paged by tenant id)',
        description: 'An admin token lists every tenant with recorded usage; a tenant token lists only its own tenant.',
        querystring: { type: 'object', additionalProperties: false, properties: { ...PAGE_QUERY_PROPERTIES } },
        response: { 200: pageSchema(TENANT), 400: ERR, 401: ERR },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const limit = request.query.limit ?? 100;
      const after = decodeCursor(request.query.cursor);
      let ids: string[];
      if (principal.tenant !== undefined) {
        ids = after === undefined || principal.tenant > after ? [principal.tenant] : [];
      } else {
        // The first `limit` ids after the cursor, without sorting every tenant: a stable cursor
        // (the last id of a page), whatever tenants come and go between pages.
        const candidates = (function* () {
          for (const id of ctx.engine.usage.tenantIds()) if (after === undefined || id > after) yield id;
        })();
        ids = topK(candidates, limit, (a, b) => a < b);
      }
      return page(
        ids.map((id) => tenantFigures(ctx, id)),
        limit,
        (t) => t.tenant as string,
      );
    },
  );

  app.get<{ Params: { tenant: string } }>(
    '/api/v1/tenants/:tenant',
    {
      schema: {
        tags: TAGS,
        summary: "One tenant's live figures and quota usage",
        params: TENANT_PARAMS,
        response: { 200: TENANT, 400: ERR, 401: ERR, 403: ERR, 404: ERR },
      },
    },
    async (request) => {
      const tenant = request.params.tenant;
      requireTenant(request, tenant);
      if (!known(ctx, tenant))
        throw new ApiError('BIFRO_API_NOT_FOUND', `the broker has recorded nothing for tenant "${tenant}" since it started`);
      return tenantFigures(ctx, tenant);
    },
  );
}
