import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import fastifyStatic from '@fastify/static';
import type { ApiContext } from './api-context';
import { principalOf } from './api-auth';

/** Where the dashboard is served (with `api.dashboard`, docs/dashboard.md). */
export const DASHBOARD_PREFIX = '/dashboard';
/** The page's files: plain ES modules and CSS, served as they are (core/dashboard). */
const DASHBOARD_DIR = join(__dirname, '..', '..', 'dashboard');
/** The chart library's browser build, served from its package. */
const UPLOT_DIR = join(dirname(require.resolve('uplot/package.json')), 'dist');
const UPLOT_FILES = new Set(['/uPlot.esm.js', '/uPlot.min.css']);

/**
 * The page runs only its own scripts and talks only to this API: no inline script, no other
 * origin, no framing. The token never leaves the tab (sessionStorage), and no referrer carries URLs.
 */
const HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  // Revalidated on every load (ETag): an upgraded broker serves its new page at once.
  'cache-control': 'no-cache',
};

function setHeaders(res: { setHeader(name: string, value: string): unknown }): void {
  for (const [name, value] of Object.entries(HEADERS)) res.setHeader(name, value);
}

/**
 * The web dashboard: static files without a token (they hold no data), which then call the API
 * with the token the user types in.
 */
export async function registerDashboard(app: FastifyInstance): Promise<void> {
  app.addHook('onRoute', (route) => {
    if (route.url === DASHBOARD_PREFIX || route.url.startsWith(`${DASHBOARD_PREFIX}/`))
      route.config = { ...(route.config ?? {}), public: true };
  });
  app.get(DASHBOARD_PREFIX, { schema: { hide: true } }, async (_request, reply) => reply.redirect(`${DASHBOARD_PREFIX}/`, 301));
  // Browsers ask for /favicon.ico on any page of this origin that names no icon (an API URL opened
  // in a tab). Unknown, it would answer 401, and each 401 counts toward api.authFailuresPerMinute
  // for the address, which behind `ssh -L` is everyone's 127.0.0.1.
  const icon = readFileSync(join(DASHBOARD_DIR, 'favicon.svg'));
  app.get('/favicon.ico', { schema: { hide: true }, config: { public: true } }, async (_request, reply) =>
    reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon),
  );
  await app.register(fastifyStatic, {
    root: DASHBOARD_DIR,
    prefix: `${DASHBOARD_PREFIX}/`,
    index: 'index.html',
    wildcard: true,
    schemaHide: true,
    setHeaders,
    allowedPath: (path) => !path.endsWith('.d.ts') && !path.endsWith('tsconfig.json'),
  });
  await app.register(fastifyStatic, {
    root: UPLOT_DIR,
    prefix: `${DASHBOARD_PREFIX}/vendor/`,
    decorateReply: false,
    schemaHide: true,
    setHeaders,
    allowedPath: (path) => UPLOT_FILES.has(path),
  });
}

const WHOAMI = {
  type: 'object',
  required: ['name', 'admin'],
  properties: {
    name: { type: 'string', description: "The token's name in `api.tokens`." },
    admin: { type: 'boolean', description: 'An admin token: every tenant, nodes, plugins, bans.' },
    tenant: { type: 'string', description: 'For a tenant token, the one tenant it may see and act on.' },
  },
} as const;

/** `GET /api/v1/whoami`: what the request's token may do, so a client (the dashboard) shows only that. */
export function whoamiRoutes(app: FastifyInstance, _ctx: ApiContext): void {
  app.get(
    '/api/v1/whoami',
    {
      schema: {
        tags: ['health'],
        summary: "The request's token: its name and scope",
        response: { 200: WHOAMI, 401: { $ref: 'ApiError#' } },
      },
    },
    async (request) => {
      const p = principalOf(request);
      return p.tenant === undefined ? { name: p.name, admin: true } : { name: p.name, admin: false, tenant: p.tenant };
    },
  );
}
