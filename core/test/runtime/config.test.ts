import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BifroError } from '../../src/base/errors';
import { ConfigError, DEFAULT_SECURITY, defaultNodeId, formatKeyPath, loadConfig, type LoadConfigOptions } from '../../src/runtime/config';
import { CONFIG_ERRORS, type ConfigIssue } from '../../src/runtime/config-errors';

const REPO = path.resolve(__dirname, '..', '..', '..');

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-config-'));
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

/** Writes `text` to `<tmp>/<rel>` and returns the absolute path. */
function write(rel: string, text: string): string {
  const file = path.join(tmp, rel);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
}

async function failure(opts: LoadConfigOptions): Promise<ConfigError> {
  try {
    await loadConfig(opts);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).toBeInstanceOf(BifroError);
    return err as ConfigError;
  }
  throw new Error('loadConfig succeeded where it should have failed');
}

function issue(err: ConfigError, code: ConfigIssue['code'], keyPath: string): ConfigIssue {
  const found = err.issues.find((i) => i.code === code && i.path === keyPath);
  if (!found) throw new Error(`no ${code} at ${keyPath} in:\n${err.message}`);
  return found;
}

describe('loadConfig: sources', () => {
  it('loads the shipped conf/bifro.yml with paths resolved against conf/', async () => {
    const config = await loadConfig({ cwd: REPO, env: {} });
    expect(config.file).toBe(path.join(REPO, 'conf', 'bifro.yml'));
    expect(config.configDir).toBe(path.join(REPO, 'conf'));
    expect(config.dataDir).toBe(path.join(REPO, 'data'));
    expect(config.pluginsDir).toBe(path.join(REPO, 'data', 'plugins'));
    expect(config.pidFile).toBe(path.join(REPO, 'data', 'bifro.pid'));
    expect(config.listeners).toEqual([{ name: 'tcp', type: 'tcp', host: '127.0.0.1', port: 1883, proxyProtocol: false }]);
    expect(config.security).toEqual(DEFAULT_SECURITY);
    expect(config.plugins.storage).toEqual({ use: '@bifro/plugin-storage-level', required: true, options: { sync: true } });
    expect(config.plugins.auth).toEqual([]);
    expect(config.log).toEqual({ level: 'info' });
  });

  it('loads a complete valid file', async () => {
    write('certs/server.crt', 'cert');
    write('certs/server.key', 'key');
    write('certs/ca.crt', 'ca');
    const file = write(
      'etc/broker.yml',
      `nodeId: node-a
dataDir: ./var
pluginsDir: /opt/bifro/plugins
pidFile: run/b.pid
listeners:
  - { name: plain, type: tcp, host: 127.0.0.1, port: 1884, proxyProtocol: true }
  - name: secure
    type: tls
    port: 8883
    tls: { cert: ../certs/server.crt, key: ../certs/server.key, ca: ../certs/ca.crt, requestCert: true }
  - { type: ws }
  - { type: wss, port: 9443, path: /ws, tls: { cert: ../certs/server.crt, key: ../certs/server.key } }
plugins:
  packages: [bifro-auth-x]
  initTimeoutMs: 2000
  callTimeoutMs: 100
  auth: [bifro-auth-x, { use: "@acme/auth", required: false, options: { url: "ldap://x" } }]
  events: [{ use: metrics }]
  storage: "@bifro/plugin-storage-memory"
  balancer: null
mqtt: { connectTimeoutMs: 3000, maxClientIdLength: 23, maxKeepAliveSeconds: 1200, packetTimeoutMs: 5000 }
security:
  connectionRate: { perAddressPerSecond: 0 }
  overload: { maxEventLoopLagMs: 250, maxHeapUsedPercent: 80 }
  flapping: { maxDisconnects: 5, windowSeconds: 10, banSeconds: 30, maxTrackedClients: 5000 }
  loginFailures: { perLogin: 4, perAddress: 12, windowSeconds: 120, backoffMs: 500, maxBackoffMs: 4000, maxTrackedKeys: 2000 }
log: { level: debug, pretty: false }
`,
    );
    const config = await loadConfig({ file, cwd: '/', env: {} });
    const etc = path.join(tmp, 'etc');
    expect(config).toEqual({
      file,
      configDir: etc,
      nodeId: 'node-a',
      dataDir: path.join(etc, 'var'),
      pluginsDir: '/opt/bifro/plugins',
      pidFile: path.join(etc, 'run', 'b.pid'),
      listeners: [
        { name: 'plain', type: 'tcp', host: '127.0.0.1', port: 1884, proxyProtocol: true },
        {
          name: 'secure',
          type: 'tls',
          host: '0.0.0.0',
          port: 8883,
          proxyProtocol: false,
          tls: {
            cert: path.join(tmp, 'certs', 'server.crt'),
            key: path.join(tmp, 'certs', 'server.key'),
            ca: path.join(tmp, 'certs', 'ca.crt'),
            requestCert: true,
            rejectUnauthorized: true,
          },
        },
        { name: 'ws', type: 'ws', host: '0.0.0.0', port: 8083, path: '/mqtt', proxyProtocol: false },
        {
          name: 'wss',
          type: 'wss',
          host: '0.0.0.0',
          port: 9443,
          path: '/ws',
          proxyProtocol: false,
          tls: {
            cert: path.join(tmp, 'certs', 'server.crt'),
            key: path.join(tmp, 'certs', 'server.key'),
            requestCert: false,
            rejectUnauthorized: true,
          },
        },
      ],
      plugins: {
        packages: ['bifro-auth-x'],
        initTimeoutMs: 2000,
        callTimeoutMs: 100,
        auth: [
          { use: 'bifro-auth-x', required: true, options: {} },
          { use: '@acme/auth', required: false, options: { url: 'ldap://x' } },
        ],
        acl: [],
        events: [{ use: 'metrics', required: true, options: {} }],
        storage: { use: '@bifro/plugin-storage-memory', required: true, options: {} },
      },
      mqtt: {
        connectTimeoutMs: 3000,
        maxClientIdLength: 23,
        writeHighWaterBytes: 1048576,
        slowConsumerTimeoutMs: 30000,
        maxQueuedBytesPerConnection: 8388608,
        redirectCheckIntervalMs: 60000,
        maxKeepAliveSeconds: 1200,
        packetTimeoutMs: 5000,
      },
      security: {
        allowAnonymousOnPublicInterfaces: false,
        connectionRate: { perAddressPerSecond: 0, burst: 2000, maxTrackedAddresses: 100000 },
        overload: { maxEventLoopLagMs: 250, maxHeapUsedPercent: 80 },
        flapping: { maxDisconnects: 5, windowSeconds: 10, banSeconds: 30, maxTrackedClients: 5000 },
        loginFailures: { perLogin: 4, perAddress: 12, windowSeconds: 120, backoffMs: 500, maxBackoffMs: 4000, maxTrackedKeys: 2000 },
      },
      log: { level: 'debug', pretty: false },
      sysInterval: 10,
    });
  });

  it('uses built-in defaults when there is no file', async () => {
    const config = await loadConfig({ cwd: tmp, env: {} });
    expect(config).toEqual({
      file: undefined,
      configDir: tmp,
      nodeId: defaultNodeId(),
      dataDir: path.join(tmp, 'data'),
      pluginsDir: path.join(tmp, 'data', 'plugins'),
      pidFile: path.join(tmp, 'data', 'bifro.pid'),
      listeners: [{ name: 'tcp', type: 'tcp', host: '127.0.0.1', port: 1883, proxyProtocol: false }],
      plugins: { packages: [], initTimeoutMs: 10000, callTimeoutMs: 5000, auth: [], acl: [], events: [] },
      mqtt: {
        connectTimeoutMs: 10000,
        maxClientIdLength: 65535,
        writeHighWaterBytes: 1048576,
        slowConsumerTimeoutMs: 30000,
        maxQueuedBytesPerConnection: 8388608,
        redirectCheckIntervalMs: 60000,
        maxKeepAliveSeconds: 3600,
        packetTimeoutMs: 30000,
      },
      security: DEFAULT_SECURITY,
      log: { level: 'info' },
      sysInterval: 10,
    });
    expect(config.nodeId).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
  });

  it('treats an empty file as all defaults, relative to its folder', async () => {
    const file = write('conf/bifro.yml', '# nothing yet\n');
    const config = await loadConfig({ cwd: tmp, env: {} });
    expect(config.file).toBe(file);
    expect(config.dataDir).toBe(path.join(tmp, 'conf', 'data'));
    expect(config.listeners).toHaveLength(1);
  });

  it('refuses an explicitly given file that does not exist', async () => {
    const err = await failure({ file: 'missing.yml', cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_NOT_FOUND');
    expect(err.message).toContain(path.join(tmp, 'missing.yml'));
    expect(err.message).toContain('--config');
  });

  it('refuses a BIFRO_CONFIG file that does not exist, naming the variable', async () => {
    const err = await failure({ cwd: tmp, env: { BIFRO_CONFIG: 'nope.yml' } });
    expect(err.code).toBe('BIFRO_CONFIG_NOT_FOUND');
    expect(err.message).toContain('BIFRO_CONFIG');
  });

  it('reads the file named by BIFRO_CONFIG; --config wins over it', async () => {
    const a = write('a.yml', 'nodeId: from-env\n');
    const b = write('b.yml', 'nodeId: from-option\n');
    expect((await loadConfig({ cwd: tmp, env: { BIFRO_CONFIG: 'a.yml' } })).nodeId).toBe('from-env');
    expect((await loadConfig({ file: b, cwd: tmp, env: { BIFRO_CONFIG: a } })).nodeId).toBe('from-option');
  });

  it('reports a directory given as the file as unreadable', async () => {
    mkdirSync(path.join(tmp, 'dir.yml'));
    const err = await failure({ file: 'dir.yml', cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_READ');
  });
});

describe('loadConfig: errors name file, line and key path', () => {
  it('reports YAML syntax errors with file and line', async () => {
    const file = write('bad.yml', 'nodeId: a\nlisteners:\n  - name: x\n    port: [1883\nlog: {}\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.issues[0]?.code).toBe('BIFRO_CONFIG_PARSE');
    expect(err.issues[0]?.message).toMatch(new RegExp(`^${escape(file)}:\\d+:\\d+: YAML syntax error`));
    expect(err.issues[0]?.line).toBeGreaterThanOrEqual(4);
  });

  it('reports a duplicate key as a YAML error with its line', async () => {
    const file = write('dup.yml', 'nodeId: a\nlog:\n  level: info\nnodeId: b\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_PARSE');
    expect(err.message).toContain(`${file}:4:`);
  });

  it('rejects an unknown key, naming the key path, file and line, with a suggestion', async () => {
    const file = write('typo.yml', 'listeners:\n  - name: tcp\n    prot: 1883\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_UNKNOWN_KEY');
    const found = issue(err, 'BIFRO_CONFIG_UNKNOWN_KEY', 'listeners[0].prot');
    expect(found.message).toBe(
      `${file}:3:5: listeners[0].prot: unknown key; expected one of name, type, host, port, tls, path, proxyProtocol (did you mean "port"?)`,
    );
    expect(found.line).toBe(3);
  });

  it('rejects unknown keys at every level', async () => {
    const file = write('unknown.yml', 'colour: red\nplugins:\n  auth: [{ use: x, option: {} }]\nmqtt:\n  keepalive: 3\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_INVALID');
    expect(err.issues.map((i) => i.path)).toEqual(['colour', 'plugins.auth[0].option', 'mqtt.keepalive']);
    expect(err.issues.every((i) => i.code === 'BIFRO_CONFIG_UNKNOWN_KEY')).toBe(true);
  });

  it('rejects a value of the wrong type, saying what was expected and what was found', async () => {
    const file = write('type.yml', 'listeners:\n  - port: "abc"\nlog:\n  pretty: sometimes\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'listeners[0].port').message).toBe(
      `${file}:2:11: listeners[0].port: expected integer 0..65535, got "abc"`,
    );
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'log.pretty').message).toBe(
      `${file}:4:11: log.pretty: expected true or false, got "sometimes"`,
    );
  });

  it('collects every problem, not just the first, listing each in the message', async () => {
    const file = write('many.yml', 'nodeId: "has space"\nlisteners:\n  - { port: 70000, type: udp }\nlog: { level: loud }\n');
    const err = await failure({ file, cwd: tmp, env: { BIFRO_PORT: 'x' } });
    expect(err.code).toBe('BIFRO_CONFIG_INVALID');
    expect(err.issues.map((i) => i.path)).toEqual(['nodeId', 'listeners[0].port', 'listeners[0].type', 'log.level', 'BIFRO_PORT']);
    expect(err.message).toContain('5 problems');
    expect(err.message).toContain('listeners[0].type: expected one of tcp, tls, ws, wss, got "udp"');
    expect(err.message).toContain('log.level: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"');
  });

  it.each([
    ['70000', 'got 70000'],
    ['-1', 'got -1'],
    ['18.83', 'got 18.83'],
  ])('rejects port %s', async (port, got) => {
    const file = write('port.yml', `listeners:\n  - port: ${port}\n`);
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_INVALID_VALUE');
    expect(err.message).toContain(`listeners[0].port: expected integer 0..65535, ${got}`);
  });

  it('requires tls.cert and tls.key for tls and wss listeners', async () => {
    const file = write('tls.yml', 'listeners:\n  - { type: tls, port: 8883 }\n  - { type: wss, tls: { key: k.pem } }\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(issue(err, 'BIFRO_CONFIG_MISSING_KEY', 'listeners[0].tls').message).toBe(
      `${file}:2:5: listeners[0].tls: missing; a tls listener needs tls.cert and tls.key`,
    );
    expect(issue(err, 'BIFRO_CONFIG_MISSING_KEY', 'listeners[1].tls.cert').message).toContain('expected a non-empty path');
  });

  it('rejects tls on a tcp listener and path on a non-websocket listener', async () => {
    const file = write('kinds.yml', 'listeners:\n  - { type: tcp, path: /mqtt, tls: { cert: c, key: k } }\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'listeners[0].tls').message).toContain('applies only to tls and wss listeners');
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'listeners[0].path').message).toContain('applies only to ws and wss listeners');
  });

  it('reports tls files that cannot be read', async () => {
    write('c.pem', 'x');
    const file = write('files.yml', 'listeners:\n  - { type: tls, tls: { cert: c.pem, key: nokey.pem } }\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_TLS_FILE');
    expect(err.message).toContain(`${file}:2:`);
    expect(err.message).toContain(`listeners[0].tls.key: cannot read ${path.join(tmp, 'nokey.pem')} (ENOENT)`);
  });

  it('rejects duplicate listener names and ports', async () => {
    const file = write(
      'dupl.yml',
      'listeners:\n  - { name: a, port: 1883 }\n  - { name: a, port: 1884 }\n  - { name: b, host: 127.0.0.1, port: 1883 }\n  - { name: c, port: 0 }\n  - { name: d, port: 0 }\n',
    );
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.issues.map((i) => [i.code, i.path])).toEqual([
      ['BIFRO_CONFIG_DUPLICATE_LISTENER', 'listeners[1].name'],
      ['BIFRO_CONFIG_DUPLICATE_LISTENER', 'listeners[2].port'],
    ]);
    expect(err.issues[1]?.message).toContain('127.0.0.1:1883 ("b") conflicts with listeners[0] ("a" on 127.0.0.1:1883)');
  });

  it('names default listener names by type and position', async () => {
    const file = write('names.yml', 'listeners:\n  - { port: 1 }\n  - { port: 2 }\n  - { type: ws }\n');
    const config = await loadConfig({ file, cwd: tmp, env: {} });
    expect(config.listeners.map((l) => l.name)).toEqual(['tcp-1', 'tcp-2', 'ws']);
  });

  it('rejects an empty listener list and a non-map document', async () => {
    expect((await failure({ file: write('empty.yml', 'listeners: []\n'), cwd: tmp, env: {} })).message).toContain(
      'listeners: expected a non-empty list of listeners, got a list',
    );
    expect((await failure({ file: write('list.yml', '- a\n- b\n'), cwd: tmp, env: {} })).message).toContain(
      '(top level): expected a map of configuration keys, got a list',
    );
  });
});

describe('loadConfig: plugin references', () => {
  it('accepts a plain string or {use, required, options}', async () => {
    const file = write(
      'plugins.yml',
      'plugins:\n  auth:\n    - a\n    - { use: b }\n    - { use: c, required: false, options: { x: 1 } }\n  throttler: t\n  settings: { use: s, options: { f: conf.yml } }\n',
    );
    const { plugins } = await loadConfig({ file, cwd: tmp, env: {} });
    expect(plugins.auth).toEqual([
      { use: 'a', required: true, options: {} },
      { use: 'b', required: true, options: {} },
      { use: 'c', required: false, options: { x: 1 } },
    ]);
    expect(plugins.throttler).toEqual({ use: 't', required: true, options: {} });
    expect(plugins.settings).toEqual({ use: 's', required: true, options: { f: 'conf.yml' } });
    expect(plugins.balancer).toBeUndefined();
  });

  it('treats an empty list key as an empty list', async () => {
    const file = write('emptylist.yml', 'plugins:\n  auth:\n  acl: ~\n');
    const { plugins } = await loadConfig({ file, cwd: tmp, env: {} });
    expect(plugins.auth).toEqual([]);
    expect(plugins.acl).toEqual([]);
  });

  it('rejects references without use, with a wrong type, or as a single value where a list is needed', async () => {
    const file = write('badrefs.yml', 'plugins:\n  auth: [{ required: true }, 42, ""]\n  acl: just-one\n  storage: [a, b]\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(issue(err, 'BIFRO_CONFIG_MISSING_KEY', 'plugins.auth[0].use').message).toContain('missing; expected a plugin package name');
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'plugins.auth[1]').message).toContain(
      'expected a plugin package name, or {use, required, options}, got 42',
    );
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'plugins.auth[2]').message).toContain('got ""');
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'plugins.acl').message).toContain('expected a list of plugins');
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'plugins.storage').message).toContain('got a list');
  });
});

describe('loadConfig: environment and command-line overrides', () => {
  const file = (): string =>
    write(
      'conf/bifro.yml',
      'nodeId: file-node\ndataDir: ../data\npluginsDir: ../plugins\nlisteners:\n  - { name: ws, type: ws, port: 8080 }\n  - { name: main, port: 1883 }\n  - { name: second, port: 1884 }\nlog: { level: warn, pretty: true }\n',
    );

  it('applies every BIFRO_* variable, with relative paths against the cwd', async () => {
    file();
    const cwd = path.join(tmp, 'elsewhere');
    mkdirSync(cwd);
    const config = await loadConfig({
      cwd,
      env: {
        BIFRO_CONFIG: path.join(tmp, 'conf', 'bifro.yml'),
        BIFRO_NODE_ID: 'env-node',
        BIFRO_DATA_DIR: 'envdata',
        BIFRO_PLUGINS_DIR: '/srv/plugins',
        BIFRO_LOG_LEVEL: 'DEBUG',
        BIFRO_LOG_PRETTY: 'false',
        BIFRO_PORT: '2883',
      },
    });
    expect(config.nodeId).toBe('env-node');
    expect(config.dataDir).toBe(path.join(cwd, 'envdata'));
    expect(config.pidFile).toBe(path.join(cwd, 'envdata', 'bifro.pid'));
    expect(config.pluginsDir).toBe('/srv/plugins');
    expect(config.log).toEqual({ level: 'debug', pretty: false });
    expect(config.listeners.map((l) => [l.name, l.port])).toEqual([
      ['ws', 8080],
      ['main', 2883],
      ['second', 1884],
    ]);
  });

  it('gives command-line overrides precedence over the environment, and both over the file', async () => {
    file();
    const env = { BIFRO_DATA_DIR: 'envdata', BIFRO_PLUGINS_DIR: 'envplugins', BIFRO_PORT: '2883' };
    const config = await loadConfig({ cwd: tmp, env, overrides: { port: 0, dataDir: 'clidata', pluginsDir: '/cli/plugins' } });
    expect(config.dataDir).toBe(path.join(tmp, 'clidata'));
    expect(config.pluginsDir).toBe('/cli/plugins');
    expect(config.listeners.find((l) => l.name === 'main')?.port).toBe(0);
    expect(config.nodeId).toBe('file-node');
    expect(config.log).toEqual({ level: 'warn', pretty: true });

    const envOnly = await loadConfig({ cwd: tmp, env });
    expect(envOnly.dataDir).toBe(path.join(tmp, 'envdata'));
    expect(envOnly.listeners.find((l) => l.name === 'main')?.port).toBe(2883);

    const fileOnly = await loadConfig({ cwd: tmp, env: { BIFRO_PORT: '' } });
    expect(fileOnly.dataDir).toBe(path.join(tmp, 'data'));
    expect(fileOnly.listeners.find((l) => l.name === 'main')?.port).toBe(1883);
  });

  it('keeps an explicit pidFile when the data dir is overridden', async () => {
    const f = write('p.yml', 'pidFile: /run/bifro.pid\n');
    const config = await loadConfig({ file: f, cwd: tmp, env: {}, overrides: { dataDir: 'd' } });
    expect(config.pidFile).toBe('/run/bifro.pid');
    expect(config.dataDir).toBe(path.join(tmp, 'd'));
  });

  it('adds a tcp listener for --port when the config has none', async () => {
    const f = write('wsonly.yml', 'listeners:\n  - { name: tcp, type: ws, port: 8080 }\n');
    const config = await loadConfig({ file: f, cwd: tmp, env: {}, overrides: { port: 0 } });
    expect(config.listeners).toEqual([
      { name: 'tcp', type: 'ws', host: '127.0.0.1', port: 8080, path: '/mqtt', proxyProtocol: false },
      { name: 'tcp-2', type: 'tcp', host: '127.0.0.1', port: 0, proxyProtocol: false },
    ]);
  });

  it('reports a --port that collides with another listener as a duplicate', async () => {
    const f = write('collide.yml', 'listeners:\n  - { name: ws, type: ws, port: 8080 }\n  - { name: tcp }\n');
    const err = await failure({ file: f, cwd: tmp, env: {}, overrides: { port: 8080 } });
    expect(err.code).toBe('BIFRO_CONFIG_DUPLICATE_LISTENER');
    expect(err.message).toContain('listeners[1].port: 127.0.0.1:8080 ("tcp") conflicts with listeners[0]');
  });

  it.each([
    ['BIFRO_PORT', 'abc', 'expected integer 0..65535, got "abc"'],
    ['BIFRO_PORT', '65536', 'expected integer 0..65535, got "65536"'],
    ['BIFRO_LOG_LEVEL', 'verbose', 'expected one of fatal, error, warn, info, debug, trace, silent, got "verbose"'],
    ['BIFRO_LOG_PRETTY', 'maybe', 'expected true or false, got "maybe"'],
    ['BIFRO_NODE_ID', 'a.b', 'expected 1-64 letters, digits, "_" or "-", got "a.b"'],
  ])('rejects %s=%s naming the variable', async (name, value, expected) => {
    const err = await failure({ cwd: tmp, env: { [name]: value } });
    expect(err.code).toBe('BIFRO_CONFIG_ENV_INVALID');
    expect(err.issues).toHaveLength(1);
    expect(err.message).toBe(`BIFRO_CONFIG_ENV_INVALID: environment variable ${name}: ${expected}`);
  });

  it('accepts the usual spellings of booleans in BIFRO_LOG_PRETTY', async () => {
    expect((await loadConfig({ cwd: tmp, env: { BIFRO_LOG_PRETTY: 'TRUE' } })).log.pretty).toBe(true);
    expect((await loadConfig({ cwd: tmp, env: { BIFRO_LOG_PRETTY: '0' } })).log.pretty).toBe(false);
  });

  it('rejects invalid command-line overrides', async () => {
    const err = await failure({ cwd: tmp, env: {}, overrides: { port: 1.5, dataDir: ' ' } });
    expect(err.issues.map((i) => [i.code, i.path])).toEqual([
      ['BIFRO_CONFIG_OVERRIDE_INVALID', '--port'],
      ['BIFRO_CONFIG_OVERRIDE_INVALID', '--data-dir'],
    ]);
  });

  it('reports environment problems together with file problems', async () => {
    const f = write('both.yml', 'log: { level: loud }\n');
    const err = await failure({ file: f, cwd: tmp, env: { BIFRO_LOG_PRETTY: 'perhaps' } });
    expect(err.issues.map((i) => i.code)).toEqual(['BIFRO_CONFIG_INVALID_VALUE', 'BIFRO_CONFIG_ENV_INVALID']);
  });
});

describe('loadConfig: secure defaults and security', () => {
  it('binds loopback by default without an auth plugin, and every interface with one', async () => {
    const anon = await loadConfig({ file: write('anon.yml', 'listeners:\n  - { type: tcp }\n  - { type: ws }\n'), cwd: tmp, env: {} });
    expect(anon.listeners.map((l) => l.host)).toEqual(['127.0.0.1', '127.0.0.1']);
    const authed = await loadConfig({
      file: write('auth.yml', 'listeners:\n  - { type: tcp }\nplugins:\n  auth: [x]\n'),
      cwd: tmp,
      env: {},
    });
    expect(authed.listeners.map((l) => l.host)).toEqual(['0.0.0.0']);
  });

  it('refuses a public host with the dev-only allow-all auth, naming file, line, key and the opt-in', async () => {
    const file = write(
      'open.yml',
      'listeners:\n  - { name: lan, host: 0.0.0.0, port: 1883 }\n  - { name: lo, host: 127.0.0.1, port: 1884 }\n',
    );
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(err.code).toBe('BIFRO_CONFIG_ANONYMOUS_EXPOSED');
    expect(err.issues.map((i) => i.path)).toEqual(['listeners[0].host']);
    expect(err.message).toContain(`${file}:2:`);
    expect(err.message).toContain('listeners[0].host: listener "lan" would expose the DEV-ONLY allow-all auth on 0.0.0.0');
    expect(err.message).toContain('security.allowAnonymousOnPublicInterfaces: true');
  });

  it('accepts a public host with the opt-in or with an auth plugin', async () => {
    const opted = write('opt.yml', 'listeners:\n  - { host: 0.0.0.0 }\nsecurity: { allowAnonymousOnPublicInterfaces: true }\n');
    expect((await loadConfig({ file: opted, cwd: tmp, env: {} })).listeners[0]!.host).toBe('0.0.0.0');
    const authed = write('authed.yml', 'listeners:\n  - { host: "::" }\nplugins: { auth: [x] }\n');
    expect((await loadConfig({ file: authed, cwd: tmp, env: {} })).listeners[0]!.host).toBe('::');
  });

  it('validates the security section', async () => {
    const file = write(
      'sec.yml',
      'security:\n  connectionRate: { perAddressPerSecond: -1, burst: 0, burts: 3 }\n  flapping: { windowSeconds: 0 }\n  allowAnonymous: true\n',
    );
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'security.connectionRate.perAddressPerSecond').message).toContain(
      'expected integer 0..1000000 (connections per second per address; 0 = no limit), got -1',
    );
    issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'security.connectionRate.burst');
    expect(issue(err, 'BIFRO_CONFIG_UNKNOWN_KEY', 'security.connectionRate.burts').message).toContain('did you mean "burst"');
    issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'security.flapping.windowSeconds');
    issue(err, 'BIFRO_CONFIG_UNKNOWN_KEY', 'security.allowAnonymous');
  });

  it('validates the time limits: mqtt.maxKeepAliveSeconds 1..65535, mqtt.packetTimeoutMs 100..3600000', async () => {
    const file = write('limits.yml', 'mqtt: { maxKeepAliveSeconds: 0, packetTimeoutMs: 99 }\n');
    const err = await failure({ file, cwd: tmp, env: {} });
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'mqtt.maxKeepAliveSeconds').message).toContain(
      'expected integer 1..65535 (seconds), got 0',
    );
    expect(issue(err, 'BIFRO_CONFIG_INVALID_VALUE', 'mqtt.packetTimeoutMs').message).toContain(
      'expected integer 100..3600000 (milliseconds), got 99',
    );
    const high = write('limits-high.yml', 'mqtt: { maxKeepAliveSeconds: 65536, packetTimeoutMs: 3600001 }\n');
    const errHigh = await failure({ file: high, cwd: tmp, env: {} });
    issue(errHigh, 'BIFRO_CONFIG_INVALID_VALUE', 'mqtt.maxKeepAliveSeconds');
    issue(errHigh, 'BIFRO_CONFIG_INVALID_VALUE', 'mqtt.packetTimeoutMs');
    const ok = write('limits-ok.yml', 'mqtt: { maxKeepAliveSeconds: 65535, packetTimeoutMs: 100 }\n');
    expect((await loadConfig({ file: ok, cwd: tmp, env: {} })).mqtt).toMatchObject({ maxKeepAliveSeconds: 65535, packetTimeoutMs: 100 });
  });

  it('treats a null security section as absent', async () => {
    const config = await loadConfig({ file: write('null.yml', 'security:\n'), cwd: tmp, env: {} });
    expect(config.security).toEqual(DEFAULT_SECURITY);
  });
});

describe('config error catalogue', () => {
  it('has a summary and a remedy for every code', () => {
    for (const [code, spec] of Object.entries(CONFIG_ERRORS)) {
      expect(code).toMatch(/^BIFRO_CONFIG_[A-Z_]+$/);
      expect(spec.summary.length).toBeGreaterThan(10);
      expect(spec.remedy.length).toBeGreaterThan(10);
    }
  });

  it('formats key paths', () => {
    expect(formatKeyPath(['listeners', 0, 'tls', 'cert'])).toBe('listeners[0].tls.cert');
    expect(formatKeyPath(['plugins', 'auth', 1, 'options', 'a-b'])).toBe('plugins.auth[1].options["a-b"]');
    expect(formatKeyPath([])).toBe('(top level)');
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
