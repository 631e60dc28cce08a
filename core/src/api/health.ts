import type { FastifyInstance } from 'fastify';
import { CORE_VERSION } from '../plugin-host/core-version';
import type { ApiContext } from './api-context';

const HEALTH = {
  type: 'object',
  required: ['status', 'version', 'uptimeSeconds', 'nodeId'],
  properties: {
    status: { type: 'string', enum: ['ok'] },
    version: { type: 'string' },
    nodeId: { type: 'string' },
    uptimeSeconds: { type: 'number' },
  },
} as const;

const READY = {
  type: 'object',
  required: ['ready', 'checks'],
  properties: {
    ready: { type: 'boolean' },
    reasons: {
      type: 'array',
      items: { type: 'string' },
      description: 'Why it is not ready, one sentence per failing check (absent when ready).',
    },
    checks: {
      type: 'object',
      required: ['listeners', 'storage', 'plugins', 'stopping'],
      properties: {
        listeners: { type: 'boolean', description: 'Every configured MQTT listener is bound.' },
        storage: {
          type: 'boolean',
          description:
            'The storage plugin is open and works: false while storage calls fail, or while the storage says it cannot serve (its health(), e.g. reopening after a full disk).',
        },
        plugins: { type: 'boolean', description: 'Every plugin is initialised.' },
        stopping: { type: 'boolean', description: 'Shutdown has begun (the broker drains its clients).' },
      },
    },
  },
} as const;

/**
 * `GET /health`: the process answers (liveness). `GET /ready`: it serves MQTT (readiness; 503
 * while starting, draining, or while storage calls fail, with the reasons). Both without a token,
 * for load balancers and orchestrators.
 */
export function healthRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get(
    '/health',
    { config: { public: true }, schema: { tags: ['health'], summary: 'Liveness', security: [], response: { 200: HEALTH } } },
    async () => ({
      status: 'ok' as const,
      version: CORE_VERSION,
      nodeId: ctx.config.nodeId,
      uptimeSeconds: Math.max(0, (ctx.clock() - ctx.startedAt) / 1000),
    }),
  );
  app.get(
    '/ready',
    {
      config: { public: true },
      schema: { tags: ['health'], summary: 'Readiness', security: [], response: { 200: READY, 503: READY } },
    },
    async (_request, reply) => {
      const { ready, stopping } = ctx.state;
      const storage = ctx.engine.storageHealth.health();
      const checks = { listeners: ready && !stopping, storage: ready && storage.ok, plugins: ready, stopping };
      const ok = ready && !stopping && storage.ok;
      if (ok) return reply.code(200).send({ ready: ok, checks });
      const reasons: string[] = [];
      if (!ready) reasons.push('the broker is starting');
      if (stopping) reasons.push('the broker is stopping');
      if (!storage.ok) reasons.push(`storage: ${storage.reason ?? 'not working'}`);
      return reply.code(503).send({ ready: ok, checks, reasons });
    },
  );
}
