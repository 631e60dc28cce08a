import type { FastifyInstance } from 'fastify';
import type { QoS } from '@bifro/spi';
import { sessionListKey } from '@bifro/spi';
import { NEVER_EXPIRES } from '../broker/engine';
import { expireSessions, liveConnectionInfo, subscribeOnBehalf, unsubscribeOnBehalf, type OnBehalfRefusal } from '../broker/session-admin';
import type { Session } from '../session/session';
import type { ApiContext } from './api-context';
import { requireTenant } from './api-auth';
import { ApiError } from './api-errors';
import { decodeCursor, encodeCursor, pageSchema, PAGE_QUERY_PROPERTIES } from './api-paging';

/**
 * Sessions examined for one page at most. With filters a page may end before `limit` items (and
 * carry a `nextCursor`), so a filter matching few of a million sessions never walks them all in
 * one request.
 */
const SCAN_BUDGET = 10_000;

const ERR = { $ref: 'ApiError#' } as const;
const ERRORS = { 400: ERR, 401: ERR, 403: ERR, 404: ERR } as const;
const TAGS = ['sessions'];

export const TENANT_PARAM = { type: 'string', minLength: 1, maxLength: 65535, description: 'The tenant id.' } as const;
export const CLIENT_PARAM = {
  type: 'string',
  minLength: 1,
  maxLength: 65535,
  description: 'The MQTT client identifier (URL-encoded).',
} as const;
export const SESSION_PARAMS = {
  type: 'object',
  required: ['tenant', 'clientId'],
  properties: { tenant: TENANT_PARAM, clientId: CLIENT_PARAM },
} as const;
const TENANT_PARAMS = { type: 'object', required: ['tenant'], properties: { tenant: TENANT_PARAM } } as const;

const DATE = { type: 'string', format: 'date-time' } as const;

const SESSION_ITEM = {
  type: 'object',
  required: ['clientId', 'userId', 'online', 'persistent', 'protocolVersion', 'expirySeconds', 'subscriptions', 'inboxDepth'],
  properties: {
    clientId: { type: 'string' },
    userId: { type: 'string' },
    online: { type: 'boolean', description: 'A connection serves the session now.' },
    persistent: { type: 'boolean', description: 'The session is written through storage (Session Expiry Interval > 0).' },
    protocolVersion: { type: 'integer', enum: [3, 4, 5], description: '3: MQTT 3.1, 4: 3.1.1, 5: 5.0.' },
    expirySeconds: { type: 'integer', description: 'Session Expiry Interval granted; 4294967295: never.' },
    connectedSince: { ...DATE, description: 'When the current connection attached (online sessions).' },
    disconnectedAt: { ...DATE, description: 'When the client went away (offline sessions).' },
    subscriptions: { type: 'integer', description: 'How many subscriptions the session has.' },
    inboxDepth: {
      type: 'integer',
      description: 'Messages waiting: the storage inbox of a persistent session, the memory queue of a transient one.',
    },
  },
} as const;

const SUBSCRIPTION = {
  type: 'object',
  required: ['filter', 'qos', 'noLocal', 'retainAsPublished', 'retainHandling'],
  properties: {
    filter: { type: 'string' },
    qos: { type: 'integer', enum: [0, 1, 2] },
    noLocal: { type: 'boolean' },
    retainAsPublished: { type: 'boolean' },
    retainHandling: { type: 'integer', enum: [0, 1, 2] },
    subscriptionId: { type: 'integer' },
  },
} as const;

const SESSION_DETAIL = {
  type: 'object',
  required: [
    'tenantId',
    'clientId',
    'userId',
    'online',
    'persistent',
    'protocolVersion',
    'createdAt',
    'expirySeconds',
    'subscriptions',
    'inboxDepth',
    'inflight',
  ],
  properties: {
    tenantId: { type: 'string' },
    clientId: { type: 'string' },
    userId: { type: 'string' },
    online: { type: 'boolean' },
    persistent: { type: 'boolean' },
    protocolVersion: { type: 'integer', enum: [3, 4, 5] },
    createdAt: DATE,
    connection: {
      type: 'object',
      description: 'The live connection (online sessions).',
      required: ['remoteAddress', 'remotePort', 'listener', 'connectedSince', 'keepAliveSeconds', 'receiveMaximum'],
      properties: {
        remoteAddress: { type: 'string' },
        remotePort: { type: 'integer' },
        listener: { type: 'string', description: 'The listener name from the config.' },
        connectedSince: DATE,
        keepAliveSeconds: { type: 'integer' },
        receiveMaximum: { type: 'integer', description: "The client's receive window: most QoS 1/2 messages in flight at once." },
      },
    },
    expirySeconds: { type: 'integer', description: 'Session Expiry Interval granted; 4294967295: never.' },
    disconnectedAt: { ...DATE, description: 'When the client went away (offline sessions).' },
    expiresAt: { ...DATE, description: 'When the offline session ends unless its client comes back (absent: never).' },
    subscriptions: { type: 'array', items: SUBSCRIPTION },
    inboxDepth: { type: 'integer', description: 'Messages waiting: storage inbox (persistent), memory queue (transient).' },
    inflight: { type: 'integer', description: 'QoS 1/2 messages sent and not yet acknowledged.' },
    will: {
      type: 'object',
      required: ['topic', 'qos', 'retain', 'delaySeconds', 'payloadBytes'],
      properties: {
        topic: { type: 'string' },
        qos: { type: 'integer', enum: [0, 1, 2] },
        retain: { type: 'boolean' },
        delaySeconds: { type: 'integer' },
        payloadBytes: { type: 'integer' },
        publishesAt: { ...DATE, description: 'When a pending will is published (offline, within its Will Delay).' },
      },
    },
  },
} as const;

interface ListQuery {
  limit: number;
  cursor?: string;
  state?: 'online' | 'offline';
  persistent?: boolean;
  clientIdPrefix?: string;
  user?: string;
}

interface SubscribeBody {
  filter: string;
  qos: QoS;
  noLocal?: boolean;
  retainAsPublished?: boolean;
  retainHandling?: 0 | 1 | 2;
  subscriptionId?: number;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The session of a path; 404 when the tenant has none with that client id. */
export function sessionOf(ctx: ApiContext, tenant: string, clientId: string): Session {
  const session = ctx.engine.sessions.get(sessionListKey(tenant, clientId));
  if (session === undefined) throw new ApiError('BIFRO_API_NOT_FOUND', `tenant "${tenant}" has no session with client id "${clientId}"`);
  return session;
}

/** Messages waiting for a session: its storage inbox when persistent (a count, no scan), else its memory queue. */
async function inboxDepth(ctx: ApiContext, session: Session): Promise<number> {
  if (!session.persistent) return session.memoryQueued;
  try {
    return await ctx.engine.persistence.count(session);
  } catch (err) {
    throw new ApiError('BIFRO_API_UNAVAILABLE', `storage could not count the inbox of "${session.clientId}": ${String(err)}`);
  }
}

async function listItem(ctx: ApiContext, s: Session): Promise<object> {
  return {
    clientId: s.clientId,
    userId: s.client.userId,
    online: s.connected,
    persistent: s.persistent,
    protocolVersion: s.protocolVersion,
    expirySeconds: s.expirySeconds,
    connectedSince: s.connected && s.connectedAt > 0 ? iso(s.connectedAt) : undefined,
    disconnectedAt: s.connected ? undefined : iso(s.disconnectedAt),
    subscriptions: s.subscriptions.size,
    inboxDepth: await inboxDepth(ctx, s),
  };
}

async function detail(ctx: ApiContext, s: Session): Promise<object> {
  const live = liveConnectionInfo(s);
  const c = s.client;
  let inflight = s.inflightSize;
  // A session restored at boot reads its inflight state when its client comes back; until then it is in storage.
  if (!s.loaded) inflight = (await ctx.engine.persistence.listInflight(s).catch(() => [])).length;
  const will = s.will;
  return {
    tenantId: s.tenantId,
    clientId: s.clientId,
    userId: c.userId,
    online: s.connected,
    persistent: s.persistent,
    protocolVersion: s.protocolVersion,
    createdAt: iso(s.createdAt),
    connection:
      live === undefined
        ? undefined
        : {
            remoteAddress: c.remoteAddress,
            remotePort: c.remotePort,
            listener: c.listener,
            connectedSince: iso(s.connectedAt),
            keepAliveSeconds: live.keepAlive,
            receiveMaximum: live.receiveMaximum,
          },
    expirySeconds: s.expirySeconds,
    disconnectedAt: s.connected ? undefined : iso(s.disconnectedAt),
    expiresAt: s.connected || s.expirySeconds === NEVER_EXPIRES ? undefined : iso(s.disconnectedAt + s.expirySeconds * 1000),
    subscriptions: [...s.subscriptions.values()],
    inboxDepth: await inboxDepth(ctx, s),
    inflight,
    will:
      will === undefined
        ? undefined
        : {
            topic: will.message.topic,
            qos: will.message.qos,
            retain: will.message.retain,
            delaySeconds: will.delaySeconds,
            payloadBytes: will.message.payload.length,
            publishesAt: s.willAt === 0 ? undefined : iso(s.willAt),
          },
  };
}

/** The answer to a refused subscription on behalf. */
function refusal(r: OnBehalfRefusal, tenant: string): ApiError {
  switch (r.reason) {
    case 'invalid-filter':
      return new ApiError('BIFRO_API_INVALID_REQUEST', `body/filter is not a valid topic filter for tenant "${tenant}": ${r.detail}`);
    case 'no-local-shared':
      return new ApiError('BIFRO_API_INVALID_REQUEST', 'body/noLocal is not allowed on a shared subscription [MQTT-3.8.3-4]');
    case 'subscription-id-v5-only':
      return new ApiError(
        'BIFRO_API_INVALID_REQUEST',
        'body/subscriptionId: the session is not MQTT 5; subscription identifiers are MQTT 5 only',
      );
    case 'shared-disabled':
      return new ApiError('BIFRO_API_CONFLICT', `SharedSubscriptionEnabled is off for tenant "${tenant}"`);
    case 'wildcard-disabled':
      return new ApiError('BIFRO_API_CONFLICT', `WildcardSubscriptionEnabled is off for tenant "${tenant}"`);
    case 'subscription-id-disabled':
      return new ApiError('BIFRO_API_CONFLICT', `SubscriptionIdentifierEnabled is off for tenant "${tenant}"`);
    case 'inbox-full':
      return new ApiError('BIFRO_API_CONFLICT', `the session has MaxTopicFiltersPerInbox subscriptions already`);
    case 'quota':
      return new ApiError('BIFRO_API_CONFLICT', `tenant "${tenant}" has no subscription quota left`);
    case 'group-full':
      return new ApiError('BIFRO_API_CONFLICT', `the shared group has MaxSharedGroupMembers members already`);
    case 'storage':
      return new ApiError('BIFRO_API_UNAVAILABLE', 'the session record could not be stored; the subscription was taken back');
  }
}

/**
 * A tenant's sessions: the list (paged by client id), one session, ending inactive ones, and
 * subscribing or unsubscribing on a session's behalf (docs/api.md § Sessions). Kicks are in ./kick.ts.
 */
export function sessionRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get<{ Params: { tenant: string }; Querystring: ListQuery }>(
    '/api/v1/tenants/:tenant/sessions',
    {
      schema: {
        tags: TAGS,
        summary: "A tenant's sessions, by client id",
        description:
          'Online and persistent offline sessions in client id order (UTF-16 code units). A page may hold fewer than `limit` items when filters skip many sessions; continue while `nextCursor` is present.',
        params: TENANT_PARAMS,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ...PAGE_QUERY_PROPERTIES,
            state: { type: 'string', enum: ['online', 'offline'], description: 'Only online or only offline sessions.' },
            persistent: { type: 'boolean', description: 'Only persistent (true) or only transient (false) sessions.' },
            clientIdPrefix: { type: 'string', minLength: 1, maxLength: 65535, description: 'Only client ids starting with this.' },
            user: { type: 'string', minLength: 1, maxLength: 65535, description: 'Only sessions of this user id.' },
          },
        },
        response: { 200: pageSchema(SESSION_ITEM), ...ERRORS },
      },
    },
    async (request) => {
      const { tenant } = request.params;
      requireTenant(request, tenant);
      const q = request.query;
      const prefix = q.clientIdPrefix;
      const after = decodeCursor(q.cursor);
      // A page costs a binary search in the tenant's ordered index (session/sorted-ids.ts), one
      // step per session examined (at most SCAN_BUDGET), and one storage inbox count (no scan)
      // per persistent session on the page. A prefix starts at the prefix and stops past it.
      const fromPrefix = prefix !== undefined && (after === undefined || after < prefix);
      const it = ctx.engine.sessions.tenantSessions(tenant, fromPrefix ? prefix : after, fromPrefix);
      const picked: Session[] = [];
      let last: string | undefined;
      let examined = 0;
      let more = false;
      for (let next = it.next(); !next.done; next = it.next()) {
        const s = next.value;
        if (prefix !== undefined && !s.clientId.startsWith(prefix)) break;
        if (picked.length === q.limit || examined === SCAN_BUDGET) {
          more = true;
          break;
        }
        examined++;
        last = s.clientId;
        if (q.state !== undefined && s.connected !== (q.state === 'online')) continue;
        if (q.persistent !== undefined && s.persistent !== q.persistent) continue;
        if (q.user !== undefined && s.client.userId !== q.user) continue;
        picked.push(s);
      }
      const items = await Promise.all(picked.map((s) => listItem(ctx, s)));
      return more && last !== undefined ? { items, nextCursor: encodeCursor(last) } : { items };
    },
  );

  app.get<{ Params: { tenant: string; clientId: string } }>(
    '/api/v1/tenants/:tenant/sessions/:clientId',
    {
      schema: {
        tags: TAGS,
        summary: 'One session',
        description:
          'An online or persistent session: client, expiry, subscriptions with options, inbox depth, inflight, will (not its payload).',
        params: SESSION_PARAMS,
        response: { 200: SESSION_DETAIL, ...ERRORS },
      },
    },
    async (request) => {
      const { tenant, clientId } = request.params;
      requireTenant(request, tenant);
      return detail(ctx, sessionOf(ctx, tenant, clientId));
    },
  );

  app.post<{ Params: { tenant: string }; Body: { olderThanSeconds: number } }>(
    '/api/v1/tenants/:tenant/sessions/expire',
    {
      schema: {
        tags: TAGS,
        summary: 'End inactive sessions',
        description:
          "Ends the tenant's offline sessions whose client has been away for at least `olderThanSeconds`, as if they expired (a pending will is published).",
        params: TENANT_PARAMS,
        body: {
          type: 'object',
          required: ['olderThanSeconds'],
          additionalProperties: false,
          properties: { olderThanSeconds: { type: 'integer', minimum: 0, maximum: NEVER_EXPIRES } },
        },
        response: { 200: { type: 'object', required: ['expired'], properties: { expired: { type: 'integer' } } }, ...ERRORS },
      },
    },
    async (request) => {
      const { tenant } = request.params;
      requireTenant(request, tenant);
      return { expired: expireSessions(ctx.engine, tenant, request.body.olderThanSeconds) };
    },
  );

  app.post<{ Params: { tenant: string; clientId: string }; Body: SubscribeBody }>(
    '/api/v1/tenants/:tenant/sessions/:clientId/subscriptions',
    {
      schema: {
        tags: TAGS,
        summary: 'Subscribe on behalf of a session',
        description:
          "Like the client's own SUBSCRIBE (topic limits, the tenant's wildcard/shared/subscription id settings, MaximumQoS, MaxTopicFiltersPerInbox, the subscription quota, retained messages by Retain Handling); the ACL is not asked.",
        params: SESSION_PARAMS,
        body: {
          type: 'object',
          required: ['filter', 'qos'],
          additionalProperties: false,
          properties: {
            filter: { type: 'string', minLength: 1, maxLength: 65535 },
            qos: { type: 'integer', enum: [0, 1, 2] },
            noLocal: { type: 'boolean', default: false },
            retainAsPublished: { type: 'boolean', default: false },
            retainHandling: { type: 'integer', enum: [0, 1, 2], default: 0 },
            subscriptionId: { type: 'integer', minimum: 1, maximum: 268435455 },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['filter', 'qos', 'replaced'],
            properties: {
              filter: { type: 'string' },
              qos: { type: 'integer', enum: [0, 1, 2], description: 'The QoS granted (capped by MaximumQoS).' },
              replaced: { type: 'boolean', description: 'A subscription with this filter existed and was replaced.' },
            },
          },
          409: ERR,
          503: ERR,
          ...ERRORS,
        },
      },
    },
    async (request) => {
      const { tenant, clientId } = request.params;
      requireTenant(request, tenant);
      const session = sessionOf(ctx, tenant, clientId);
      const r = await subscribeOnBehalf(ctx.engine, session, request.body);
      if ('reason' in r) throw refusal(r, tenant);
      return { filter: request.body.filter, qos: r.qos, replaced: r.replaced };
    },
  );

  app.delete<{ Params: { tenant: string; clientId: string }; Querystring: { filter: string } }>(
    '/api/v1/tenants/:tenant/sessions/:clientId/subscriptions',
    {
      schema: {
        tags: TAGS,
        summary: 'Unsubscribe on behalf of a session',
        description: 'Removes the subscription with exactly this filter; the ACL is not asked.',
        params: SESSION_PARAMS,
        querystring: {
          type: 'object',
          required: ['filter'],
          additionalProperties: false,
          properties: {
            filter: { type: 'string', minLength: 1, maxLength: 65535, description: 'The filter as subscribed (URL-encoded).' },
          },
        },
        response: {
          200: {
            type: 'object',
            required: ['filter', 'removed'],
            properties: { filter: { type: 'string' }, removed: { type: 'boolean' } },
          },
          503: ERR,
          ...ERRORS,
        },
      },
    },
    async (request) => {
      const { tenant, clientId } = request.params;
      requireTenant(request, tenant);
      const filter = request.query.filter;
      const r = await unsubscribeOnBehalf(ctx.engine, sessionOf(ctx, tenant, clientId), filter);
      if (!r.existed) throw new ApiError('BIFRO_API_NOT_FOUND', `session "${clientId}" has no subscription "${filter}"`);
      if (!r.stored)
        throw new ApiError('BIFRO_API_UNAVAILABLE', 'the subscription was removed, but the session record could not be stored');
      return { filter, removed: true };
    },
  );
}
