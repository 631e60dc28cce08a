import { writeFileSync } from 'node:fs';
import path from 'node:path';
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

/** The generated documents, by path relative to the repository root. */
export function renderAllDocs(): Record<string, string> {
  return { 'docs/errors.md': renderErrorsMarkdown() };
}

if (require.main === module) {
  const root = path.resolve(__dirname, '..', '..', '..');
  for (const [file, text] of Object.entries(renderAllDocs())) {
    writeFileSync(path.join(root, file), text);
    console.log(`wrote ${file}`);
  }
}
