import semver from 'semver';
import { PLUGIN_KINDS, SPI_VERSION, type PluginKind, type PluginManifest } from '@bifro/spi';
import { pluginError } from './plugin-errors';
import type { PluginPackage } from './plugin-discovery';

const KINDS: ReadonlySet<string> = new Set<string>(PLUGIN_KINDS);

/** Checks the `bifro` field of a plugin's package.json (phase `manifest`). */
export function readManifest(pkg: PluginPackage): PluginManifest {
  const where = { phase: 'manifest', plugin: pkg.name, dir: pkg.dir } as const;
  const invalid = (problem: string): Error =>
    pluginError('BIFRO_PLUGIN_MANIFEST_INVALID', `plugin ${pkg.name} (${pkg.dir}): the "bifro" field of package.json ${problem}`, where);

  if (pkg.bifro === undefined) {
    throw pluginError(
      'BIFRO_PLUGIN_MANIFEST_MISSING',
      `${pkg.name} (${pkg.dir}) is not a Bifro plugin: its package.json has no "bifro" field (expected e.g. {"kinds": ["auth"], "spi": "^${SPI_VERSION}"})`,
      where,
    );
  }
  if (typeof pkg.bifro !== 'object' || pkg.bifro === null || Array.isArray(pkg.bifro)) throw invalid('is not an object');
  const bifro = pkg.bifro as Record<string, unknown>;

  const kinds = bifro.kinds;
  if (!Array.isArray(kinds) || kinds.length === 0) throw invalid(`needs "kinds", a non-empty list among ${PLUGIN_KINDS.join(', ')}`);
  const unknown = kinds.filter((kind) => typeof kind !== 'string' || !KINDS.has(kind));
  if (unknown.length > 0)
    throw invalid(`lists unknown kinds ${unknown.map((k) => JSON.stringify(k)).join(', ')} (known: ${PLUGIN_KINDS.join(', ')})`);
  if (new Set(kinds).size !== kinds.length) throw invalid('lists a kind twice');

  const spi = bifro.spi;
  if (typeof spi !== 'string' || semver.validRange(spi) === null)
    throw invalid(`needs "spi", a semver range such as "^${SPI_VERSION}" (found ${JSON.stringify(spi)})`);

  const main = bifro.main;
  if (main !== undefined && (typeof main !== 'string' || main === '')) throw invalid('has a "main" that is not a file path');
  const description = bifro.description;
  if (description !== undefined && typeof description !== 'string') throw invalid('has a "description" that is not a string');

  return {
    kinds: kinds as PluginKind[],
    spi,
    ...(main === undefined ? {} : { main }),
    ...(description === undefined ? {} : { description }),
  };
}

/** Whether a plugin's SPI range accepts this broker's SPI version (pre-releases are not matched implicitly). */
export function isSpiCompatible(range: string): boolean {
  return semver.satisfies(SPI_VERSION, range, { includePrerelease: false });
}

/** Refuses a plugin whose `bifro.spi` range does not include {@link SPI_VERSION} (phase `version`). */
export function checkSpiVersion(pkg: PluginPackage, manifest: PluginManifest): void {
  if (isSpiCompatible(manifest.spi)) return;
  throw pluginError(
    'BIFRO_PLUGIN_SPI_MISMATCH',
    `plugin ${pkg.name}@${pkg.version} (${pkg.dir}) supports SPI ${manifest.spi}, but this broker implements SPI ${SPI_VERSION}`,
    { phase: 'version', plugin: pkg.name, dir: pkg.dir, spiRange: manifest.spi, spiVersion: SPI_VERSION },
  );
}

/** Refuses using a plugin for a kind it does not declare (phase `manifest`). */
export function checkKindDeclared(pkg: PluginPackage, manifest: PluginManifest, kind: PluginKind): void {
  if (manifest.kinds.includes(kind)) return;
  throw pluginError(
    'BIFRO_PLUGIN_KIND_NOT_PROVIDED',
    `the config uses plugin ${pkg.name} (${pkg.dir}) as ${kind}, but it declares only ${manifest.kinds.join(', ')}`,
    { phase: 'manifest', plugin: pkg.name, dir: pkg.dir, kind },
  );
}
