import { execFileSync, spawn } from 'node:child_process';
import { appendFileSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IAuthPacket, IConnackPacket, IDisconnectPacket } from 'mqtt-packet';
import { ScramClient, type ScramMethod } from '../../plugins/auth-file/src/scram';
import { publish, sleep, subscribe, tryConnect, uniqueName, waitUntil, withClients, type ConnectResult } from '../support/mqtt-helpers';
import { RawClient } from '../support/raw-client';
import { FIXTURE_PLUGINS, REPO, startTestBroker, type TestBroker } from '../support/test-broker';
import { createTestCerts, type TestCerts } from '../support/tls-certs';

/**
 * @bifro/plugin-auth-file in a real broker, with MQTT.js and raw MQTT 5 clients over real sockets:
 * a password file made by the real mosquitto_passwd and by `bifro passwd` (the built CLI), right
 * and wrong passwords (v5 and v3.1.1 reason codes), unknown users deferred to an empty chain,
 * reload on change (and a broken edit that keeps the users), SCRAM-SHA-256/512 over AUTH packets
 * with re-authentication, client-certificate identity on a TLS listener, and a chain where the
 * plugin defers and another auth plugin decides. Build first (`npx tsc -b`): the broker loads the
 * plugin's dist/.
 */

jest.setTimeout(60000);

const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');
const PLUGIN = path.join(REPO, 'plugins', 'auth-file');

let work: string;
let passwdFile: string;
let certs: TestCerts;

/** `bifro passwd ...args` (the built CLI), the password on stdin. */
function bifroPasswd(args: readonly string[], password: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'passwd', '--password-stdin', ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20000);
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
    child.stdin.end(`${password}\n`);
  });
}

function codeOf(r: ConnectResult): number | undefined {
  return r.connack?.reasonCode ?? r.connack?.returnCode ?? r.error?.code;
}

function pluginOptions(file: string, extra = ''): string {
  return `{ file: ${JSON.stringify(file)}, pollMs: 100${extra} }`;
}

beforeAll(async () => {
  if (!existsSync(path.join(PLUGIN, 'dist', 'index.js')) || !existsSync(CLI)) throw new Error('build first: npx tsc -b');
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-auth-file-'));
  passwdFile = path.join(work, 'passwd');
  certs = createTestCerts();
  // A mosquitto password file as mosquitto_passwd writes it ($7$, PBKDF2-SHA512)...
  execFileSync('mosquitto_passwd', ['-c', '-b', passwdFile, 'mosq', 'mosq-pw'], { timeout: 5000 });
  // ...to which bifro passwd adds scrypt users, with SCRAM credentials, and the certificate user.
  for (const [args, password] of [
    [['--tenant', 'acme', '--scram', '--attr', 'role=admin', passwdFile, 'alice'], 'alice-pw'],
    [[passwdFile, 'bob'], 'bob-pw'],
    [['--tenant', 'Acme', passwdFile, 'device-17'], 'unused-device-pw'],
  ] as const) {
    const r = await bifroPasswd(args, password);
    if (r.code !== 0) throw new Error(`bifro passwd failed: ${r.stderr}`);
  }
});

afterAll(() => {
  certs?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('29 auth-file: passwords over MQTT', () => {
  let tb: TestBroker;
  let file: string;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    // This broker's file is edited below: a copy, so the other brokers start from the original.
    file = path.join(work, 'passwd-reloaded');
    copyFileSync(passwdFile, file);
    tb = await startTestBroker(`plugins:\n  auth:\n    - use: "@bifro/plugin-auth-file"\n      options: ${pluginOptions(file)}\n`, {
      pluginsDir: path.join(REPO, 'plugins'),
    });
  });
  afterAll(() => tb?.stop());

  /** Connects until it is accepted (a reload takes a poll and a debounce); the last reason code. */
  async function eventually(opts: Parameters<typeof tryConnect>[1], timeoutMs = 5000): Promise<number | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const code = codeOf(await clients.tryMqtt({ ...opts, clientId: uniqueName('try') }));
      if (code === 0 || Date.now() > deadline) return code;
      await sleep(100);
    }
  }

  it('accepts the right password (v5 and v3.1.1), for scrypt users and the mosquitto_passwd user', async () => {
    for (const protocolVersion of [5, 4] as const) {
      for (const [username, password] of [
        ['acme/alice', 'alice-pw'],
        ['bob', 'bob-pw'],
        ['mosq', 'mosq-pw'],
        ['default/mosq', 'mosq-pw'],
      ]) {
        const r = await clients.tryMqtt({ protocolVersion, clientId: uniqueName('ok'), username, password });
        expect({ username, protocolVersion, code: codeOf(r) }).toEqual({ username, protocolVersion, code: 0 });
      }
    }
  });

  it('refuses a wrong password: v5 0x86, v3.1.1 4; other connections are unaffected', async () => {
    const live = await clients.subscriber(
      'e2e-af/live',
      { qos: 1 },
      { protocolVersion: 5, clientId: uniqueName('live'), username: 'bob', password: 'bob-pw' },
    );
    const v5 = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('w5'), username: 'acme/alice', password: 'nope' });
    expect(codeOf(v5)).toBe(0x86);
    const v3 = await clients.tryMqtt({ protocolVersion: 4, clientId: uniqueName('w3'), username: 'mosq', password: 'nope' });
    expect(codeOf(v3)).toBe(4);
    const empty = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('w0'), username: 'bob' });
    expect(codeOf(empty)).toBe(0x86);
    await publish(live.client, 'e2e-af/live', 'still here', { qos: 1 });
    expect((await live.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['still here']);
  });

  it('defers an unknown user; the chain then has no one left and refuses: v5 0x87, v3.1.1 5', async () => {
    const v5 = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('u5'), username: 'mallory', password: 'x' });
    expect(codeOf(v5)).toBe(0x87);
    const v3 = await clients.tryMqtt({ protocolVersion: 4, clientId: uniqueName('u3'), username: 'mallory', password: 'x' });
    expect(codeOf(v3)).toBe(5);
    const anonymous = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('anon') });
    expect(codeOf(anonymous)).toBe(0x87);
    // alice is a user of tenant acme, not of the default tenant.
    const wrongTenant = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('wt'), username: 'alice', password: 'alice-pw' });
    expect(codeOf(wrongTenant)).toBe(0x87);
  });

  it('reloads on change: a user added with bifro passwd logs in; a broken edit keeps the users and the log names the line', async () => {
    const carol = { protocolVersion: 5 as const, username: 'acme/carol', password: 'carol-pw' };
    expect(codeOf(await clients.tryMqtt({ ...carol, clientId: uniqueName('c0') }))).toBe(0x87);
    const live = await clients.subscriber(
      'e2e-af/reload',
      { qos: 1 },
      { protocolVersion: 5, clientId: uniqueName('live'), username: 'bob', password: 'bob-pw' },
    );
    expect((await bifroPasswd(['--tenant', 'acme', file, 'carol'], 'carol-pw')).code).toBe(0);
    expect(await eventually(carol)).toBe(0);

    // A broken edit: a plain-text line. The users stay (carol included), and the log says where.
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n').length;
    appendFileSync(file, 'dave:plain-text-password\n');
    const logged = (): Record<string, unknown> | undefined =>
      tb.logs.find(
        (l) => String(l.msg).includes('is invalid') && String(l.msg).includes(`${file}:${lines + 1}: the password is not hashed`),
      );
    expect(await waitUntil(() => logged() !== undefined, 5000)).toBe(true);
    expect(logged()).toMatchObject({ level: 40, code: 'BIFRO_AUTH_FILE_INVALID' });
    expect(codeOf(await clients.tryMqtt({ ...carol, clientId: uniqueName('c2') }))).toBe(0);
    expect(
      codeOf(await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('d'), username: 'dave', password: 'plain-text-password' })),
    ).toBe(0x87);
    // Sessions that were connected before the edits are still there.
    await publish(live.client, 'e2e-af/reload', 'after reloads', { qos: 1 });
    expect((await live.messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['after reloads']);
  });
});

/** Sends a CONNECT with `method` and the client-first message; returns the raw client. */
async function scramConnect(port: number, method: ScramMethod, scram: ScramClient, clientId: string): Promise<RawClient> {
  const c = await RawClient.connect(port, 5);
  c.send(
    {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 5,
      clientId,
      clean: true,
      keepalive: 30,
      properties: { authenticationMethod: method, authenticationData: Buffer.from(scram.first) },
    },
    5,
  );
  return c;
}

/** The AUTH 0x18 answer to a server-first (the client-final message). */
async function answer(c: RawClient, method: ScramMethod, scram: ScramClient): Promise<void> {
  const challenge = (await c.next(5000)) as IAuthPacket | undefined;
  expect(challenge?.cmd).toBe('auth');
  expect(challenge?.reasonCode).toBe(0x18);
  expect(challenge?.properties?.authenticationMethod).toBe(method);
  const serverFirst = challenge!.properties!.authenticationData!.toString('utf8');
  expect(serverFirst).toMatch(/^r=[^,]+,s=[A-Za-z0-9+/=]+,i=4096$/);
  c.send(
    {
      cmd: 'auth',
      reasonCode: 0x18,
      properties: { authenticationMethod: method, authenticationData: Buffer.from(await scram.final(serverFirst)) },
    },
    5,
  );
}

describe('29 auth-file: SCRAM over MQTT 5 AUTH', () => {
  let tb: TestBroker;
  const raw: RawClient[] = [];

  beforeAll(async () => {
    tb = await startTestBroker(`plugins:\n  auth:\n    - use: "@bifro/plugin-auth-file"\n      options: ${pluginOptions(passwdFile)}\n`, {
      pluginsDir: path.join(REPO, 'plugins'),
    });
  });
  afterEach(() => {
    for (const c of raw.splice(0)) c.destroy();
  });
  afterAll(() => tb?.stop());

  it.each<ScramMethod>(['SCRAM-SHA-256', 'SCRAM-SHA-512'])(
    '%s: CONNECT → AUTH 0x18 → AUTH 0x18 → CONNACK 0 with v=, and the client verifies the server',
    async (method) => {
      const scram = new ScramClient(method, 'acme/alice', 'alice-pw');
      const c = await scramConnect(tb.port, method, scram, uniqueName('scram'));
      raw.push(c);
      await answer(c, method, scram);
      const connack = (await c.next(5000)) as IConnackPacket | undefined;
      expect(connack?.cmd).toBe('connack');
      expect(connack?.reasonCode).toBe(0);
      expect(connack?.properties?.authenticationMethod).toBe(method);
      expect(scram.verifyServer(connack!.properties!.authenticationData!.toString('utf8'))).toBe(true);
      const connected = tb.logs.find((l) => l.msg === 'client connected' && l.tenantId === 'acme');
      expect(connected).toBeDefined();
    },
  );

  it('a wrong password (wrong proof) is refused with CONNACK 0x86, a malformed message with 0x87; other connections are unaffected', async () => {
    const good = new ScramClient('SCRAM-SHA-256', 'acme/alice', 'alice-pw');
    const ok = await scramConnect(tb.port, 'SCRAM-SHA-256', good, uniqueName('ok'));
    raw.push(ok);
    await answer(ok, 'SCRAM-SHA-256', good);
    expect(((await ok.next(5000)) as IConnackPacket).reasonCode).toBe(0);

    const scram = new ScramClient('SCRAM-SHA-256', 'acme/alice', 'not-her-password');
    const c = await scramConnect(tb.port, 'SCRAM-SHA-256', scram, uniqueName('bad'));
    raw.push(c);
    await answer(c, 'SCRAM-SHA-256', scram);
    const connack = (await c.next(5000)) as IConnackPacket | undefined;
    expect(connack?.reasonCode).toBe(0x86);
    expect(await c.waitClosed(5000)).toBe(true);

    // A malformed client-first message (no GS2 header) is refused with 0x87.
    const garbage = await RawClient.connect(tb.port, 5);
    raw.push(garbage);
    garbage.send(
      {
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 5,
        clientId: uniqueName('garbage'),
        clean: true,
        keepalive: 30,
        properties: { authenticationMethod: 'SCRAM-SHA-256', authenticationData: Buffer.from([0xff, 0x00, 0x2c]) },
      },
      5,
    );
    expect(((await garbage.next(5000)) as IConnackPacket | undefined)?.reasonCode).toBe(0x87);
    expect(await garbage.waitClosed(5000)).toBe(true);

    ok.send({ cmd: 'pingreq' }, 5);
    expect((await ok.next(5000))?.cmd).toBe('pingresp');
    expect(ok.closed).toBe(false);
  });

  it('a user without SCRAM credentials, or unknown, is deferred: no one else handles the method → CONNACK 0x8C', async () => {
    for (const username of ['bob', 'mallory']) {
      const scram = new ScramClient('SCRAM-SHA-256', username, 'bob-pw');
      const c = await scramConnect(tb.port, 'SCRAM-SHA-256', scram, uniqueName('nocred'));
      raw.push(c);
      expect(((await c.next(5000)) as IConnackPacket | undefined)?.reasonCode).toBe(0x8c);
    }
  });

  it('re-authenticates a live connection (AUTH 0x19 → 0x18 → 0x18 → AUTH 0x00 with v=); a wrong proof then disconnects with 0x87', async () => {
    const method: ScramMethod = 'SCRAM-SHA-512';
    const scram = new ScramClient(method, 'acme/alice', 'alice-pw');
    const c = await scramConnect(tb.port, method, scram, uniqueName('reauth'));
    raw.push(c);
    await answer(c, method, scram);
    expect(((await c.next(5000)) as IConnackPacket).reasonCode).toBe(0);

    const again = new ScramClient(method, 'acme/alice', 'alice-pw');
    c.send(
      { cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: method, authenticationData: Buffer.from(again.first) } },
      5,
    );
    await answer(c, method, again);
    const done = (await c.next(5000)) as IAuthPacket | undefined;
    expect(done?.cmd).toBe('auth');
    expect(done?.reasonCode).toBe(0);
    expect(again.verifyServer(done!.properties!.authenticationData!.toString('utf8'))).toBe(true);
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next(5000))?.cmd).toBe('pingresp');

    const wrong = new ScramClient(method, 'acme/alice', 'wrong');
    c.send(
      { cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: method, authenticationData: Buffer.from(wrong.first) } },
      5,
    );
    await answer(c, method, wrong);
    const bye = (await c.next(5000)) as IDisconnectPacket | undefined;
    expect(bye?.cmd).toBe('disconnect');
    expect(bye?.reasonCode).toBe(0x87);
    expect(await c.waitClosed(5000)).toBe(true);
  });
});

describe('29 auth-file: client certificate identity on a TLS listener', () => {
  let tb: TestBroker;
  const clients = withClients(() => tb.port);
  const tlsPort = (): number => tb.listeners.find((l) => l.name === 'tls')!.port;

  beforeAll(async () => {
    const tls = `tls: { cert: ${JSON.stringify(certs.server.cert)}, key: ${JSON.stringify(certs.server.key)}, ca: ${JSON.stringify(certs.ca.cert)}, requestCert: true, rejectUnauthorized: false }`;
    tb = await startTestBroker(
      `plugins:\n  auth:\n    - use: "@bifro/plugin-auth-file"\n      options: ${pluginOptions(passwdFile, ', certificate: { user: CN, tenant: O, requireListed: true }')}\n`,
      { pluginsDir: path.join(REPO, 'plugins'), listeners: [`{ name: tls, type: tls, host: 127.0.0.1, port: 0, ${tls} }`] },
    );
  });
  afterAll(() => tb?.stop());

  const tlsOpts = (): { protocol: 'mqtts'; ca: Buffer; rejectUnauthorized: true } => ({
    protocol: 'mqtts',
    ca: certs.ca.certPem,
    rejectUnauthorized: true,
  });

  it('a verified certificate (CN=device-17, O=Acme) authenticates without a password, as Acme/device-17', async () => {
    const clientId = uniqueName('cert');
    const r = await tryConnect(tlsPort(), {
      ...tlsOpts(),
      protocolVersion: 5,
      clientId,
      cert: certs.client.certPem,
      key: certs.client.keyPem,
    });
    clients.track(r.client);
    expect(codeOf(r)).toBe(0);
    expect(
      await waitUntil(() => tb.logs.some((l) => l.msg === 'client connected' && l.clientId === clientId && l.tenantId === 'Acme')),
    ).toBe(true);
    const sub = await subscribe(r.client, 'e2e-af/cert', { qos: 1 });
    expect(sub[0]?.qos).toBe(1);
  });

  it('an unverified certificate (another CA) never authenticates: deferred → 0x87; with a password it is the password that counts', async () => {
    const rogue = await tryConnect(tlsPort(), {
      ...tlsOpts(),
      protocolVersion: 5,
      clientId: uniqueName('rogue'),
      cert: certs.rogueClient.certPem,
      key: certs.rogueClient.keyPem,
    });
    clients.track(rogue.client);
    expect(codeOf(rogue)).toBe(0x87);
    const withPassword = await tryConnect(tlsPort(), {
      ...tlsOpts(),
      protocolVersion: 4,
      clientId: uniqueName('rogue-pw'),
      cert: certs.rogueClient.certPem,
      key: certs.rogueClient.keyPem,
      username: 'bob',
      password: 'bob-pw',
    });
    clients.track(withPassword.client);
    expect(codeOf(withPassword)).toBe(0);
    const noCert = await tryConnect(tlsPort(), {
      ...tlsOpts(),
      protocolVersion: 5,
      clientId: uniqueName('nocert'),
      username: 'bob',
      password: 'wrong',
    });
    clients.track(noCert.client);
    expect(codeOf(noCert)).toBe(0x86);
  });

  it('the certificate means nothing on the plain tcp listener: a password is needed there', async () => {
    const r = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('tcp') });
    expect(codeOf(r)).toBe(0x87);
  });
});

describe('29 auth-file: in a chain with another auth plugin', () => {
  let tb: TestBroker;
  let pluginsDir: string;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    pluginsDir = path.join(work, 'chain-plugins');
    mkdirSync(pluginsDir);
    symlinkSync(PLUGIN, path.join(pluginsDir, 'auth-file'), 'dir');
    cpSync(path.join(FIXTURE_PLUGINS, 'auth-user-table'), path.join(pluginsDir, 'auth-user-table'), { recursive: true });
    tb = await startTestBroker(
      [
        'plugins:',
        '  auth:',
        '    - use: "@bifro/plugin-auth-file"',
        `      options: ${pluginOptions(passwdFile)}`,
        '    - use: "@fixtures/auth-user-table"',
        '      options: { users: { zoe: { password: zoe-pw, tenant: second }, bob: { password: other-pw, tenant: second } } }',
      ].join('\n'),
      { pluginsDir },
    );
  });
  afterAll(() => tb?.stop());

  it('a user the file does not know is deferred to the next plugin, which decides (accepts or refuses)', async () => {
    const zoe = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('zoe'), username: 'zoe', password: 'zoe-pw' });
    expect(codeOf(zoe)).toBe(0);
    const clientId = uniqueName('zoe2');
    expect(codeOf(await clients.tryMqtt({ protocolVersion: 5, clientId, username: 'zoe', password: 'zoe-pw' }))).toBe(0);
    expect(
      await waitUntil(() => tb.logs.some((l) => l.msg === 'client connected' && l.clientId === clientId && l.tenantId === 'second')),
    ).toBe(true);
    const wrong = await clients.tryMqtt({ protocolVersion: 4, clientId: uniqueName('zoe-w'), username: 'zoe', password: 'nope' });
    expect(codeOf(wrong)).toBe(4);
  });

  it('a user the file knows is decided by the file: its password wins, a wrong one is refused before the next plugin', async () => {
    const bob = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('bob'), username: 'bob', password: 'bob-pw' });
    expect(codeOf(bob)).toBe(0);
    // other-pw is bob's password in the second plugin, but the file answered first.
    const other = await clients.tryMqtt({ protocolVersion: 5, clientId: uniqueName('bob-o'), username: 'bob', password: 'other-pw' });
    expect(codeOf(other)).toBe(0x86);
  });
});
