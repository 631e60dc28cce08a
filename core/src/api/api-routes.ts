import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './api-context';
import { healthRoutes } from './health';

/** Registers one resource's routes. */
export type RouteModule = (app: FastifyInstance, ctx: ApiContext) => void;

/** Every resource of the admin API, one file each (docs/api.md). */
export const API_ROUTES: readonly RouteModule[] = [healthRoutes];
