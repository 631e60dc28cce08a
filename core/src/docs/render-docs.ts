import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SETTINGS, type ErrorSpec } from '@bifro/spi';
import { ERROR_AREAS } from '../cli/error-catalogue';
import type { PluginPackage } from '../plugin-host/plugin-discovery';
import { readManifest } from '../plugin-host/plugin-manifest';
import { definitionOf, entryOf } from '../plugin-host/plugin-module';

const cell = (text: string): string => text.replace(/\|/g, '\\|');

/** The repository's root folder (from core/src/docs and core/dist/docs alike). */
const ROOT = path.resolve(__dirname, '..', '..', '..');

/** The folder of the first-party plugins, one package per sub-folder. */
export const FIRST_PARTY_PLUGINS_DIR = path.join(ROOT, 'plugins');

/** The codes one first-party plugin declares (`errors` of its plugin definition). */
export interface PluginErrorArea {
  readonly title: string;
  /** The package name. */
  readonly plugin: string;
  /** The plugin's folder. */
  readonly dir: string;
  readonly codes: Readonly<Record<string, ErrorSpec>>;
}

/**
 * The error codes the first-party plugins declare, one area per plugin that declares any, in
 * folder order. Each plugin is loaded by path, built (`npm run build`), through the host's own
 * manifest and shape checks: core's code imports no plugin package, and what this lists is what
 * the host learns when it loads the plugin.
 */
export function firstPartyPluginErrors(pluginsDir: string = FIRST_PARTY_PLUGINS_DIR): PluginErrorArea[] {
  const areas: PluginErrorArea[] = [];
  const folders = readdirSync(pluginsDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  for (const folder of folders) {
    const dir = path.join(pluginsDir, folder);
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
    } catch {
      continue; // not a package
    }
    if (json.bifro === undefined) continue;
    const pkg: PluginPackage = {
      name: String(json.name),
      version: String(json.version),
      dir,
      source: 'plugins-dir',
      bifro: json.bifro,
      main: json.main,
    };
    const manifest = readManifest(pkg);
    // A first-party plugin is loaded by path here, as the host does at run time.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const definition = definitionOf(pkg, manifest, require(entryOf(pkg, manifest)) as unknown);
    const codes = definition.errors ?? {};
    if (Object.keys(codes).length === 0) continue;
    areas.push({ title: `Plugin \`${pkg.name}\` (${manifest.kinds.join(', ')})`, plugin: pkg.name, dir, codes });
  }
  return areas;
}

/** Every area docs/errors.md lists: core's catalogues, then the first-party plugins' codes. */
export function allErrorAreas(): readonly { readonly title: string; readonly codes: Readonly<Record<string, ErrorSpec>> }[] {
  return [...ERROR_AREAS, ...firstPartyPluginErrors()];
}

/** docs/errors.md, generated from the error catalogues and the first-party plugins (`npm run docs`). */
export function renderErrorsMarkdown(): string {
  const lines = [
    '# Errors catalogue',
    '',
    '<!-- Generated from core/src/cli/error-catalogue.ts and the `errors` of the first-party plugins (plugins/*) by `npm run docs`; a test fails when this file is stale. -->',
    '',
    'Every error the broker reports to an operator carries one of these codes. The CLI prints it as',
    '`error CODE: message` followed by the remedy; the message names the file, key, plugin or',
    'listener involved. The codes of a plugin come from the `errors` member of its plugin',
    "definition (docs/plugin-authoring.md); the first-party plugins' are listed after core's.",
    '',
  ];
  for (const area of allErrorAreas()) {
    lines.push(`## ${area.title}`, '', '| code | what happened | what to do |', '|---|---|---|');
    for (const [code, spec] of Object.entries(area.codes)) {
      lines.push(`| \`${code}\` | ${cell(spec.summary)} | ${cell(spec.remedy)} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

/** docs/settings.md, generated from the settings registry in @bifro/spi (`npm run docs`). */
export function renderSettingsMarkdown(): string {
  const lines = [
    '# Per-tenant settings',
    '',
    '<!-- Generated from spi/src/settings.ts by `npm run docs`; a test fails when this file is stale. -->',
    '',
    'Every setting a settings provider may set per tenant, with its type, default and bounds. A value',
    'outside the bounds is refused with a warning naming the tenant, the setting and the value, and',
    'the default applies. `applies`: a `connect` setting takes effect for a client at its next',
    'CONNECT at the latest (CONNACK announces it); a `live` setting also applies to connections',
    'that are already open.',
    '',
    '| setting | type | default | bounds | applies | meaning |',
    '|---|---|---|---|---|---|',
  ];
  for (const [name, spec] of Object.entries(SETTINGS)) {
    const s = spec as { type: string; default: boolean | number; min?: number; max?: number; applies: string; description: string };
    const bounds = s.type === 'integer' ? `${s.min ?? ''}..${s.max ?? ''}` : '';
    lines.push(`| \`${name}\` | ${s.type} | \`${String(s.default)}\` | ${bounds} | ${s.applies} | ${cell(s.description)} |`);
  }
  lines.push('');
  return lines.join('\n');
}

/** The generated documents, by path relative to the repository root. */
export function renderAllDocs(): Record<string, string> {
  return { 'docs/errors.md': renderErrorsMarkdown(), 'docs/settings.md': renderSettingsMarkdown() };
}

if (require.main === module) {
  for (const [file, text] of Object.entries(renderAllDocs())) {
    writeFileSync(path.join(ROOT, file), text);
    console.log(`wrote ${file}`);
  }
}
