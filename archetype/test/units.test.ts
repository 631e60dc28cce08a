import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PLUGIN_KINDS } from '@bifro/spi';
import { parseArgs } from '../src/args';
import { CliError } from '../src/cli-error';
import { HELPERS, plannedFiles, templateData } from '../src/generator';
import { KIND_INFO, KINDS, parseKinds } from '../src/kinds';
import { defaultPackageName, errorCodePrefix, packageNameProblem } from '../src/names';
import { checkVendorable, isSourceCheckout, spiDependency } from '../src/spi-source';
import { TOOLCHAIN, spiVersion } from '../src/versions';

const ROOT = path.resolve(__dirname, '..', '..');
const json = <T>(file: string): T => JSON.parse(readFileSync(path.join(ROOT, file), 'utf8')) as T;

describe('versions', () => {
  it('develops generated projects with the tool versions of the repository', () => {
    const { devDependencies } = json<{ devDependencies: Record<string, string> }>('package.json');
    for (const [tool, version] of Object.entries(TOOLCHAIN)) expect({ tool, version }).toEqual({ tool, version: devDependencies[tool] });
  });

  it('reads the version of the @bifro/spi package it depends on', () => {
    expect(spiVersion()).toBe(json<{ version: string }>('spi/package.json').version);
    expect(json<{ dependencies: Record<string, string> }>('archetype/package.json').dependencies['@bifro/spi']).toBe(spiVersion());
  });
});

describe('kinds', () => {
  it('knows every kind of the SPI, in its order', () => {
    expect(KINDS).toEqual(PLUGIN_KINDS);
    expect(Object.keys(KIND_INFO).sort()).toEqual([...PLUGIN_KINDS].sort());
  });

  it('parses repeated and comma-separated --kind values into SPI order without repeats', () => {
    expect(parseKinds(['acl,auth', 'auth', ' storage '])).toEqual(['auth', 'acl', 'storage']);
    expect(parseKinds(['Events'])).toEqual(['events']);
    expect(() => parseKinds(['auth,nope'])).toThrow(
      'unknown kind "nope": valid kinds are auth, acl, balancer, events, settings, throttler, storage',
    );
  });
});

describe('package names', () => {
  it.each(['bifro-plugin-x', '@acme/bifro-auth-ldap', 'a', 'x.y_z~1', '@a-b/c.d'])('accepts %s', (name) => {
    expect(packageNameProblem(name)).toBeUndefined();
  });

  it.each(['', 'Upper', ' x', '_x', '.x', '@acme', '@acme/', 'a/b', 'a b', 'é', 'node_modules', 'x'.repeat(215), '@/x'])(
    'refuses %j',
    (name) => {
      expect(packageNameProblem(name)).toEqual(expect.any(String));
    },
  );

  it('proposes a name from the directory', () => {
    expect(defaultPackageName('my-auth')).toBe('bifro-plugin-my-auth');
    expect(defaultPackageName('/tmp/x/bifro-auth-ldap')).toBe('bifro-auth-ldap');
    expect(defaultPackageName('Some Dir!')).toBe('bifro-plugin-some-dir');
    expect(defaultPackageName('___')).toBe('bifro-plugin-plugin');
    for (const dir of ['my-auth', 'Some Dir!', '.hidden', 'ÄÖÜ']) expect(packageNameProblem(defaultPackageName(dir))).toBeUndefined();
  });

  it('derives error code prefixes of the plugin own, never BIFRO_', () => {
    expect(errorCodePrefix('@acme/bifro-auth-ldap')).toBe('ACME_AUTH_LDAP');
    expect(errorCodePrefix('bifro-plugin-my-auth')).toBe('MY_AUTH');
    expect(errorCodePrefix('@bifro/plugin-x')).toBe('PLUGIN_X');
    expect(errorCodePrefix('bifro')).toBe('PLUGIN');
    expect(errorCodePrefix('1st.plugin')).toBe('P1ST_PLUGIN');
    for (const name of ['@acme/bifro-auth-ldap', 'bifro-plugin-my-auth', 'bifro-bifro-x', '@bifro/bifro', 'x~']) {
      expect(`${errorCodePrefix(name)}_OPTIONS_INVALID`).toMatch(/^(?!BIFRO_)[A-Z][A-Z0-9_]*[A-Z0-9]$/);
    }
  });
});

describe('arguments', () => {
  it('reads flags in their long, short and = forms', () => {
    expect(parseArgs(['d', '-k', 'auth', '--kind=acl', '-n', '@a/b', '--description=x y', '-y', '-f'])).toEqual({
      dir: 'd',
      kinds: ['auth', 'acl'],
      name: '@a/b',
      description: 'x y',
      yes: true,
      force: true,
      help: false,
      version: false,
    });
  });

  it("falls back to npm's npm_config_* variables, flags first", () => {
    const env = { npm_config_kind: 'storage', npm_config_name: 'n', npm_config_description: 'd', npm_config_yes: 'true' };
    expect(parseArgs(['d'], env)).toMatchObject({ kinds: ['storage'], name: 'n', description: 'd', yes: true });
    expect(parseArgs(['d', '--kind', 'auth', '--name', 'm'], env)).toMatchObject({ kinds: ['auth'], name: 'm' });
    expect(parseArgs(['d'], { npm_config_yes: '' })).toMatchObject({ yes: false });
    expect(parseArgs(['d'], { npm_config_name: 'true', npm_config_description: 'true' })).toMatchObject({
      name: undefined,
      description: undefined,
    });
  });

  // What npm 11 hands over for `npm create bifro-plugin <args>` without `--`: it takes `--kind x`
  // for a boolean (npm_config_kind=true, x left as an argument) and `--description` for its own
  // boolean (the text left as an argument); `--kind=x`, `--name x` and `--yes` arrive as values.
  it.each([
    { argv: ['my-x', 'auth'], kind: 'true', want: { dir: 'my-x', kinds: ['auth'] } },
    { argv: ['auth', 'my-x'], kind: 'true', want: { dir: 'my-x', kinds: ['auth'] } },
    { argv: ['auth', 'auth'], kind: 'true', want: { dir: 'auth', kinds: ['auth'] } },
    { argv: ['my-x', 'auth', 'acl,events'], kind: 'true\n\ntrue', want: { dir: 'my-x', kinds: ['auth', 'acl,events'] } },
    { argv: ['my-x', 'auth', 'My thing'], kind: 'true', want: { dir: 'my-x', kinds: ['auth'], description: 'My thing' } },
    { argv: ['my-x', 'Thing'], kind: 'acl,auth', want: { dir: 'my-x', kinds: ['acl,auth'], description: 'Thing' } },
  ])("reads npm's forwarding of $argv with npm_config_kind=$kind", ({ argv, kind, want }) => {
    expect(parseArgs(argv, { npm_command: 'init', npm_config_kind: kind, npm_config_yes: 'true' })).toMatchObject({ ...want, yes: true });
  });

  it('asks for -- when npm leaves more arguments than it can place', () => {
    expect(() => parseArgs(['a', 'b', 'c'], { npm_command: 'init' })).toThrow('put the options after --');
    expect(() => parseArgs(['a', 'b'])).toThrow('one target directory expected, got "a", "b"');
  });

  it('refuses unknown flags, missing values and two directories with usage errors', () => {
    for (const argv of [['--nope'], ['d', '--name'], ['a', 'b'], ['--yes=maybe']]) {
      expect(() => parseArgs(argv)).toThrow(CliError);
      try {
        parseArgs(argv);
      } catch (err) {
        expect((err as CliError).exitCode).toBe(2);
      }
    }
  });
});

describe('templates', () => {
  it('plans the common files and those of the chosen kinds', () => {
    expect(plannedFiles(['storage'])).toEqual([
      '.gitignore',
      'README.md',
      'jest.config.js',
      'package.json',
      'src/errors.ts',
      'src/index.ts',
      'src/options.ts',
      'src/storage.ts',
      'test/plugin.test.ts',
      'test/storage.test.ts',
      'tsconfig.build.json',
      'tsconfig.json',
    ]);
  });

  it('have helpers for JSON, TypeScript strings, comments and kinds', () => {
    expect(HELPERS.json(['a', 'b'])).toBe('["a", "b"]');
    expect(HELPERS.json(['a', 'b'], 2)).toBe('[\n    "a",\n    "b"\n  ]');
    expect(HELPERS.json('say "hi"')).toBe('"say \\"hi\\""');
    expect(HELPERS.tsString(`it's "x"\n`)).toBe(`'it\\'s "x"\\n'`);
    expect(HELPERS.docText('a */ b')).toBe('a *\\/ b');
    const options = { data: { root: { kinds: ['auth', 'acl'] } } };
    expect(HELPERS.hasKind('acl', options)).toBe(true);
    expect(HELPERS.hasKind('storage', options)).toBe(false);
    expect(HELPERS.kindList(options)).toBe('auth and acl');
    expect(HELPERS.factory('throttler')).toBe('createThrottler');
    expect(() => HELPERS.factory('nope')).toThrow(/not a kind/);
  });

  it('render from answers plus the SPI range, the error prefix and the tarball name', () => {
    const data = templateData({ directory: '/tmp/x', name: '@acme/bifro-x', kinds: ['auth'], description: 'd' });
    expect(data).toMatchObject({
      spiRange: `^${spiVersion()}`,
      errorPrefix: 'ACME_X',
      tarball: 'acme-bifro-x-0.1.0.tgz',
      version: '0.1.0',
    });
    // This test runs in a clone: its @bifro/spi is the spi/ workspace, which no registry holds.
    expect(data.devDependencies).toEqual({ '@bifro/spi': `file:vendor/bifro-spi-${spiVersion()}.tgz`, ...TOOLCHAIN });
    expect(data.spiTarball).toBe(`vendor/bifro-spi-${spiVersion()}.tgz`);
    const fromRegistry = templateData(
      { directory: '/tmp/x', name: 'bifro-x', kinds: ['auth'], description: 'd' },
      { from: 'registry', spec: `^${spiVersion()}` },
    );
    expect(fromRegistry.devDependencies['@bifro/spi']).toBe(`^${spiVersion()}`);
    expect(fromRegistry.spiTarball).toBeUndefined();
  });
});

describe('where the SPI of a generated project comes from', () => {
  let tmp: string;
  beforeAll(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'spi-source-'));
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('a registry when the generator runs installed (its @bifro/spi under a node_modules), the range', () => {
    const installed = path.join(tmp, 'npx', 'node_modules', '@bifro', 'spi');
    mkdirSync(installed, { recursive: true });
    expect(isSourceCheckout(installed)).toBe(false);
    expect(spiDependency('1.6.0', installed)).toEqual({ from: 'registry', spec: '^1.6.0' });
  });

  it('the clone when it runs from one (its @bifro/spi a workspace, also through the node_modules link): a vendored tarball', () => {
    expect(isSourceCheckout(path.join(ROOT, 'spi'))).toBe(true);
    // The repository's node_modules/@bifro/spi is a link to spi/: what counts is where it leads.
    expect(isSourceCheckout(path.join(ROOT, 'node_modules', '@bifro', 'spi'))).toBe(true);
    expect(spiDependency('1.6.0', path.join(ROOT, 'spi'))).toEqual({
      from: 'vendored',
      spec: 'file:vendor/bifro-spi-1.6.0.tgz',
      tarball: 'vendor/bifro-spi-1.6.0.tgz',
      sourceDir: path.join(ROOT, 'spi'),
    });
    expect(() => checkVendorable(spiDependency('1.6.0', path.join(ROOT, 'spi')))).not.toThrow();
  });

  it('refuses to vendor a checkout that is not built, before anything is written', () => {
    const unbuilt = path.join(tmp, 'clone', 'spi');
    mkdirSync(unbuilt, { recursive: true });
    const dep = spiDependency('1.6.0', unbuilt);
    expect(dep.from).toBe('vendored');
    expect(() => checkVendorable(dep)).toThrow(`${unbuilt} is not built (no dist/index.js)`);
  });
});
