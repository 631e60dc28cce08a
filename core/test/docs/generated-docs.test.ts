import { readFileSync } from 'node:fs';
import path from 'node:path';
import { renderAllDocs } from '../../src/docs/render-docs';
import { execFileSync } from 'node:child_process';
import { ERROR_AREAS } from '../../src/error-catalogue';
import { ENV_VARS } from '../../src/runtime/env-overrides';
import { DAEMON_CHILD_ENV } from '../../src/cli/commands/start';

const ROOT = path.resolve(__dirname, '..', '..', '..');

describe('generated docs', () => {
  it.each(Object.entries(renderAllDocs()))('%s matches the code (run `npm run docs` when this fails)', (file, expected) => {
    expect(readFileSync(path.join(ROOT, file), 'utf8')).toBe(expected);
  });

  it('lists every error code exactly once across areas', () => {
    const codes = ERROR_AREAS.flatMap((a) => Object.keys(a.codes));
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^BIFRO_[A-Z0-9_]+$/);
  });

  it('every code named in core and plugin sources is in the catalogue', () => {
    const known = new Set([...ERROR_AREAS.flatMap((a) => Object.keys(a.codes)), ...Object.keys(ENV_VARS), DAEMON_CHILD_ENV]);
    const out = execFileSync('git', ['grep', '-ohE', "'BIFRO_[A-Z0-9_]*[A-Z0-9]'", '--', 'core/src', 'plugins/*/src'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    const used = new Set(
      out
        .split('\n')
        .filter(Boolean)
        .map((s) => s.replace(/'/g, '')),
    );
    const missing = [...used].filter((c) => !known.has(c));
    expect(missing).toEqual([]);
  });
});
