import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { SETTINGS } from '@bifro/spi';
import { ERROR_AREAS } from '../error-catalogue';

const cell = (text: string): string => text.replace(/\|/g, '\\|');

/** docs/errors.md, generated from the error catalogues (`npm run docs`). */
export function renderErrorsMarkdown(): string {
  const lines = [
    '# Errors catalogue',
    '',
    '<!-- Generated from core/src/error-catalogue.ts by `npm run docs`; a test fails when this file is stale. -->',
    '',
    'Every error the broker reports to an operator carries one of these codes. The CLI prints it as',
    '`error CODE: message` followed by the remedy; the message names the file, key, plugin or',
    'listener involved.',
    '',
  ];
  for (const area of ERROR_AREAS) {
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
  const root = path.resolve(__dirname, '..', '..', '..');
  for (const [file, text] of Object.entries(renderAllDocs())) {
    writeFileSync(path.join(root, file), text);
    console.log(`wrote ${file}`);
  }
}
