import http from 'node:http';
import https from 'node:https';
import { SPI_VERSION } from '@bifro/spi';
import semver from 'semver';
import { BifroError, describeError } from '../base/errors';
import { npmConfig } from './npm-runner';
import type { PluginErrorCode } from './plugin-errors';
import { isSpiCompatible } from './plugin-manifest';

/**
 * The npm registry side of `bifro plugin search` (and of `install`'s reachability check): npm's
 * search API and package documents, fetched directly.
 */

/** The keyword a package lists to be found by `bifro plugin search`. */
export const PLUGIN_KEYWORD = 'bifro-plugin';

/** npm's default registry, used when npm itself cannot be asked. */
export const DEFAULT_REGISTRY = 'https://registry.npmjs.org/';

const SEARCH_SIZE = 50;
const REQUEST_TIMEOUT_MS = 10_000;
/** Package documents fetched at once. */
const PARALLEL = 8;

export interface RegistryOptions {
  /** `--registry`; else npm's configured registry (`.npmrc`, `npm_config_registry`). */
  readonly registry?: string;
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
}

/** One package `bifro plugin search` lists. */
export interface PluginSearchHit {
  readonly name: string;
  readonly version: string;
  readonly description: string | undefined;
  /** `bifro.spi` of the latest version; undefined when the registry did not say. */
  readonly spiRange: string | undefined;
  readonly kinds: readonly string[];
  /** Whether this broker's SPI version fits `spiRange`; undefined when the range is unknown. */
  readonly compatible: boolean | undefined;
}

export interface PluginSearchResult {
  readonly registry: string;
  readonly spiVersion: string;
  readonly hits: readonly PluginSearchHit[];
}

/** A registry URL with its trailing slash (relative paths such as `-/v1/search` resolve under it). */
export function normalizeRegistry(url: string): string {
  return url.endsWith('/') ? url : `${url}/`;
}

/** The registry npm would use: `--registry`, else `npm config get registry` in `cwd`, else npm's default. */
export async function resolveRegistry(opts: RegistryOptions): Promise<string> {
  if (opts.registry !== undefined) return normalizeRegistry(opts.registry);
  try {
    const config = await npmConfig(['registry'], opts);
    return normalizeRegistry(config.get('registry') ?? DEFAULT_REGISTRY);
  } catch (err) {
    if (err instanceof BifroError && err.code === 'BIFRO_PLUGIN_NPM_MISSING') return DEFAULT_REGISTRY;
    throw err;
  }
}

/** Whether npm is set to reach registries through a proxy (then a direct request says nothing about what npm can reach). */
export function usesProxy(config: ReadonlyMap<string, string>, env: NodeJS.ProcessEnv): boolean {
  if (config.has('proxy') || config.has('https-proxy')) return true;
  return ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy'].some((name) => (env[name] ?? '') !== '');
}

/**
 * Fails fast with BIFRO_PLUGIN_REGISTRY_UNREACHABLE when nothing answers at `registry` (refused,
 * unknown host, timeout): npm itself retries for a minute before it gives up. Any HTTP answer counts.
 */
export async function checkReachable(registry: string): Promise<void> {
  await request(new URL(registry), registry);
}

/**
 * Packages with the keyword `bifro-plugin` (and the `words`, if any) on the registry, with the SPI
 * range of their latest version. npm's registry understands the `keywords:` qualifier; a registry
 * that does not (verdaccio matches the words against names and descriptions only) gets a second
 * query with the words alone. Either way only packages listing the keyword are returned.
 */
export async function searchPlugins(words: readonly string[], opts: RegistryOptions): Promise<PluginSearchResult> {
  const registry = await resolveRegistry(opts);
  let objects = await search(registry, [`keywords:${PLUGIN_KEYWORD}`, ...words].join(' '), true);
  let packages = withKeyword(objects);
  if (packages.length === 0) {
    objects = await search(registry, words.join(' '), false).catch(() => []);
    packages = withKeyword(objects);
  }
  const hits: PluginSearchHit[] = [];
  for (let i = 0; i < packages.length; i += PARALLEL) {
    hits.push(...(await Promise.all(packages.slice(i, i + PARALLEL).map((pkg) => describeHit(registry, pkg)))));
  }
  hits.sort((a, b) => a.name.localeCompare(b.name));
  return { registry, spiVersion: SPI_VERSION, hits };
}

/** A package's path on the registry: a scoped name's slash encoded (`@scope%2Fname`). */
export function packagePath(name: string): string {
  return name.startsWith('@') ? `@${encodeURIComponent(name.slice(1))}` : encodeURIComponent(name);
}

interface SearchPackage {
  readonly name: string;
  readonly version: string | undefined;
  readonly description: string | undefined;
}

async function search(registry: string, text: string, required: boolean): Promise<unknown[]> {
  const url = new URL('-/v1/search', registry);
  url.searchParams.set('text', text);
  url.searchParams.set('size', String(SEARCH_SIZE));
  const response = await request(url, registry);
  const body = response.body;
  if (!response.ok) {
    if (!required) return [];
    throw searchFailed(`${url.href} answered ${response.status} ${response.statusText}: ${body.slice(0, 200).trim()}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    throw searchFailed(`${url.href} did not answer JSON (is ${registry} an npm registry?)`);
  }
  const objects = (json as { objects?: unknown } | null)?.objects;
  if (!Array.isArray(objects)) throw searchFailed(`${url.href} answered without "objects" (is ${registry} an npm registry?)`);
  return objects;
}

function withKeyword(objects: readonly unknown[]): SearchPackage[] {
  const found: SearchPackage[] = [];
  const seen = new Set<string>();
  for (const object of objects) {
    const pkg = (object as { package?: Record<string, unknown> } | null)?.package;
    if (pkg === undefined || typeof pkg.name !== 'string' || seen.has(pkg.name)) continue;
    const keywords = Array.isArray(pkg.keywords) ? pkg.keywords : typeof pkg.keywords === 'string' ? pkg.keywords.split(',') : [];
    if (!keywords.some((k) => typeof k === 'string' && k.trim().toLowerCase() === PLUGIN_KEYWORD)) continue;
    seen.add(pkg.name);
    const tags = pkg['dist-tags'] as Record<string, unknown> | undefined;
    const version = typeof pkg.version === 'string' ? pkg.version : typeof tags?.latest === 'string' ? tags.latest : undefined;
    found.push({ name: pkg.name, version, description: typeof pkg.description === 'string' ? pkg.description : undefined });
  }
  return found;
}

/** Adds what the package document says about the latest version: version, `bifro.spi`, `bifro.kinds`. */
async function describeHit(registry: string, pkg: SearchPackage): Promise<PluginSearchHit> {
  let version = pkg.version;
  let bifro: Record<string, unknown> | undefined;
  let description = pkg.description;
  try {
    const response = await request(new URL(packagePath(pkg.name), registry), registry, { accept: 'application/json' });
    if (response.ok) {
      const doc = JSON.parse(response.body) as {
        'dist-tags'?: Record<string, unknown>;
        versions?: Record<string, Record<string, unknown>>;
      };
      const latest = doc['dist-tags']?.latest;
      if (typeof latest === 'string') version = latest;
      const manifest = version === undefined ? undefined : doc.versions?.[version];
      if (typeof manifest?.bifro === 'object' && manifest.bifro !== null) bifro = manifest.bifro as Record<string, unknown>;
      if (description === undefined && typeof manifest?.description === 'string') description = manifest.description;
    }
  } catch {
    // The document is extra detail: without it, the SPI range is shown as unknown.
  }
  const spiRange = typeof bifro?.spi === 'string' && semver.validRange(bifro.spi) !== null ? bifro.spi : undefined;
  return {
    name: pkg.name,
    version: version ?? '?',
    description,
    spiRange,
    kinds: Array.isArray(bifro?.kinds) ? bifro.kinds.filter((k): k is string => typeof k === 'string') : [],
    compatible: spiRange === undefined ? undefined : isSpiCompatible(spiRange),
  };
}

interface HttpAnswer {
  readonly ok: boolean;
  readonly status: number;
  readonly statusText: string;
  readonly body: string;
}

/** Largest answer read (a package document with many versions can be a few MB). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

/**
 * A GET with node:http(s) (not fetch, which refuses some ports outright), redirects followed.
 * A network failure (refused, unknown host, timeout) is BIFRO_PLUGIN_REGISTRY_UNREACHABLE.
 */
function request(url: URL, registry: string, headers: Record<string, string> = {}, redirects = 5): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const unreachable = (reason: string, cause?: unknown): void =>
      reject(
        new BifroError(
          'BIFRO_PLUGIN_REGISTRY_UNREACHABLE' satisfies PluginErrorCode,
          `cannot reach the npm registry ${registry}: ${reason}`,
          { registry, url: url.href },
          cause === undefined ? undefined : { cause },
        ),
      );
    const client = url.protocol === 'https:' ? https : http;
    const req = client.get(url, { headers: { 'user-agent': 'bifro', ...headers }, timeout: REQUEST_TIMEOUT_MS, agent: false }, (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (status >= 300 && status < 400 && location !== undefined && redirects > 0) {
        res.resume();
        request(new URL(location, url), registry, headers, redirects - 1).then(resolve, reject);
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) req.destroy(new Error(`answer larger than ${MAX_BODY_BYTES} bytes`));
        else chunks.push(chunk);
      });
      res.on('end', () =>
        resolve({
          ok: status >= 200 && status < 300,
          status,
          statusText: res.statusMessage ?? '',
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', (err) => unreachable(describeError(err), err));
    });
    req.on('timeout', () =>
      req.destroy(Object.assign(new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`), { code: 'ETIMEDOUT' })),
    );
    req.on('error', (err) => unreachable(networkReason(err), err));
  });
}

/** `connect ECONNREFUSED 127.0.0.1:4873`, `getaddrinfo ENOTFOUND registry.example`, ... (duck-typed: errors may come from another realm). */
function networkReason(err: unknown): string {
  const nested = (err as { errors?: unknown } | undefined)?.errors; // AggregateError: every address of the host refused
  const first: unknown = Array.isArray(nested) && nested.length > 0 ? nested[0] : err;
  const message = (first as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' && message !== '' ? message : String(first);
}

function searchFailed(message: string): BifroError {
  return new BifroError('BIFRO_PLUGIN_SEARCH_FAILED' satisfies PluginErrorCode, `search failed: ${message}`);
}
