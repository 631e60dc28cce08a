import type { StoredMessage } from '@bifro/spi';
import type { FastifyInstance } from 'fastify';
import { describeError } from '../base/errors';
import { isSharedFilter, PROTOCOL_TOPIC_LIMITS, validateTopicFilter } from '../routing/topic';
import { Message } from '../session/message';
import { toStored } from '../session/stored-message';
import type { ApiContext } from './api-context';
import { requireTenant } from './api-auth';
import { ApiError } from './api-errors';
import {
  checkedMessage,
  checkPublishTopic,
  checkTopicName,
  MESSAGE_VIEW_SCHEMA,
  messageView,
  PAYLOAD_PROPERTIES,
  payloadOf,
  PROPERTIES_SCHEMA,
  TENANT_PARAMS,
  type MessageBody,
} from './api-message';
import { decodeCursor, encodeCursor, PAGE_QUERY_PROPERTIES, pageSchema } from './api-paging';
import { apiPublisher, requireRunning } from './publish';

/**
 * Most retained messages a filter other than `#` may match for a list page: the store's `match`
 * has no cursor, so every page matches again and pages the sorted result (docs/api.md).
 */
export const FILTER_MATCH_CAP = 10_000;
/** Retained messages read per store call while expiring. */
const EXPIRE_BATCH = 500;

const TOPIC_PARAMS = {
  type: 'object',
  required: ['tenant', '*'],
  properties: {
    tenant: TENANT_PARAMS.properties.tenant,
    '*': { type: 'string', description: 'The topic, URL-encoded (`a%2Fb`); plain `/` work too (`retained/a/b`).' },
  },
} as const;

const LIST_QUERY = {
  type: 'object',
  additionalProperties: false,
  properties: {
    filter: {
      type: 'string',
      minLength: 1,
      maxLength: 65535,
      default: '#',
      description: 'A topic filter; `#` (the default) lists every retained message, `$` topics included.',
    },
    ...PAGE_QUERY_PROPERTIES,
  },
} as const;

const SET_BODY = {
  type: 'object',
  additionalProperties: false,
  properties: { ...PAYLOAD_PROPERTIES, qos: { type: 'integer', enum: [0, 1, 2], default: 0 }, properties: PROPERTIES_SCHEMA },
} as const;

const EXPIRE_BODY = {
  type: 'object',
  required: ['olderThanSeconds'],
  additionalProperties: false,
  properties: { olderThanSeconds: { type: 'integer', minimum: 0, description: 'Clear what was published longer ago than this.' } },
} as const;

const CLEARED = {
  type: 'object',
  required: ['topic', 'cleared'],
  properties: { topic: { type: 'string' }, cleared: { type: 'boolean', enum: [true] } },
} as const;

const EXPIRED = {
  type: 'object',
  required: ['cleared', 'scanned'],
  properties: {
    cleared: { type: 'integer', description: 'Retained messages cleared.' },
    scanned: { type: 'integer', description: 'Retained messages of the tenant looked at.' },
  },
} as const;

const ERR = { $ref: 'ApiError#' };

type SetBody = MessageBody;

type TopicParams = { tenant: string; '*': string };

/**
 * Retained messages of a tenant: list (paged by topic), read, set, clear, and clear what is older
 * than N seconds. Set and clear go through the broker's retain path (engine.retainMessage): the
 * retained quotas, the events and the tenant's retained totals follow as for an MQTT PUBLISH.
 */
export function retainedRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const engine = ctx.engine;
  const store = ctx.storage.retained;

  app.get<{ Params: { tenant: string }; Querystring: { filter: string; limit: number; cursor?: string } }>(
    '/api/v1/tenants/:tenant/retained',
    {
      schema: {
        tags: ['retained'],
        summary: "List a tenant's retained messages",
        params: TENANT_PARAMS,
        querystring: LIST_QUERY,
        response: { 200: pageSchema(MESSAGE_VIEW_SCHEMA), 400: ERR, 401: ERR, 403: ERR },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      requireTenant(request, tenantId);
      const { filter, limit } = request.query;
      const after = decodeCursor(request.query.cursor);
      const now = engine.now();
      if (filter === '#') {
        // The store pages by topic: one read of limit + 1 per page tells whether another follows.
        const found = await store.list({ tenantId, after, limit: limit + 1 });
        return pageOf(found, limit, now);
      }
      if (isSharedFilter(filter))
        throw invalid('querystring/filter: a shared subscription filter ($share/, $oshare/) is not a topic filter');
      const check = validateTopicFilter(filter, PROTOCOL_TOPIC_LIMITS);
      if (!check.ok) throw invalid(`querystring/filter: invalid topic filter ${JSON.stringify(filter)} (${check.reason})`);
      const matched = await store.match(tenantId, filter, FILTER_MATCH_CAP + 1, now);
      if (matched.length > FILTER_MATCH_CAP)
        throw invalid(
          `querystring/filter: ${JSON.stringify(filter)} matches more than ${FILTER_MATCH_CAP} retained messages; narrow it, or page through all of them with filter=#`,
        );
      matched.sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0));
      const start = after === undefined ? 0 : matched.findIndex((m) => m.topic > after);
      return pageOf(start < 0 ? [] : matched.slice(start, start + limit + 1), limit, now);
    },
  );

  app.get<{ Params: TopicParams }>(
    '/api/v1/tenants/:tenant/retained/*',
    {
      schema: {
        tags: ['retained'],
        summary: 'Read one retained message',
        params: TOPIC_PARAMS,
        response: { 200: MESSAGE_VIEW_SCHEMA, 400: ERR, 401: ERR, 403: ERR, 404: ERR },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      requireTenant(request, tenantId);
      const topic = request.params['*'];
      checkTopicName(topic, 'params/topic');
      const found = await store.get(tenantId, topic);
      if (found === undefined || expired(found, engine.now())) throw notFound(tenantId, topic);
      return messageView(found);
    },
  );

  app.put<{ Params: TopicParams; Body: SetBody }>(
    '/api/v1/tenants/:tenant/retained/*',
    {
      schema: {
        tags: ['retained'],
        summary: 'Set the retained message of a topic',
        description:
          'Stores it like a retained PUBLISH would, without delivering it to current subscribers (publish with retain does both).',
        params: TOPIC_PARAMS,
        body: SET_BODY,
        response: { 200: MESSAGE_VIEW_SCHEMA, 400: ERR, 401: ERR, 403: ERR, 409: ERR, 503: ERR },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      const principal = requireTenant(request, tenantId);
      requireRunning(ctx);
      const topic = request.params['*'];
      checkPublishTopic(topic, engine.limits.topicLimits(tenantId), 'params/topic');
      const body = request.body ?? {};
      // [MQTT-3.3.1-10] an empty retained payload clears: here that is DELETE, so a PUT never clears by accident.
      if (payloadOf(body).length === 0) throw invalid('body: an empty payload would clear the retained message; use DELETE');
      const msg = checkedMessage(engine, tenantId, topic, body, true);
      const stored = await retain(apiPublisher(tenantId, principal, request), msg);
      if (!stored)
        throw new ApiError(
          'BIFRO_API_CONFLICT',
          `the tenant's retained quota (TotalRetainTopics, TotalRetainedBytes or a retained rate) refused ${JSON.stringify(topic)}`,
        );
      return messageView(toStored(msg));
    },
  );

  app.delete<{ Params: TopicParams }>(
    '/api/v1/tenants/:tenant/retained/*',
    {
      schema: {
        tags: ['retained'],
        summary: 'Clear the retained message of a topic',
        params: TOPIC_PARAMS,
        response: { 200: CLEARED, 400: ERR, 401: ERR, 403: ERR, 404: ERR, 503: ERR },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      const principal = requireTenant(request, tenantId);
      requireRunning(ctx);
      const topic = request.params['*'];
      checkTopicName(topic, 'params/topic');
      if ((await store.get(tenantId, topic)) === undefined) throw notFound(tenantId, topic);
      await retain(apiPublisher(tenantId, principal, request), clearing(topic, engine.now()));
      return { topic, cleared: true as const };
    },
  );

  app.post<{ Params: { tenant: string }; Body: { olderThanSeconds: number } }>(
    '/api/v1/tenants/:tenant/retained/expire',
    {
      schema: {
        tags: ['retained'],
        summary: 'Clear retained messages older than N seconds',
        description:
          'Reads every retained message of the tenant (in pages of 500) and clears those published longer ago than olderThanSeconds.',
        params: TENANT_PARAMS,
        body: EXPIRE_BODY,
        response: { 200: EXPIRED, 400: ERR, 401: ERR, 403: ERR, 503: ERR },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      const publisher = apiPublisher(tenantId, requireTenant(request, tenantId), request);
      requireRunning(ctx);
      const now = engine.now();
      const cutoff = now - request.body.olderThanSeconds * 1000;
      let after: string | undefined;
      let cleared = 0;
      let scanned = 0;
      for (;;) {
        const batch = await store.list({ tenantId, after, limit: EXPIRE_BATCH });
        scanned += batch.length;
        const old = batch.filter((m) => m.publishedAt < cutoff);
        await Promise.all(old.map((m) => retain(publisher, clearing(m.topic, now))));
        cleared += old.length;
        if (batch.length < EXPIRE_BATCH) break;
        after = batch[batch.length - 1]!.topic;
      }
      request.log.info({ tenantId, cleared, scanned, olderThanSeconds: request.body.olderThanSeconds }, 'retained messages expired');
      return { cleared, scanned };
    },
  );

  /** engine.retainMessage with a storage failure turned into 503. */
  async function retain(publisher: ReturnType<typeof apiPublisher>, msg: Message): Promise<boolean> {
    try {
      return await engine.retainMessage(publisher, msg);
    } catch (err) {
      throw new ApiError('BIFRO_API_UNAVAILABLE', `storage failed: ${describeError(err)}`);
    }
  }
}

/** A page of at most `limit` from `found` (limit + 1 read: one more means another page follows), expired ones left out. */
function pageOf(found: readonly StoredMessage[], limit: number, now: number): { items: unknown[]; nextCursor?: string } {
  const shown = found.length > limit ? found.slice(0, limit) : found;
  // The cursor is the last topic read, expired or not, so a page of expired messages does not end the walk.
  const items = shown.filter((m) => !expired(m, now)).map(messageView);
  if (found.length <= limit) return { items };
  return { items, nextCursor: encodeCursor(shown[shown.length - 1]!.topic) };
}

/** Whether a stored message has expired [MQTT-3.3.2-5] (it is no longer served to subscribers either). */
function expired(m: StoredMessage, now: number): boolean {
  return m.expiresAt !== undefined && now > m.expiresAt;
}

/** The message that clears a topic's retained message: RETAIN with an empty payload [MQTT-3.3.1-10]. */
function clearing(topic: string, now: number): Message {
  return new Message(topic, Buffer.alloc(0), 0, true, undefined, now, 0, '');
}

function notFound(tenantId: string, topic: string): ApiError {
  return new ApiError('BIFRO_API_NOT_FOUND', `tenant ${tenantId} has no retained message on ${JSON.stringify(topic)}`);
}

function invalid(message: string): ApiError {
  return new ApiError('BIFRO_API_INVALID_REQUEST', message);
}
