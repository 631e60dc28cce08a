import { SETTINGS, type SettingName, type SettingUpdate } from '@bifro/spi';
import type { FastifyInstance } from 'fastify';
import type { SettingsManager } from '../plugin-host/managers';
import { settingChangeEntryProblems } from '@bifro/spi';
import type { ApiContext } from './api-context';
import { requireAdmin, requireTenant } from './api-auth';
import { ApiError } from './api-errors';
import { TENANT_PARAMS } from './api-message';

const NAMES = Object.keys(SETTINGS) as SettingName[];

/** One setting in an answer, its value typed as the registry types it. */
function settingSchema(name: SettingName): object {
  const spec = SETTINGS[name];
  const type = spec.type === 'boolean' ? 'boolean' : 'integer';
  return {
    type: 'object',
    required: ['value', 'default', 'source', 'applies'],
    description: spec.description,
    properties: {
      value: { type, description: 'The value in effect for the tenant.' },
      default: { type, description: 'The registry default.' },
      source: { type: 'string', enum: ['default', 'provider'], description: '`provider`: the settings plugin sets it for the tenant.' },
      applies: {
        type: 'string',
        enum: ['connect', 'live'],
        description: '`connect`: from the next CONNECT; `live`: live connections too.',
      },
      ...(spec.type === 'integer' ? { min: { type: 'number' }, max: { type: 'number' } } : {}),
    },
  };
}

const SETTINGS_VIEW = {
  type: 'object',
  required: ['tenant', 'provider', 'writable', 'settings'],
  properties: {
    tenant: { type: 'string' },
    provider: { type: 'string', description: 'The settings plugin.' },
    writable: { type: 'boolean', description: 'Whether PATCH can change the settings (the plugin implements update).' },
    settings: {
      type: 'object',
      required: NAMES,
      properties: Object.fromEntries(NAMES.map((name) => [name, settingSchema(name)])),
    },
  },
} as const;

/**
 * Values are not typed in the body schema: the JSON schema layer would coerce `"3"` into 3 and
 * name only the first bad entry. The handler checks every entry against the registry with the
 * settings manager's words, and names unknown settings too (hence no `additionalProperties: false`).
 */
const PATCH_BODY = {
  type: 'object',
  minProperties: 1,
  description: 'Setting name → new value (boolean or integer within the registry bounds), or null to remove the override.',
  properties: Object.fromEntries(NAMES.map((name) => [name, { description: `${SETTINGS[name].type}, or null` }])),
} as const;

const ERR = { $ref: 'ApiError#' };

/**
 * A tenant's settings: every setting of the registry with the value in effect, its default and
 * where it comes from (`GET`); changed through the settings provider when it is writable
 * (`PATCH`), hot: the tenant's next CONNECT gets the new values, live connections the `live` ones.
 */
export function tenantSettingsRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const settings = ctx.engine.settings;

  app.get<{ Params: { tenant: string } }>(
    '/api/v1/tenants/:tenant/settings',
    {
      schema: {
        tags: ['settings'],
        summary: "A tenant's effective settings",
        params: TENANT_PARAMS,
        response: { 200: SETTINGS_VIEW, 400: ERR, 401: ERR, 403: ERR },
      },
    },
    async (request) => {
      requireTenant(request, request.params.tenant);
      return settingsView(settings, request.params.tenant);
    },
  );

  app.patch<{ Params: { tenant: string }; Body: Record<string, unknown> }>(
    '/api/v1/tenants/:tenant/settings',
    {
      schema: {
        tags: ['settings'],
        summary: "Change a tenant's settings",
        description:
          'Admin token only. Validated against the settings registry; 400 lists every bad entry (in `message`, and one by one in `errors`) and nothing is written. 409 when the settings plugin is not writable.',
        params: TENANT_PARAMS,
        body: PATCH_BODY,
        response: { 200: SETTINGS_VIEW, 400: ERR, 401: ERR, 403: ERR, 409: ERR, 503: ERR },
      },
    },
    async (request) => {
      const tenantId = request.params.tenant;
      requireTenant(request, tenantId);
      // Settings are the limits the operator gives a tenant: a tenant token reads them, only an admin token changes them.
      const principal = requireAdmin(request);
      if (!settings.writable)
        throw new ApiError(
          'BIFRO_API_CONFLICT',
          `the settings provider ${settings.providerName} is not writable; use a provider with update, such as @bifro/plugin-settings-file`,
        );
      const problems = settingChangeEntryProblems(request.body);
      if (problems.length > 0)
        throw new ApiError(
          'BIFRO_API_INVALID_REQUEST',
          `body: ${problems.map((p) => p.line).join('; ')}`,
          problems.map((p) => ({ field: p.setting, message: p.problem })),
        );
      const outcome = await settings.update(tenantId, request.body as SettingUpdate);
      if (!outcome.ok) {
        const message = outcome.problems.join('; ');
        if (outcome.reason === 'invalid') throw new ApiError('BIFRO_API_INVALID_REQUEST', `body: ${message}`);
        if (outcome.reason === 'timeout') throw new ApiError('BIFRO_API_UNAVAILABLE', message);
        throw new ApiError('BIFRO_API_CONFLICT', `the settings provider ${settings.providerName} did not store the change: ${message}`);
      }
      request.log.info({ tenantId, token: principal.name, changes: request.body }, 'tenant settings changed');
      return settingsView(settings, tenantId);
    },
  );
}

function settingsView(settings: SettingsManager, tenantId: string): object {
  const held = settings.overrides(tenantId);
  const out: Record<string, object> = {};
  for (const name of NAMES) {
    const spec: { default: boolean | number; applies: string; min?: number; max?: number } = SETTINGS[name];
    out[name] = {
      value: settings.get(tenantId, name),
      default: spec.default,
      source: held[name] === undefined ? 'default' : 'provider',
      applies: spec.applies,
      ...(spec.min !== undefined ? { min: spec.min } : {}),
      ...(spec.max !== undefined ? { max: spec.max } : {}),
    };
  }
  return { tenant: tenantId, provider: settings.providerName, writable: settings.writable, settings: out };
}
