import type { FastifyInstance } from 'fastify';
import { latencyQuantile } from '../plugin-host/call-latency';
import type { LoadedPluginInfo, PluginCallStats } from '../plugin-host/managers';
import type { ApiContext } from './api-context';
import { requireAdmin } from './api-auth';

/** A plugin with a failed call (throw, timeout, invalid answer) less than this ago is `degraded`. */
export const HEALTH_WINDOW_MS = 60_000;

const ERR = { $ref: 'ApiError#' } as const;
const MS = (description: string) => ({ type: 'number', description }) as const;

const CALLS = {
  type: 'object',
  required: ['kind', 'count', 'failures', 'timeouts', 'meanMs', 'p50Ms', 'p90Ms', 'p99Ms'],
  properties: {
    kind: { type: 'string', description: 'The plugin kind the calls were made as.' },
    count: { type: 'integer', description: 'Calls through the guard since the broker started, failed ones included.' },
    failures: { type: 'integer', description: 'Calls that threw, timed out or answered something invalid.' },
    timeouts: { type: 'integer', description: 'Of the failures: calls without an answer within plugins.callTimeoutMs.' },
    meanMs: MS('Mean call duration, milliseconds.'),
    p50Ms: MS('Median call duration, milliseconds (from the latency buckets, interpolated).'),
    p90Ms: MS('90th percentile, milliseconds.'),
    p99Ms: MS('99th percentile, milliseconds.'),
  },
} as const;

const PLUGIN = {
  type: 'object',
  required: ['name', 'version', 'kinds', 'spiRange', 'source', 'health', 'calls'],
  properties: {
    name: { type: 'string' },
    version: { type: 'string' },
    kinds: { type: 'array', items: { type: 'string' } },
    spiRange: { type: 'string', description: 'The `bifro.spi` range the plugin declares.' },
    source: { type: 'string', enum: ['plugins-dir', 'package', 'builtin'], description: "`builtin`: one of core's first-party defaults." },
    health: {
      type: 'string',
      enum: ['ok', 'degraded'],
      description: `degraded: a call failed (threw, timed out, answered something invalid) within the last ${HEALTH_WINDOW_MS / 1000} s.`,
    },
    lastFailureAt: { type: 'string', format: 'date-time', description: 'When a call last failed; absent when none has.' },
    calls: { type: 'array', items: CALLS, description: 'Call metrics per kind.' },
  },
} as const;

const PLUGIN_LIST = {
  type: 'object',
  required: ['items'],
  properties: { items: { type: 'array', items: PLUGIN } },
} as const;

/** Call metrics of one kind of a plugin. */
function callFigures(kind: string, s: PluginCallStats): Record<string, number | string> {
  return {
    kind,
    count: s.calls,
    failures: s.failures,
    timeouts: s.timeouts,
    meanMs: s.calls === 0 ? 0 : s.totalMs / s.calls,
    p50Ms: latencyQuantile(s.latency, 0.5),
    p90Ms: latencyQuantile(s.latency, 0.9),
    p99Ms: latencyQuantile(s.latency, 0.99),
  };
}

/** One plugin as `GET /api/v1/plugins` lists it. */
export function describePlugin(p: LoadedPluginInfo, now: number): Record<string, unknown> {
  const stats = p.kinds.flatMap((kind) => (p.stats[kind] === undefined ? [] : [[kind, p.stats[kind]] as const]));
  const lastFailureAt = Math.max(0, ...stats.map(([, s]) => s.lastFailureAt));
  return {
    name: p.name,
    version: p.version,
    kinds: p.kinds,
    spiRange: p.spiRange,
    source: p.source,
    health: lastFailureAt > 0 && now - lastFailureAt < HEALTH_WINDOW_MS ? 'degraded' : 'ok',
    ...(lastFailureAt > 0 ? { lastFailureAt: new Date(lastFailureAt).toISOString() } : {}),
    calls: stats.map(([kind, s]) => callFigures(kind, s)),
  };
}

/** `GET /api/v1/plugins`: loaded plugins with their health and call metrics (admin token). */
export function pluginRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get(
    '/api/v1/plugins',
    {
      schema: {
        tags: ['plugins'],
        summary: 'Loaded plugins with health and call metrics',
        response: { 200: PLUGIN_LIST, 401: ERR, 403: ERR },
      },
    },
    async (request) => {
      requireAdmin(request);
      // Failures are stamped with the wall clock by the plugin guards (they have no broker clock).
      const now = Date.now();
      return { items: ctx.plugins.map((p) => describePlugin(p, now)) };
    },
  );
}
