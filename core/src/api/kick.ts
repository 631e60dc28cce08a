import type { FastifyInstance } from 'fastify';
import { kickClients, kickSession, type KickRedirect } from '../broker/session-admin';
import type { ApiContext } from './api-context';
import { requireTenant } from './api-auth';
import { ApiError } from './api-errors';
import { SESSION_PARAMS, TENANT_PARAM, sessionOf } from './sessions';

const ERR = { $ref: 'ApiError#' } as const;
const ERRORS = { 400: ERR, 401: ERR, 403: ERR, 404: ERR } as const;
const TAGS = ['sessions'];

const SERVER_REFERENCE = {
  type: 'string',
  minLength: 1,
  maxLength: 65535,
  description: 'Where the client should connect instead (v5 Server Reference, e.g. `mqtt2.example.com:1883`).',
} as const;

const REDIRECT = {
  type: 'object',
  required: ['permanent', 'serverReference'],
  additionalProperties: false,
  description: 'Redirect a v5 client: DISCONNECT 0x9D Server moved (permanent) or 0x9C Use another server, with the Server Reference.',
  properties: { permanent: { type: 'boolean' }, serverReference: SERVER_REFERENCE },
} as const;

interface KickQuery {
  discard?: boolean;
  redirect?: 'temporary' | 'permanent';
  serverReference?: string;
}

interface KickBody {
  discard?: boolean;
  redirect?: KickRedirect;
}

/** The options of a DELETE: in the query (what every HTTP client can send) or in a JSON body, not both. */
function kickOptions(query: KickQuery, body: KickBody | undefined): { discard: boolean; redirect: KickRedirect | undefined } {
  const inQuery = query.discard !== undefined || query.redirect !== undefined || query.serverReference !== undefined;
  if (body !== undefined && Object.keys(body).length > 0) {
    if (inQuery) throw new ApiError('BIFRO_API_INVALID_REQUEST', 'give the kick options in the query or in the body, not both');
    return { discard: body.discard === true, redirect: body.redirect };
  }
  if ((query.redirect === undefined) !== (query.serverReference === undefined))
    throw new ApiError('BIFRO_API_INVALID_REQUEST', 'querystring: redirect and serverReference go together');
  const redirect =
    query.redirect === undefined ? undefined : { permanent: query.redirect === 'permanent', serverReference: query.serverReference! };
  return { discard: query.discard === true, redirect };
}

/**
 * Kicks (docs/api.md § Kick): one client (`DELETE …/sessions/{clientId}`), every client of a
 * user or of the whole tenant (`POST …/kick`). v5 clients get DISCONNECT 0x98 Administrative
 * action, or 0x9C / 0x9D with the Server Reference when redirected; v3 clients are closed. A
 * kick is an abnormal close: the will is published (after its delay unless `discard`).
 */
export function kickRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.delete<{ Params: { tenant: string; clientId: string }; Querystring: KickQuery; Body: KickBody | undefined }>(
    '/api/v1/tenants/:tenant/sessions/:clientId',
    {
      // A DELETE usually has no body: validate the options as an empty one then.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        tags: TAGS,
        summary: 'Kick a client',
        description:
          'Closes the live connection (v5: DISCONNECT 0x98, or 0x9C/0x9D with a redirect). The session is kept for its expiry unless `discard` is true. The will is published as after a network drop; with `discard` a pending will is published at once. Options in the query or in a JSON body.',
        params: SESSION_PARAMS,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            discard: { type: 'boolean', description: 'Also end the session (subscriptions, inbox, stored record).' },
            redirect: {
              type: 'string',
              enum: ['temporary', 'permanent'],
              description: 'Redirect a v5 client (0x9C / 0x9D); needs serverReference.',
            },
            serverReference: SERVER_REFERENCE,
          },
        },
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { discard: { type: 'boolean' }, redirect: REDIRECT },
        },
        response: {
          200: {
            type: 'object',
            required: ['clientId', 'disconnected', 'sessionEnded'],
            properties: {
              clientId: { type: 'string' },
              disconnected: { type: 'boolean', description: 'A live connection was closed (false: the client was offline).' },
              sessionEnded: { type: 'boolean', description: 'The session is gone (discarded, or transient).' },
            },
          },
          ...ERRORS,
        },
      },
    },
    async (request) => {
      const { tenant, clientId } = request.params;
      const principal = requireTenant(request, tenant);
      const session = sessionOf(ctx, tenant, clientId);
      const { discard, redirect } = kickOptions(request.query, request.body);
      const outcome = kickSession(ctx.engine, session, { discard, redirect, by: principal.name });
      return { clientId, ...outcome };
    },
  );

  app.post<{ Params: { tenant: string }; Body: { user?: string; redirect?: KickRedirect } }>(
    '/api/v1/tenants/:tenant/kick',
    {
      schema: {
        tags: TAGS,
        summary: "Kick a user's clients, or a whole tenant's",
        description:
          'Closes every connected client of `user`, or of the tenant when no user is given (v5: DISCONNECT 0x98, or 0x9C/0x9D with a redirect). Sessions are kept for their expiry. Answers how many were closed.',
        params: { type: 'object', required: ['tenant'], properties: { tenant: TENANT_PARAM } },
        body: {
          type: 'object',
          additionalProperties: false,
          properties: {
            user: { type: 'string', minLength: 1, maxLength: 65535, description: 'The user id (default: every user).' },
            redirect: REDIRECT,
          },
        },
        response: {
          200: { type: 'object', required: ['kicked'], properties: { kicked: { type: 'integer', description: 'Connections closed.' } } },
          ...ERRORS,
        },
      },
    },
    async (request) => {
      const { tenant } = request.params;
      const principal = requireTenant(request, tenant);
      const body = request.body ?? {};
      return { kicked: await kickClients(ctx.engine, tenant, body.user, { redirect: body.redirect, by: principal.name }) };
    },
  );
}
