import type { ClientInfo } from '@bifro/spi';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { describeError } from '../base/errors';
import { publishAccepted } from '../broker/accepted-publish';
import { CountedWaiter } from '../session/counted-waiter';
import type { ApiContext } from './api-context';
import { requireTenant, type ApiPrincipal } from './api-auth';
import { ApiError } from './api-errors';
import { checkedMessage, checkPublishTopic, PAYLOAD_PROPERTIES, PROPERTIES_SCHEMA, TENANT_PARAMS, type MessageBody } from './api-message';

/** How long a QoS 1/2 publish waits for storage before it answers 503 (storage normally takes milliseconds). */
const STORAGE_WAIT_MS = 30_000;

interface PublishBody extends MessageBody {
  readonly topic: string;
  readonly retain?: boolean;
}

const PUBLISH_BODY = {
  type: 'object',
  required: ['topic'],
  additionalProperties: false,
  properties: {
    topic: { type: 'string', minLength: 1, maxLength: 65535, description: 'A topic name (no wildcards).' },
    ...PAYLOAD_PROPERTIES,
    qos: { type: 'integer', enum: [0, 1, 2], default: 0 },
    retain: { type: 'boolean', default: false, description: 'Retain it (an empty payload clears the retained message).' },
    properties: PROPERTIES_SCHEMA,
  },
} as const;

const PUBLISHED = {
  type: 'object',
  required: ['deliveries'],
  properties: {
    deliveries: { type: 'integer', description: 'How many subscriptions got the message (one per session, plus one per shared group).' },
  },
} as const;

const ERRORS = { 400: { $ref: 'ApiError#' }, 401: { $ref: 'ApiError#' }, 403: { $ref: 'ApiError#' }, 503: { $ref: 'ApiError#' } };

/**
 * Who publishes for the admin API, in events and to the retained quotas: no MQTT client (the empty
 * client id, which no connected client has, so No Local never drops it), the token's name as user.
 */
export function apiPublisher(tenantId: string, principal: ApiPrincipal, request: FastifyRequest): ClientInfo {
  return {
    tenantId,
    userId: `api:${principal.name}`,
    clientId: '',
    protocolVersion: 5,
    remoteAddress: request.ip,
    remotePort: 0,
    listener: 'api',
    attrs: { source: 'api', token: principal.name },
  };
}

/** 503 unless the broker serves MQTT (not while starting or draining). */
export function requireRunning(ctx: ApiContext): void {
  if (!ctx.state.ready || ctx.state.stopping) throw new ApiError('BIFRO_API_UNAVAILABLE', 'the broker is starting or shutting down');
}

/**
 * The storage writes one QoS 1/2 publish waits for (persistent subscribers' inboxes and inflight
 * records, the retained message): the {@link WriteWaiter} a PUBACK waits on, settling a promise
 * instead of queueing an acknowledgement. Held by the route until distribution is done.
 */
class StorageWrites extends CountedWaiter {
  private settle: ((error: unknown) => void) | undefined;
  /** Resolves with the first write's error (undefined when every write succeeded). */
  readonly done = new Promise<unknown>((resolve) => (this.settle = resolve));

  protected settled(failed: boolean): void {
    this.settle!(failed ? (this.error ?? new Error('a storage write failed')) : undefined);
  }
}

/**
 * `POST /api/v1/tenants/{tenant}/publish`: publish an application message to the tenant as an
 * MQTT PUBLISH would (same checks, counters, retained handling and quotas, events, persistent
 * inbox appends: broker/accepted-publish.ts), answered once the broker accepted it: QoS 0 after
 * distribution, QoS 1/2 once storage has what it must keep. The ACL is not asked: the token is
 * the authority (docs/api.md).
 */
export function publishRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const engine = ctx.engine;
  app.post<{ Params: { tenant: string }; Body: PublishBody }>(
    '/api/v1/tenants/:tenant/publish',
    {
      schema: {
        tags: ['publish'],
        summary: 'Publish a message to a tenant',
        params: TENANT_PARAMS,
        body: PUBLISH_BODY,
        response: { 200: PUBLISHED, ...ERRORS },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      const principal = requireTenant(request, tenantId);
      requireRunning(ctx);
      const body = request.body;
      const retain = body.retain === true;
      checkPublishTopic(body.topic, engine.limits.topicLimits(tenantId), 'body/topic');
      const msg = checkedMessage(engine, tenantId, body.topic, body, retain);
      const qos = msg.qos;
      const publisher = apiPublisher(tenantId, principal, request);
      const tenant = engine.usage.state(tenantId);
      if (qos === 0) return { deliveries: publishAccepted(engine, publisher, tenant, msg, undefined) };
      const writes = new StorageWrites();
      const deliveries = publishAccepted(engine, publisher, tenant, msg, writes);
      writes.release();
      const error = await waitFor(writes.done, STORAGE_WAIT_MS);
      if (error !== undefined)
        throw new ApiError(
          'BIFRO_API_UNAVAILABLE',
          `storage did not keep the message (live subscribers may have it): ${describeError(error)}`,
        );
      return { deliveries };
    },
  );
}

/** The error `done` settles with, or a timeout error after `ms`. */
async function waitFor(done: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<unknown>((resolve) => {
    timer = setTimeout(() => resolve(new Error(`no answer from storage within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([done, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
