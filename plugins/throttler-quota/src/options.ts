import { RESOURCE_TYPES, type ResourceType } from '@bifro/spi';

/** Quotas by resource type; a value of 0, or no value, means unlimited. */
export type Quotas = Partial<Record<ResourceType, number>>;

/** The validated options of the quota throttler. */
export interface QuotaOptions {
  /** Quotas of every tenant that has no value of its own for a resource. */
  readonly defaults: Quotas;
  /** Quotas of named tenants; each value overrides the default of its resource. */
  readonly tenants: Readonly<Record<string, Quotas>>;
}

/** The option names the plugin accepts. */
export const QUOTA_OPTION_NAMES = ['defaults', 'tenants'] as const;

const KNOWN_RESOURCES: ReadonlySet<string> = new Set<string>(RESOURCE_TYPES);

/**
 * Checks the plugin's `options` block and returns it typed. Throws an Error whose message starts
 * with the path of the faulty option, e.g.
 * `tenants.acme.TotalConnections: expected a non-negative integer, got "x"`.
 *
 * @example
 * ```ts
 * const { defaults, tenants } = parseQuotaOptions({ defaults: { TotalConnections: 1000 } });
 * ```
 */
export function parseQuotaOptions(options: Readonly<Record<string, unknown>>): QuotaOptions {
  const unknown = Object.keys(options).filter((key) => !(QUOTA_OPTION_NAMES as readonly string[]).includes(key));
  if (unknown.length > 0) {
    throw new Error(`${unknown.join(', ')}: unknown option (expected ${QUOTA_OPTION_NAMES.join(', ')})`);
  }
  const defaults = options.defaults === undefined ? {} : parseQuotas('defaults', options.defaults);
  const tenants: Record<string, Quotas> = Object.create(null) as Record<string, Quotas>; // any tenant id, even `__proto__`
  if (options.tenants !== undefined) {
    for (const [tenantId, quotas] of Object.entries(asRecord('tenants', options.tenants))) {
      tenants[tenantId] = parseQuotas(`tenants.${tenantId}`, quotas);
    }
  }
  return { defaults, tenants };
}

function parseQuotas(path: string, value: unknown): Quotas {
  const quotas: Quotas = {};
  for (const [name, quota] of Object.entries(asRecord(path, value))) {
    if (!KNOWN_RESOURCES.has(name)) {
      throw new Error(`${path}.${name}: unknown resource type (expected one of ${RESOURCE_TYPES.join(', ')})`);
    }
    if (typeof quota !== 'number' || !Number.isSafeInteger(quota) || quota < 0) {
      throw new Error(`${path}.${name}: expected a non-negative integer, got ${describe(quota)}`);
    }
    quotas[name as ResourceType] = quota;
  }
  return quotas;
}

function asRecord(path: string, value: unknown): Readonly<Record<string, unknown>> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${path}: expected an object, got ${describe(value)}`);
  }
  return value as Readonly<Record<string, unknown>>;
}

function describe(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint' || value === undefined) return String(value);
  return JSON.stringify(value) ?? String(value);
}
