import { PLUGIN_KINDS, type PluginKind } from '@bifro/spi';
import { usageError } from './cli-error';

/** What the generator knows about each kind: names used in the templates, the README and the prompts. */
export interface KindInfo {
  /** The factory the kind's `src/<kind>.ts` exports, e.g. `createAuth`. */
  readonly factory: string;
  /** The SPI interface the example implements. */
  readonly spiInterface: string;
  /** One line: what the generated example does. */
  readonly example: string;
  /** Whether the broker config takes a list of plugins for this kind (`auth: [ ... ]`) or one (`throttler: { ... }`). */
  readonly list: boolean;
}

/** Every kind, with a template folder `templates/<kind>/` each. Typed by the SPI: a new kind is a compile error here. */
export const KIND_INFO: { readonly [K in PluginKind]: KindInfo } = {
  auth: {
    factory: 'createAuth',
    spiInterface: 'AuthProvider',
    example: 'users and passwords from the options (default: demo / demo-secret in tenant demo)',
    list: true,
  },
  acl: {
    factory: 'createAcl',
    spiInterface: 'AccessControl',
    example: 'a protected topic filter only listed users may use (default: admin/# for the user admin)',
    list: true,
  },
  balancer: {
    factory: 'createBalancer',
    spiInterface: 'ClientBalancer',
    example: 'redirects the clients of listed tenants to another server (default: none)',
    list: false,
  },
  events: {
    factory: 'createEvents',
    spiInterface: 'EventCollector',
    example: 'counts events by type and logs a summary every N events and at close',
    list: true,
  },
  settings: {
    factory: 'createSettings',
    spiInterface: 'SettingProvider',
    example: 'per-tenant setting overrides from the options over the registry defaults',
    list: false,
  },
  throttler: {
    factory: 'createThrottler',
    spiInterface: 'ResourceThrottler',
    example: 'a per-tenant connection limit from the options (default: 1000)',
    list: false,
  },
  storage: {
    factory: 'createStorage',
    spiInterface: 'Storage',
    example: 'a compact in-memory storage (not durable) passing the storage conformance kit',
    list: false,
  },
};

/** The kinds in SPI order. */
export const KINDS: readonly PluginKind[] = PLUGIN_KINDS;

/** The kind chosen when `--yes` is given without `--kind`. */
export const DEFAULT_KIND: PluginKind = 'auth';

export function isKind(value: string): value is PluginKind {
  return (KINDS as readonly string[]).includes(value);
}

/**
 * The kinds named by `--kind` values (each may list several: `auth,acl`), checked, without
 * repeats, in SPI order. An unknown kind is a usage error listing the valid ones.
 */
export function parseKinds(values: readonly string[]): PluginKind[] {
  const named = values.flatMap((v) => v.split(/[\s,]+/)).filter((v) => v !== '');
  const unknown = named.filter((k) => !isKind(k.toLowerCase()));
  if (unknown.length > 0) {
    const list = unknown.map((k) => JSON.stringify(k)).join(', ');
    throw usageError(`unknown kind ${list}: valid kinds are ${KINDS.join(', ')}`);
  }
  const chosen = new Set(named.map((k) => k.toLowerCase()));
  return KINDS.filter((k) => chosen.has(k));
}

/** `auth`, `auth and acl`, `auth, acl and events`. */
export function describeKinds(kinds: readonly string[]): string {
  if (kinds.length <= 1) return kinds.join('');
  return `${kinds.slice(0, -1).join(', ')} and ${kinds[kinds.length - 1]}`;
}
