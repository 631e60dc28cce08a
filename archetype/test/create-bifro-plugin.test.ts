import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { PluginKind } from '@bifro/spi';
import { KINDS } from '../src/kinds';
import {
  ARCHETYPE,
  JEST,
  NODE_MODULES,
  ROOT,
  TSC,
  buildArchetype,
  cleanEnv,
  create,
  listFiles,
  readJson,
  run,
  type RunResult,
} from './helpers';

/**
 * End to end: the real bin (node archetype/bin/create-bifro-plugin.js) generates projects in a
 * temporary folder without a terminal; then every generated project builds and passes its own
 * tests, offline, over the repository's node_modules.
 */

interface GeneratedPackage {
  readonly name: string;
  readonly version: string;
  readonly description: string;
  readonly main: string;
  readonly types: string;
  readonly files: string[];
  readonly keywords: string[];
  readonly scripts: Record<string, string>;
  readonly bifro: { kinds: string[]; spi: string; main: string; description: string };
  readonly peerDependencies: Record<string, string>;
  readonly devDependencies: Record<string, string>;
  readonly dependencies?: Record<string, string>;
}

const SPI_VERSION = readJson<{ version: string }>(path.join(ROOT, 'spi', 'package.json')).version;
/** Where a project generated from this clone gets @bifro/spi. */
const SPI_TARBALL = `vendor/bifro-spi-${SPI_VERSION}.tgz`;
const ROOT_DEV = readJson<{ devDependencies: Record<string, string> }>(path.join(ROOT, 'package.json')).devDependencies;
const TOOLS = ['@types/jest', '@types/node', 'jest', 'ts-jest', 'typescript'] as const;

/** The projects generated in `beforeAll`: one per kind, and one with auth and acl. */
interface Project {
  readonly label: string;
  readonly dir: string;
  readonly kinds: readonly PluginKind[];
  readonly name: string;
  readonly description: string;
  readonly args: readonly string[];
  result?: RunResult;
}

let work: string;
const projects: Project[] = [];

const MULTI: Omit<Project, 'dir'> = {
  label: 'auth+acl',
  kinds: ['auth', 'acl'],
  name: '@acme/bifro-auth-acl',
  description: 'Users and protected topics of "Acme" */ inc.',
  // Every answer as a flag, no --yes: runs without a terminal.
  args: ['--kind', 'auth', '--kind=acl', '--name', '@acme/bifro-auth-acl', '--description', 'Users and protected topics of "Acme" */ inc.'],
};

beforeAll(async () => {
  buildArchetype();
  work = mkdtempSync(path.join(os.tmpdir(), 'create-bifro-plugin-'));
  for (const kind of KINDS) {
    projects.push({
      label: kind,
      dir: path.join(work, `my-${kind}`),
      kinds: [kind],
      name: `bifro-plugin-my-${kind}`,
      description: `A Bifro ${kind} plugin`,
      args: ['--kind', kind, '--yes'],
    });
  }
  projects.push({ ...MULTI, dir: path.join(work, 'auth-acl') });
  await Promise.all(
    projects.map(async (p) => {
      p.result = await create([path.basename(p.dir), ...p.args], work);
    }),
  );
}, 120_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

const project = (label: string): Project => {
  const p = projects.find((x) => x.label === label);
  if (p === undefined) throw new Error(`no project ${label}`);
  return p;
};

describe('generating a project without a terminal', () => {
  it.each([...KINDS, 'auth+acl'])('%s: exits 0 and prints the files and the next steps', (label) => {
    const p = project(label);
    expect(p.result?.stderr).toBe('');
    expect(p.result?.code).toBe(0);
    const out = p.result?.stdout ?? '';
    expect(out).toContain(`Created ${p.name} (${p.kinds.join(', ')}) in ${path.basename(p.dir)}:`);
    for (const kind of p.kinds) expect(out).toContain(`  src/${kind}.ts\n`);
    expect(out).toContain(`cd ${path.basename(p.dir)} && npm install && npm test && npm run build && npm run pack`);
    // The install command names the tarball npm run pack writes, by a path that works from anywhere.
    const tarball = `${p.name.replace(/^@/, '').replace('/', '-')}-0.1.0.tgz`;
    expect(out).toContain(`  npx bifro plugin install ${path.join(p.dir, tarball)}\n`);
    // Run from this clone, the SPI comes from it, and the output says so.
    expect(out).toContain(`  ${SPI_TARBALL}\n`);
    expect(out).toContain(`@bifro/spi ${SPI_VERSION} comes from ${path.join(ROOT, 'spi')} (not from a registry)`);
  });

  it('auth: prints the demo login, as it is typed (no tenant/user form), and the README has it', () => {
    const p = project('auth');
    expect(p.result?.stdout).toContain('user name "demo" (the login, as is), password\n"demo-secret", in tenant "demo"');
    const readme = readFileSync(path.join(p.dir, 'README.md'), 'utf8');
    expect(readme).toContain('| `demo` | `demo-secret` | `demo` |');
    expect(project('events').result?.stdout).not.toContain('demo-secret');
  });

  it.each([...KINDS, 'auth+acl'])('%s: writes the common files and those of its kinds only', (label) => {
    const p = project(label);
    const expected = [
      '.gitignore',
      'README.md',
      'jest.config.js',
      'package.json',
      'src/errors.ts',
      'src/index.ts',
      'src/options.ts',
      'test/plugin.test.ts',
      'tsconfig.build.json',
      'tsconfig.json',
      SPI_TARBALL,
      ...p.kinds.flatMap((k) => [`src/${k}.ts`, `test/${k}.test.ts`]),
    ].sort();
    expect(listFiles(p.dir)).toEqual(expected);
    const gitignore = readFileSync(path.join(p.dir, '.gitignore'), 'utf8');
    expect(gitignore).toMatch(/^node_modules\/$/m);
    // *.tgz (npm run pack's output) is ignored, the SPI the devDependency names is not.
    expect(gitignore).toMatch(/^\*\.tgz$/m);
    expect(gitignore).toContain(`\n!${SPI_TARBALL}\n`);
    for (const file of expected.filter((f) => !f.endsWith('.tgz'))) {
      const text = readFileSync(path.join(p.dir, file), 'utf8');
      expect({ file, unrendered: /\{\{|\}\}/.test(text) }).toEqual({ file, unrendered: false });
    }
  });

  it.each([...KINDS, 'auth+acl'])('%s: package.json is the manifest of a plugin for those kinds over the current SPI', (label) => {
    const p = project(label);
    const text = readFileSync(path.join(p.dir, 'package.json'), 'utf8');
    const pkg = JSON.parse(text) as GeneratedPackage;
    expect(text).toBe(`${JSON.stringify(pkg, null, 2)}\n`); // npm's own layout
    const range = `^${SPI_VERSION}`;
    expect(pkg).toEqual({
      name: p.name,
      version: '0.1.0',
      description: p.description,
      main: 'dist/index.js',
      types: 'dist/index.d.ts',
      files: ['dist'],
      keywords: ['bifro-plugin', ...p.kinds.map((k) => `bifro-${k}`)],
      scripts: {
        build: 'tsc -p tsconfig.build.json',
        typecheck: 'tsc -p tsconfig.json',
        test: 'jest',
        pack: 'npm pack',
        prepublishOnly: 'npm run build',
      },
      bifro: { kinds: [...p.kinds], spi: range, main: 'dist/index.js', description: p.description },
      peerDependencies: { '@bifro/spi': range },
      // From this clone: the SPI packed into the project, so that npm install needs no registry for it.
      devDependencies: { '@bifro/spi': `file:${SPI_TARBALL}`, ...Object.fromEntries(TOOLS.map((t) => [t, ROOT_DEV[t]])) },
    });
  });

  it('packs the SPI of this clone into vendor/, as npm publishes it (package.json and dist/)', async () => {
    const tar = await run('tar', ['-tzf', path.join(project('auth').dir, SPI_TARBALL)], { cwd: work });
    expect(tar.code).toBe(0);
    const files = tar.stdout.split('\n').filter((f) => f !== '');
    expect(files).toEqual(expect.arrayContaining(['package/package.json', 'package/dist/index.js', 'package/dist/testing/index.js']));
    expect(files.filter((f) => !/^package\/(dist\/|package\.json$|CHANGELOG\.md$|README\.md$)/.test(f))).toEqual([]);
  });

  it.each([...KINDS, 'auth+acl'])('%s: src/index.ts defines the plugin with a factory per kind; the README configures it', (label) => {
    const p = project(label);
    const index = readFileSync(path.join(p.dir, 'src', 'index.ts'), 'utf8');
    expect(index).toContain('export default definePlugin({');
    expect(index).toContain('  errors: ERRORS,');
    for (const kind of KINDS) {
      const factory = `create${kind[0].toUpperCase()}${kind.slice(1)}`;
      expect({ kind, defined: index.includes(`  ${kind}: ${factory},`) }).toEqual({ kind, defined: p.kinds.includes(kind) });
    }
    const readme = readFileSync(path.join(p.dir, 'README.md'), 'utf8');
    expect(readme).toContain(`# ${p.name}`);
    expect(readme).toContain('bifro plugin install');
    expect(readme).toContain('npm run build');
    for (const kind of p.kinds) {
      const list = kind === 'auth' || kind === 'acl' || kind === 'events';
      expect(readme).toContain(list ? `  ${kind}:\n    - use: '${p.name}'` : `  ${kind}:\n    use: '${p.name}'`);
    }
  });

  it('names the error codes after the package, never with the broker prefix BIFRO_', () => {
    expect(readFileSync(path.join(project('auth+acl').dir, 'src', 'errors.ts'), 'utf8')).toContain('  ACME_AUTH_ACL_OPTIONS_INVALID: {');
    expect(readFileSync(path.join(project('auth').dir, 'src', 'errors.ts'), 'utf8')).toContain('  MY_AUTH_OPTIONS_INVALID: {');
  });
});

describe('the generated projects, offline over the repository node_modules', () => {
  beforeAll(() => {
    for (const p of projects) {
      if (!existsSync(path.join(p.dir, 'node_modules'))) symlinkSync(NODE_MODULES, path.join(p.dir, 'node_modules'), 'dir');
    }
  });

  it('build with tsc (tsconfig.build.json → dist/) and type-check sources and tests (tsconfig.json)', async () => {
    const [build, typecheck] = await Promise.all(
      ['tsconfig.build.json', 'tsconfig.json'].map((config) =>
        run(process.execPath, [TSC, '-b', ...projects.map((p) => path.join(p.dir, config))], { cwd: work, timeoutMs: 110_000 }),
      ),
    );
    expect(build.stdout + build.stderr).toBe('');
    expect(build.code).toBe(0);
    expect(typecheck.stdout + typecheck.stderr).toBe('');
    expect(typecheck.code).toBe(0);
    for (const p of projects) {
      for (const file of ['index.js', 'index.d.ts', ...p.kinds.map((k) => `${k}.js`)]) {
        expect(existsSync(path.join(p.dir, 'dist', file))).toBe(true);
      }
    }
  }, 120_000);

  it('pass their own tests: the conformance kit of each kind, and the examples', async () => {
    const report = path.join(work, 'jest-report.json');
    const result = await run(
      process.execPath,
      [JEST, '--ci', '--watchman=false', '--maxWorkers=2', '--json', `--outputFile=${report}`, '--projects', ...projects.map((p) => p.dir)],
      { cwd: work, timeoutMs: 110_000 },
    );
    const summary = readJson<{
      success: boolean;
      numFailedTests: number;
      numPassedTests: number;
      testResults: Array<{ name: string; status: string; message: string }>;
    }>(report);
    const failures = summary.testResults.filter((r) => r.status !== 'passed').map((r) => `${r.name}\n${r.message}`);
    expect(failures).toEqual([]);
    expect(result.code).toBe(0);
    expect(summary.numFailedTests).toBe(0);
    const ran = summary.testResults.map((r) => path.relative(work, r.name).split(path.sep).join('/')).sort();
    const expected = projects.flatMap((p) => [...p.kinds, 'plugin'].map((t) => `${path.basename(p.dir)}/test/${t}.test.ts`)).sort();
    expect(ran).toEqual(expected);
    // The storage kit alone has well over a hundred cases.
    expect(summary.numPassedTests).toBeGreaterThan(300);
  }, 120_000);

  it('load as the broker loads them: the built module exports a factory for each declared kind', () => {
    for (const p of projects) {
      const pkg = readJson<GeneratedPackage>(path.join(p.dir, 'package.json'));
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const mod = require(path.join(p.dir, pkg.bifro.main)) as { default: Record<string, unknown> };
      for (const kind of pkg.bifro.kinds) expect({ kind, type: typeof mod.default[kind] }).toEqual({ kind, type: 'function' });
      expect(Object.keys(mod.default).sort()).toEqual([...pkg.bifro.kinds, 'errors'].sort());
    }
  });

  it('run their npm scripts, and pack only dist/, package.json and README.md', async () => {
    const p = project('auth+acl');
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const env = cleanEnv();
    const build = await run(npm, ['run', 'build'], { cwd: p.dir, env });
    expect(build.code).toBe(0);
    const pack = await run(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: p.dir, env });
    expect(pack.code).toBe(0);
    const [packed] = JSON.parse(pack.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
    expect(packed.filename).toBe('acme-bifro-auth-acl-0.1.0.tgz');
    const files = packed.files.map((f) => f.path);
    expect(files.filter((f) => !f.startsWith('dist/')).sort()).toEqual(['README.md', 'package.json']);
    expect(files).toContain('dist/index.js');
  }, 60_000);
});

describe('bad input', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(work, 'bad-'));
  });

  it('refuses an unknown kind, listing the valid kinds (exit 2)', async () => {
    const r = await create(['x', '--kind', 'auth,authz', '--yes'], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown kind "authz": valid kinds are auth, acl, balancer, events, settings, throttler, storage');
    expect(existsSync(path.join(dir, 'x'))).toBe(false);
  });

  it('refuses a directory that is not empty (exit 1, naming it), and writes into it with --force', async () => {
    const target = path.join(dir, 'taken');
    mkdirSync(target);
    writeFileSync(path.join(target, 'notes.txt'), 'mine');
    const refused = await create(['taken', '--kind', 'throttler', '--yes'], dir);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`directory ${target} exists and is not empty`);
    expect(refused.stderr).toContain('--force');
    expect(listFiles(target)).toEqual(['notes.txt']);

    const forced = await create(['taken', '--kind', 'throttler', '--yes', '--force'], dir);
    expect(forced.stderr).toBe('');
    expect(forced.code).toBe(0);
    expect(listFiles(target)).toEqual(expect.arrayContaining(['notes.txt', 'package.json', 'src/throttler.ts']));
    expect(readFileSync(path.join(target, 'notes.txt'), 'utf8')).toBe('mine');
  });

  it('refuses a target that is a file (exit 1)', async () => {
    writeFileSync(path.join(dir, 'a-file'), '');
    const r = await create(['a-file', '--kind', 'auth', '--yes'], dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('exists and is not a directory');
  });

  it('without a terminal and without --yes, names every missing flag (exit 2)', async () => {
    const none = await create(['p1'], dir);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('missing --name, --kind, --description');
    expect(none.stderr).toContain('--yes');
    const some = await create(['p2', '--kind', 'auth', '--name', 'bifro-plugin-p2'], dir);
    expect(some.code).toBe(2);
    expect(some.stderr).toMatch(/missing --description \(/);
    const noDir = await create(['--kind', 'auth', '--yes'], dir);
    expect(noDir.code).toBe(2);
    expect(noDir.stderr).toContain('missing <dir>');
    expect(listFiles(dir).filter((f) => f.startsWith('p1/') || f.startsWith('p2/'))).toEqual([]);
  });

  it.each([
    { label: 'upper case', name: 'My-Plugin', why: 'lower case' },
    { label: 'leading dot', name: '.hidden', why: 'must not start with . or _' },
    { label: 'empty scoped name', name: '@acme/', why: 'may hold only' },
    { label: 'space', name: 'a b', why: 'may hold only' },
    { label: 'reserved', name: 'node_modules', why: 'reserved' },
    { label: '215 characters', name: 'x'.repeat(215), why: 'longer than 214' },
  ])('refuses an invalid package name: $label (exit 2)', async ({ name, why }) => {
    const r = await create(['named', '--kind', 'auth', '--name', name, '--yes'], dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`invalid package name ${JSON.stringify(name)} (--name)`);
    expect(r.stderr).toContain(why);
    expect(existsSync(path.join(dir, 'named'))).toBe(false);
  });

  it('refuses unknown options and a flag without its value (exit 2)', async () => {
    const unknown = await create(['p3', '--kinds', 'auth'], dir);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown option --kinds');
    const noValue = await create(['p3', '--yes', '--kind'], dir);
    expect(noValue.code).toBe(2);
    expect(noValue.stderr).toContain('--kind needs a value');
  });

  it('prints the usage with --help (exit 0)', async () => {
    const r = await create(['--help'], dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Usage: create-bifro-plugin <dir> [options]');
    expect(r.stdout).toContain('--kind <kinds>');
    expect(r.stdout).toContain(KINDS.join(', '));
  });
});

describe("npm's forwarding (npm create bifro-plugin <dir> --kind x --yes, without --)", () => {
  it('works through the real npm: npm init bifro-plugin <dir> --kind auth --kind acl --name ... --description ... --yes', async () => {
    const dir = mkdtempSync(path.join(work, 'npm-'));
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const target = path.join(dir, 'via-npm');
    // From the repository root, npm finds the create-bifro-plugin workspace; --offline: never the registry.
    const args = ['init', 'bifro-plugin', target, '--kind', 'auth', '--kind', 'acl', '--name', '@acme/via-npm'];
    const r = await run(npm, [...args, '--description', 'Made through npm', '--yes', '--offline'], { cwd: ROOT, env: cleanEnv() });
    expect(r.stderr).not.toMatch(/^error:/m);
    expect(r.code).toBe(0);
    const pkg = readJson<GeneratedPackage>(path.join(target, 'package.json'));
    expect({ name: pkg.name, kinds: pkg.bifro.kinds, description: pkg.description }).toEqual({
      name: '@acme/via-npm',
      kinds: ['auth', 'acl'],
      description: 'Made through npm',
    });
  }, 60_000);

  it('reads npm_config_kind, npm_config_name, npm_config_description and npm_config_yes', async () => {
    const dir = mkdtempSync(path.join(work, 'npm-'));
    const r = await create(['fwd'], dir, {
      npm_config_kind: 'settings\n\nthrottler',
      npm_config_name: '@acme/bifro-limits',
      npm_config_description: 'Limits of Acme',
      npm_config_yes: 'true',
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const pkg = readJson<GeneratedPackage>(path.join(dir, 'fwd', 'package.json'));
    expect(pkg.name).toBe('@acme/bifro-limits');
    expect(pkg.bifro).toEqual({
      kinds: ['settings', 'throttler'],
      spi: `^${SPI_VERSION}`,
      main: 'dist/index.js',
      description: 'Limits of Acme',
    });
  });

  it('lets flags win over the forwarded values, and takes the defaults with npm_config_yes alone', async () => {
    const dir = mkdtempSync(path.join(work, 'npm-'));
    const r = await create(['flags', '--kind', 'events', '--name', 'bifro-events-x'], dir, {
      npm_config_kind: 'storage',
      npm_config_yes: 'true',
    });
    expect(r.code).toBe(0);
    const pkg = readJson<GeneratedPackage>(path.join(dir, 'flags', 'package.json'));
    expect(pkg.name).toBe('bifro-events-x');
    expect(pkg.bifro.kinds).toEqual(['events']);
    expect(pkg.description).toBe('A Bifro events plugin');

    const defaults = await create(['Some Dir'], dir, { npm_config_yes: 'true' });
    expect(defaults.code).toBe(0);
    const def = readJson<GeneratedPackage>(path.join(dir, 'Some Dir', 'package.json'));
    expect(def.name).toBe('bifro-plugin-some-dir');
    expect(def.bifro.kinds).toEqual(['auth']);
    expect(defaults.stdout).toContain('cd "Some Dir" && npm install');
  });
});

describe('the create-bifro-plugin package', () => {
  it('publishes its bin, dist and every template (the .gitignore template under another name)', async () => {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const pack = await run(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ARCHETYPE, env: cleanEnv() });
    expect(pack.code).toBe(0);
    const [packed] = JSON.parse(pack.stdout) as Array<{ files: Array<{ path: string }> }>;
    const files = packed.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining(['bin/create-bifro-plugin.js', 'dist/cli.js', 'templates/common/gitignore.hbs', 'package.json']),
    );
    for (const kind of KINDS)
      expect(files).toEqual(expect.arrayContaining([`templates/${kind}/src/${kind}.ts.hbs`, `templates/${kind}/test/${kind}.test.ts.hbs`]));
    expect(files.filter((f) => !/^(bin|dist|templates)\//.test(f)).sort()).toEqual(['CHANGELOG.md', 'README.md', 'package.json']);
  }, 30_000);
});
