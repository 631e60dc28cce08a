import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './api-context';
import { banRoutes } from './bans';
import { whoamiRoutes } from './dashboard';
import { healthRoutes } from './health';
import { historyRoutes } from './history';
import { kickRoutes } from './kick';
import { metricsRoutes } from './metrics';
import { nodeRoutes } from './nodes';
import { pluginRoutes } from './plugins';
import { publishRoutes } from './publish';
import { retainedRoutes } from './retained';
import { sessionRoutes } from './sessions';
import { tenantSettingsRoutes } from './tenant-settings';
import { tenantRoutes } from './tenants';

/** Registers one resource's routes. */
export type RouteModule = (app: FastifyInstance, ctx: ApiContext) => void;

/** Every resource of the admin API, one file each (docs/api.md). */
export const API_ROUTES: readonly RouteModule[] = [
  healthRoutes,
  sessionRoutes,
  kickRoutes,
  banRoutes,
  publishRoutes,
  retainedRoutes,
  tenantSettingsRoutes,
  metricsRoutes,
  pluginRoutes,
  tenantRoutes,
  nodeRoutes,
  historyRoutes,
  whoamiRoutes,
];
