import { readFileSync } from 'node:fs';
import path from 'node:path';
import { allErrorAreas, firstPartyPluginErrors, renderAllDocs } from '../../src/docs/render-docs';
import { execFileSync } from 'node:child_process';
import { ERROR_AREAS } from '../../src/cli/error-catalogue';
import { ENV_VARS } from '../../src/runtime/env-overrides';
import { DAEMON_CHILD_ENV } from '../../src/cli/commands/start';

const ROOT = path.resolve(__dirname, '..', '..', '..');

describe('generated docs', () => {
  it.each(Object.entries(renderAllDocs()))('%s matches the code (run `npm run docs` when this fails)', (file, expected) => {
    expect(readFileSync(path.join(ROOT, file), 'utf8')).toBe(expected);
  });

  it('lists every error code exactly once across areas (core and first-party plugins)', () => {
    const codes = allErrorAreas().flatMap((a) => Object.keys(a.codes));
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^BIFRO_[A-Z0-9_]+$/);
  });

  it('lists the codes the first-party plugins declare, e.g. the level storage', () => {
    const level = firstPartyPluginErrors().find((a) => a.plugin === '@bifro/plugin-storage-level');
    expect(Object.keys(level?.codes ?? {})).toContain('BIFRO_STORAGE_LOCKED');
    expect(ERROR_AREAS.some((a) => 'BIFRO_STORAGE_LOCKED' in a.codes)).toBe(false); // not core's any more
  });

  it('every code named in core and plugin sources is in the catalogue', () => {
    const known = new Set([...allErrorAreas().flatMap((a) => Object.keys(a.codes)), ...Object.keys(ENV_VARS), DAEMON_CHILD_ENV]);
    const missing = [...codesIn('core/src', 'plugins/*/src')].filter((c) => !known.has(c));
    expect(missing).toEqual([]);
  });

  it("a plugin's sources name only core's codes and the codes the plugin declares", () => {
    const core = new Set(ERROR_AREAS.flatMap((a) => Object.keys(a.codes)));
    const areas = firstPartyPluginErrors();
    const problems: string[] = [];
    for (const area of areas) {
      const folder = path.relative(ROOT, area.dir);
      for (const code of codesIn(`${folder}/src`)) if (!core.has(code) && !(code in area.codes)) problems.push(`${folder}: ${code}`);
    }
    expect(problems).toEqual([]);
  });
});

/** The quoted `'BIFRO_...'` codes in the tracked files under `paths`. */
function codesIn(...paths: string[]): Set<string> {
  let out: string;
  try {
    out = execFileSync('git', ['grep', '-ohE', "'BIFRO_[A-Z0-9_]*[A-Z0-9]'", '--', ...paths], { cwd: ROOT, encoding: 'utf8' });
  } catch (err) {
    if ((err as { status?: number }).status === 1) return new Set(); // no match
    throw err;
  }
  return new Set(
    out
      .split('\n')
      .filter(Boolean)
      .map((s) => s.replace(/'/g, '')),
  );
}
