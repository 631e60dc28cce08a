import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { connectAsync, tryConnect, uniqueName, waitUntil, withClients, type ConnectResult } from '../support/mqtt-helpers';
import { FIXTURE_PLUGINS, REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * The examples of docs/spi/*.md work as written: each kind page's `## Example` (the plugin's
 * `src/index.ts` and its conformance test) is type-checked against the SPI as a plugin author's
 * project would be, the test is run with the kit it calls, and the auth and ACL examples are
 * loaded into a real broker together and used by MQTT clients. A doc edit that breaks an example
 * fails here.
 */

jest.setTimeout(60000);

const KINDS = ['auth', 'acl', 'balancer', 'events', 'settings', 'throttler', 'storage'] as const;
type Kind = (typeof KINDS)[number];

interface Example {
  readonly plugin: string;
  readonly test: string;
}

/** The ```ts blocks of the page's `## Example` section: the first is the plugin, the first calling registerConformance its test. */
function exampleOf(kind: Kind): Example {
  const md = readFileSync(path.join(REPO, 'docs', 'spi', `${kind}.md`), 'utf8');
  const start = md.indexOf('\n## Example');
  expect(start).toBeGreaterThan(0);
  const next = md.indexOf('\n## ', start + 1);
  const section = md.slice(start, next < 0 ? undefined : next);
  const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const test = blocks.find((b) => b.includes('registerConformance'));
  expect(blocks.length).toBeGreaterThanOrEqual(2);
  expect(test).toBeDefined();
  return { plugin: blocks[0]!, test: test! };
}

const examples = new Map(KINDS.map((k) => [k, exampleOf(k)]));
let work: string;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-doc-examples-'));
  for (const [kind, ex] of examples) {
    mkdirSync(path.join(work, kind, 'src'), { recursive: true });
    mkdirSync(path.join(work, kind, 'test'), { recursive: true });
    writeFileSync(path.join(work, kind, 'src', 'index.ts'), ex.plugin);
    writeFileSync(path.join(work, kind, 'test', 'conformance.test.ts'), ex.test);
  }
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('docs/spi examples', () => {
  it('type-check as a plugin project would (strict, against @bifro/spi and @bifro/spi/testing)', () => {
    const files = KINDS.flatMap((k) => [path.join(work, k, 'src', 'index.ts'), path.join(work, k, 'test', 'conformance.test.ts')]);
    const program = ts.createProgram(files, {
      strict: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.CommonJS,
      moduleResolution: ts.ModuleResolutionKind.Node10,
      esModuleInterop: true,
      skipLibCheck: true,
      noEmit: true,
      types: ['node', 'jest'],
      typeRoots: [path.join(REPO, 'node_modules', '@types')],
      baseUrl: work,
      paths: {
        '@bifro/spi': [path.join(REPO, 'spi', 'src', 'index.ts')],
        '@bifro/spi/testing': [path.join(REPO, 'spi', 'src', 'testing', 'index.ts')],
      },
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => d.file === undefined || d.file.fileName.startsWith(work));
    const text = ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => work,
      getNewLine: () => '\n',
    });
    expect(text).toBe('');
  });

  it.each(KINDS)('%s: the example test passes its conformance kit', async (kind) => {
    const cases = collectCases(kind);
    expect(cases.length).toBeGreaterThan(3);
    const failures: string[] = [];
    for (const c of cases) {
      await c.run().catch((err: unknown) => failures.push(`${c.name}: ${String(err)}`));
    }
    expect(failures).toEqual([]);
  });
});

describe('the auth and ACL examples in a real broker', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);
  const pluginsDir = (): string => path.join(work, 'plugins');

  beforeAll(async () => {
    installExample('auth', '@acme/bifro-auth-static');
    installExample('acl', '@acme/bifro-sys-acl');
    cpSync(path.join(FIXTURE_PLUGINS, 'acl-defers'), path.join(pluginsDir(), 'acl-defers'), { recursive: true });
    tb = await startTestBroker(
      [
        'plugins:',
        '  auth:',
        "    - use: '@acme/bifro-auth-static'",
        '      options:',
        '        users:',
        '          alice: { tenantId: acme, password: s3cret, attrs: { role: admin } }',
        '          bob: { tenantId: acme, password: hunter2 }',
        '  acl:',
        "    - use: '@acme/bifro-sys-acl'",
      ].join('\n'),
      { pluginsDir: pluginsDir() },
    );
  });

  afterAll(() => tb?.stop());

  it('the ACL example works alone: clients connect, sys/ is for admins only', async () => {
    const bob = clients.track(
      (await connectAsync(tb.port, { protocolVersion: 5, clientId: uniqueName('bob'), username: 'bob', password: 'hunter2' })).client,
    );
    const alice = clients.track(
      (await connectAsync(tb.port, { protocolVersion: 5, clientId: uniqueName('alice'), username: 'alice', password: 's3cret' })).client,
    );
    await expect(bob.publishAsync('sys/reboot', 'now', { qos: 1 })).rejects.toThrow(/135|Not authorized/i);
    await expect(bob.publishAsync('bob/temp', '21', { qos: 1 })).resolves.toBeDefined();
    await expect(alice.publishAsync('sys/reboot', 'now', { qos: 1 })).resolves.toBeDefined();
  });

  it('the auth example refuses a wrong password and defers (so refuses) an unknown user', async () => {
    const wrong = await tryConnect(tb.port, { protocolVersion: 5, clientId: uniqueName('w'), username: 'bob', password: 'nope' });
    clients.track(wrong.client);
    expect(codeOf(wrong)).toBe(0x86);
    const unknown = await tryConnect(tb.port, { protocolVersion: 5, clientId: uniqueName('u'), username: 'mallory', password: 'x' });
    clients.track(unknown.client);
    expect(codeOf(unknown)).toBeGreaterThanOrEqual(0x80);
  });

  it('an ACL chain that only defers refuses CONNECT and says so in the log, with who was refused', async () => {
    const deferring = await startTestBroker(
      [
        'plugins:',
        '  auth:',
        "    - use: '@acme/bifro-auth-static'",
        '      options: { users: { carol: { tenantId: acme, password: pw } } }',
        '  acl:',
        "    - use: '@fixtures/acl-defers'",
      ].join('\n'),
      { pluginsDir: pluginsDir() },
    );
    try {
      const clientId = uniqueName('carol');
      const refused = await tryConnect(deferring.port, { protocolVersion: 5, clientId, username: 'carol', password: 'pw' });
      clients.track(refused.client);
      expect(codeOf(refused)).toBe(0x87);
      const line = (): Record<string, unknown> | undefined =>
        deferring.logs.find((l) => l.clientId === clientId && String(l.msg).startsWith('connect denied by access control'));
      expect(await waitUntil(() => line() !== undefined)).toBe(true);
      expect(line()).toMatchObject({
        level: 30,
        tenantId: 'acme',
        userId: 'carol',
        clientId,
        remoteAddress: expect.stringContaining('127.0.0.1'),
      });
      expect(String(line()!.msg)).toContain('every ACL plugin deferred');
    } finally {
      await deferring.stop();
    }
  });

  /** The example's plugin transpiled to CommonJS in a plugin folder with the manifest docs/plugin-authoring.md shows. */
  function installExample(kind: Kind, name: string): void {
    const dir = path.join(pluginsDir(), name.replace('/', '__'));
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'index.js'), transpile(examples.get(kind)!.plugin));
    writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({
        name,
        version: '1.0.0',
        main: 'index.js',
        bifro: { kinds: [kind], spi: '^1.0.0' },
        peerDependencies: { '@bifro/spi': '^1.0.0' },
      }),
    );
  }
});

/** The CONNACK reason code of a connect attempt (MQTT.js reports a refusal as an error with the code). */
function codeOf(r: ConnectResult): number | undefined {
  return r.connack?.reasonCode ?? r.error?.code;
}

function transpile(source: string): string {
  return ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  }).outputText;
}

/** Evaluates a CommonJS module's code with a `require` that maps `../src` to the example plugin. */
function evaluate(code: string, requireFn: (id: string) => unknown, globals: Record<string, unknown> = {}): Record<string, unknown> {
  const module = { exports: {} as Record<string, unknown> };
  const names = Object.keys(globals);
  const run = new Function('require', 'module', 'exports', ...names, code) as (...args: unknown[]) => void;
  run(requireFn, module, module.exports, ...names.map((n) => globals[n]));
  return module.exports;
}

/** The cases the example's test registers with `describe`/`it`, ready to run. */
function collectCases(kind: Kind): { name: string; run: () => Promise<void> }[] {
  const ex = examples.get(kind)!;
  // `require` of the evaluated code is Jest's: @bifro/spi maps to this repository's SPI.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the doc's imports, resolved at run time
  const plugin = evaluate(transpile(ex.plugin), (id) => require(id));
  const cases: { name: string; run: () => Promise<void> }[] = [];
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the doc's imports, resolved at run time
  evaluate(transpile(ex.test), (id) => (id === '../src' ? plugin : require(id)), {
    describe: (_name: string, body: () => void) => body(),
    it: (name: string, fn: () => Promise<void>) => cases.push({ name, run: fn }),
  });
  return cases;
}
