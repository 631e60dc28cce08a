import { sessionListKey, type BanKind, type BanRecord } from '@bifro/spi';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { describeError } from '../base/errors';
import { kickSession } from '../broker/session-admin';
import { banKey, banMatcher, banProblem } from '../security/ban-list';
import type { ApiContext } from './api-context';
import { requireAdmin, requireTenant } from './api-auth';
import { ApiError } from './api-errors';
import { PAGE_QUERY_PROPERTIES, decodeCursor, page, pageSchema } from './api-paging';

/** Longest ban: one year. */
const MAX_BAN_SECONDS = 31_536_000;
const ALL_KINDS: readonly BanKind[] = ['clientId', 'user', 'tenant', 'address'];
/** What a tenant token may ban in its own tenant. */
const TENANT_KINDS: readonly BanKind[] = ['clientId', 'user', 'address'];

const BAN = {
  type: 'object',
  required: ['kind', 'value', 'createdAt'],
  properties: {
    kind: { type: 'string', enum: ALL_KINDS },
    tenant: { type: 'string', description: 'The tenant the ban is about; absent on an address ban for every tenant.' },
    value: { type: 'string', description: 'The client id, user id, tenant id, or address / CIDR block.' },
    reason: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
    until: { type: 'string', format: 'date-time', description: 'When the ban ends; absent: until lifted.' },
    remainingSeconds: { type: 'integer', description: 'Seconds until the ban ends; absent: until lifted.' },
    by: { type: 'string', description: 'The name of the API token that set it.' },
  },
} as const;

const SET_ANSWER = {
  type: 'object',
  required: ['ban', 'kicked', 'durable'],
  properties: {
    ban: BAN,
    kicked: { type: 'integer', description: 'Live clients the ban disconnected (0 with kick: false).' },
    durable: { type: 'boolean', description: 'Whether the ban survives a restart (the storage plugin keeps bans).' },
  },
} as const;

const LIFT_ANSWER = { type: 'object', required: ['ban'], properties: { ban: BAN } } as const;

const BAN_FIELDS = {
  value: { type: 'string', minLength: 1, maxLength: 65535 },
  seconds: { type: 'integer', minimum: 1, maximum: MAX_BAN_SECONDS, description: 'How long the ban holds; absent: until lifted.' },
  reason: { type: 'string', maxLength: 1024 },
  kick: { type: 'boolean', default: true, description: 'Disconnect the live clients the ban matches (v5: DISCONNECT 0x98).' },
} as const;

const ERRORS = { 400: { $ref: 'ApiError#' }, 401: { $ref: 'ApiError#' }, 403: { $ref: 'ApiError#' } } as const;

interface BanBody {
  readonly kind: BanKind;
  readonly tenant?: string;
  readonly value: string;
  readonly seconds?: number;
  readonly reason?: string;
  readonly kick?: boolean;
}

interface ListQuery {
  readonly kind?: BanKind;
  readonly tenant?: string;
  readonly limit: number;
  readonly cursor?: string;
}

/** A ban as the API shows it. */
function view(ban: BanRecord, now: number): Record<string, unknown> {
  return {
    kind: ban.kind,
    tenant: ban.tenantId,
    value: ban.value,
    reason: ban.reason,
    createdAt: new Date(ban.createdAt).toISOString(),
    until: ban.until === undefined ? undefined : new Date(ban.until).toISOString(),
    remainingSeconds: ban.until === undefined ? undefined : Math.max(0, Math.ceil((ban.until - now) / 1000)),
    by: ban.by,
  };
}

/** A {@link banProblem} as a 400 naming where the field was (`body/value`, `querystring/tenant`...). */
function invalid(problem: string, where: { readonly value: string; readonly tenant: string }): ApiError {
  const field = problem.startsWith('tenant:') ? where.tenant : where.value;
  return new ApiError('BIFRO_API_INVALID_REQUEST', `${field}/${problem}`);
}

/**
 * Bans (docs/api.md § Bans): `GET|POST /api/v1/bans`, `DELETE /api/v1/bans/{kind}/{value}` for
 * admin tokens; `GET|POST /api/v1/tenants/{tenant}/bans` and `DELETE …/bans/{kind}/{value}` for a
 * tenant's own client id, user and address bans. A new ban disconnects the live clients it matches
 * unless `kick: false`; it refuses their next CONNECT with 0x8A (v3: 0x05).
 */
export function banRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const bans = ctx.engine.bans;

  function listPage(q: ListQuery, keep: (ban: BanRecord) => boolean): { items: readonly Record<string, unknown>[]; nextCursor?: string } {
    const after = decodeCursor(q.cursor);
    const picked: BanRecord[] = [];
    for (const ban of bans.list()) {
      if (picked.length >= q.limit) break;
      if (q.kind !== undefined && ban.kind !== q.kind) continue;
      if (!keep(ban)) continue;
      if (after !== undefined && banKey(ban.kind, ban.tenantId, ban.value) <= after) continue;
      picked.push(ban);
    }
    const now = ctx.clock();
    const result = page(picked, q.limit, (b) => banKey(b.kind, b.tenantId, b.value));
    return { items: result.items.map((b) => view(b, now)), ...(result.nextCursor !== undefined ? { nextCursor: result.nextCursor } : {}) };
  }

  async function setBan(
    request: FastifyRequest,
    body: BanBody,
    tenantId: string | undefined,
    by: string,
    where: { readonly value: string; readonly tenant: string },
  ): Promise<Record<string, unknown>> {
    const now = ctx.clock();
    const record: BanRecord = {
      kind: body.kind,
      ...(tenantId !== undefined ? { tenantId } : {}),
      value: body.value,
      ...(body.reason !== undefined ? { reason: body.reason } : {}),
      createdAt: now,
      ...(body.seconds !== undefined ? { until: now + body.seconds * 1000 } : {}),
      by,
    };
    const problem = banProblem(record);
    if (problem !== undefined) throw invalid(problem, where);
    let ban: BanRecord;
    try {
      ban = await bans.set(record);
    } catch (err) {
      request.log.error({ err: describeError(err), kind: record.kind, value: record.value }, 'ban not stored');
      throw new ApiError('BIFRO_API_UNAVAILABLE', `the ban could not be stored: ${describeError(err)}`);
    }
    const kicked = body.kick === false ? 0 : disconnectMatching(ctx, ban, by);
    return { ban: view(ban, ctx.clock()), kicked, durable: bans.durable };
  }

  async function liftBan(
    kind: BanKind,
    tenantId: string | undefined,
    value: string,
    where: { value: string; tenant: string },
  ): Promise<Record<string, unknown>> {
    const problem = banProblem({ kind, tenantId, value });
    if (problem !== undefined) throw invalid(problem, where);
    const lifted = await bans.lift(kind, tenantId, value);
    if (lifted === undefined)
      throw new ApiError(
        'BIFRO_API_NOT_FOUND',
        `no ${kind} ban on "${value}"${tenantId !== undefined && kind !== 'tenant' ? ` in tenant "${tenantId}"` : kind === 'address' ? ' for every tenant' : ''}`,
      );
    return { ban: view(lifted, ctx.clock()) };
  }

  app.get<{ Querystring: ListQuery }>(
    '/api/v1/bans',
    {
      schema: {
        tags: ['bans'],
        summary: 'List bans',
        description: 'Every ban in force, ordered by kind, tenant and value; paged with a stable cursor.',
        querystring: {
          type: 'object',
          properties: { kind: { type: 'string', enum: ALL_KINDS }, tenant: { type: 'string', minLength: 1 }, ...PAGE_QUERY_PROPERTIES },
        },
        response: { 200: pageSchema(BAN), ...ERRORS },
      },
    },
    async (request) => {
      requireAdmin(request);
      const q = request.query;
      return listPage(q, (ban) => q.tenant === undefined || ban.tenantId === q.tenant);
    },
  );

  app.post<{ Body: BanBody }>(
    '/api/v1/bans',
    {
      schema: {
        tags: ['bans'],
        summary: 'Ban a client id, user, tenant or address',
        description:
          'Creates or replaces the ban of (kind, tenant, value). `tenant` is required for clientId and user bans; an address ban without it holds for every tenant.',
        body: {
          type: 'object',
          required: ['kind', 'value'],
          additionalProperties: false,
          properties: {
            kind: { type: 'string', enum: ALL_KINDS },
            tenant: { type: 'string', minLength: 1, maxLength: 65535 },
            ...BAN_FIELDS,
          },
        },
        response: { 200: SET_ANSWER, ...ERRORS },
      },
    },
    async (request) => {
      const principal = requireAdmin(request);
      const body = request.body;
      const tenantId = body.kind === 'tenant' ? (body.tenant ?? body.value) : body.tenant;
      return setBan(request, body, tenantId, principal.name, { value: 'body', tenant: 'body' });
    },
  );

  app.delete<{ Params: { kind: BanKind; value: string }; Querystring: { tenant?: string } }>(
    '/api/v1/bans/:kind/:value',
    {
      schema: {
        tags: ['bans'],
        summary: 'Lift a ban',
        description: 'URL-encode the value (`10.0.0.0%2F8`). `tenant` names the tenant of a clientId, user or tenant-scoped address ban.',
        params: {
          type: 'object',
          required: ['kind', 'value'],
          properties: { kind: { type: 'string', enum: ALL_KINDS }, value: { type: 'string', minLength: 1 } },
        },
        querystring: { type: 'object', properties: { tenant: { type: 'string', minLength: 1 } } },
        response: { 200: LIFT_ANSWER, ...ERRORS, 404: { $ref: 'ApiError#' } },
      },
    },
    async (request) => {
      requireAdmin(request);
      const { kind, value } = request.params;
      return liftBan(kind, request.query.tenant, value, { value: 'params', tenant: 'querystring' });
    },
  );

  const tenantParam = { type: 'string', minLength: 1 } as const;

  app.get<{ Params: { tenant: string }; Querystring: ListQuery }>(
    '/api/v1/tenants/:tenant/bans',
    {
      schema: {
        tags: ['bans'],
        summary: "List a tenant's bans",
        description: "The tenant's client id, user and address bans in force (address bans for every tenant are not listed).",
        params: { type: 'object', required: ['tenant'], properties: { tenant: tenantParam } },
        querystring: { type: 'object', properties: { kind: { type: 'string', enum: TENANT_KINDS }, ...PAGE_QUERY_PROPERTIES } },
        response: { 200: pageSchema(BAN), ...ERRORS },
      },
    },
    async (request) => {
      const tenant = request.params.tenant;
      requireTenant(request, tenant);
      return listPage(request.query, (ban) => ban.kind !== 'tenant' && ban.tenantId === tenant);
    },
  );

  app.post<{ Params: { tenant: string }; Body: BanBody }>(
    '/api/v1/tenants/:tenant/bans',
    {
      schema: {
        tags: ['bans'],
        summary: 'Ban a client id, user or address in a tenant',
        description: "An address ban set here refuses only this tenant's clients from the address.",
        params: { type: 'object', required: ['tenant'], properties: { tenant: tenantParam } },
        body: {
          type: 'object',
          required: ['kind', 'value'],
          additionalProperties: false,
          properties: { kind: { type: 'string', enum: TENANT_KINDS }, ...BAN_FIELDS },
        },
        response: { 200: SET_ANSWER, ...ERRORS },
      },
    },
    async (request) => {
      const tenant = request.params.tenant;
      const principal = requireTenant(request, tenant);
      return setBan(request, request.body, tenant, principal.name, { value: 'body', tenant: 'params' });
    },
  );

  app.delete<{ Params: { tenant: string; kind: BanKind; value: string } }>(
    '/api/v1/tenants/:tenant/bans/:kind/:value',
    {
      schema: {
        tags: ['bans'],
        summary: "Lift a tenant's ban",
        description: 'URL-encode the value (`10.0.0.0%2F8`).',
        params: {
          type: 'object',
          required: ['tenant', 'kind', 'value'],
          properties: { tenant: tenantParam, kind: { type: 'string', enum: TENANT_KINDS }, value: { type: 'string', minLength: 1 } },
        },
        response: { 200: LIFT_ANSWER, ...ERRORS, 404: { $ref: 'ApiError#' } },
      },
    },
    async (request) => {
      const { tenant, kind, value } = request.params;
      requireTenant(request, tenant);
      return liftBan(kind, tenant, value, { value: 'params', tenant: 'params' });
    },
  );
}

/**
 * Closes the live clients a new ban matches, as an admin kick does (broker/session-admin.ts: v5
 * DISCONNECT 0x98 Administrative action, v3 a plain close, the `kicked` event naming the token). A
 * walk over the open connections, only when a ban is set (an operator's action, not the packet
 * path). Returns how many were closed.
 */
function disconnectMatching(ctx: ApiContext, ban: BanRecord, by: string): number {
  const matches = banMatcher(ban);
  const engine = ctx.engine;
  let closed = 0;
  for (const conn of [...engine.connections]) {
    const client = conn.client;
    if (conn.state !== 'connected' || client === undefined || !matches(client)) continue;
    const session = engine.sessions.get(sessionListKey(client.tenantId, client.clientId));
    if (session !== undefined && kickSession(engine, session, { by }).disconnected) closed++;
  }
  if (closed > 0)
    ctx.logger.info({ kind: ban.kind, tenantId: ban.tenantId, value: ban.value, clients: closed }, `ban disconnected ${closed} clients`);
  return closed;
}
