import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { IAuthPacket, IConnackPacket } from 'mqtt-packet';
import { hashPassword } from '../../plugins/auth-file/src/hashes';
import { formatEntryLine } from '../../plugins/auth-file/src/password-file';
import { deriveScramCredentials, ScramClient, SCRAM_METHODS } from '../../plugins/auth-file/src/scram';
import { tryConnect, uniqueName, type ConnectResult } from '../support/mqtt-helpers';
import { proxyV1Tcp4 } from '../support/proxy-headers';
import { RawClient } from '../support/raw-client';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Password guessing against a real broker with @bifro/plugin-auth-file (build first: `npx tsc -b`):
 * the back-off of `security.loginFailures` per address and per login (addresses told apart by a
 * PROXY protocol listener), SCRAM guesses through the same back-off, the KDF queue fair per tenant
 * (a flood of wrong passwords in one tenant does not time out another tenant's logins), and unknown
 * users answered like wrong passwords: same reason code, same time.
 */

jest.setTimeout(90_000);

let work: string;
let passwdFile: string;

beforeAll(async () => {
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-brute-'));
  passwdFile = path.join(work, 'passwd');
  const line = async (tenant: string, user: string, password: string, scram = false): Promise<string> => {
    const bytes = Buffer.from(password, 'utf8');
    const credentials = scram
      ? Object.fromEntries(await Promise.all(SCRAM_METHODS.map(async (m) => [m, await deriveScramCredentials(m, bytes)])))
      : {};
    return formatEntryLine({ tenant, user, hash: await hashPassword(bytes), scram: credentials });
  };
  const lines = await Promise.all([
    line('acme', 'alice', 'alice-pw', true),
    line('beta', 'bob', 'bob-pw'),
    line('default', 'carol', 'carol-pw'),
  ]);
  writeFileSync(passwdFile, `${lines.join('\n')}\n`);
});

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

function codeOf(r: ConnectResult): number | undefined {
  return r.connack?.reasonCode ?? r.connack?.returnCode ?? r.error?.code;
}

function authFile(extra = ''): string {
  return `plugins:\n  auth:\n    - use: "@bifro/plugin-auth-file"\n      options: { file: ${JSON.stringify(passwdFile)}${extra} }\n`;
}

const OFF = 'security:\n  loginFailures: { perLogin: 0, perAddress: 0 }\n';

describe('54 brute force: back-off per address and per login (security.loginFailures)', () => {
  let tb: TestBroker;
  const raw: RawClient[] = [];

  beforeAll(async () => {
    tb = await startTestBroker(
      `${authFile()}security:\n  loginFailures: { perLogin: 3, perAddress: 4, windowSeconds: 60, backoffMs: 1500, maxBackoffMs: 1500 }\n`,
      {
        pluginsDir: path.join(REPO, 'plugins'),
        listeners: ['{ name: tcp-proxy, type: tcp, host: 127.0.0.1, port: 0, proxyProtocol: true }'],
      },
    );
  });
  afterEach(() => {
    for (const c of raw.splice(0)) c.destroy();
  });
  afterAll(() => tb?.stop());

  /** A raw MQTT 5 connection through the PROXY listener, as if from `address`. */
  async function from(address: string): Promise<RawClient> {
    const c = await RawClient.connect(tb.listeners[1]!.port, 5);
    raw.push(c);
    c.write(proxyV1Tcp4(address, 40000 + raw.length, '10.0.0.1', 1883));
    return c;
  }

  async function login(address: string, username: string, password: string): Promise<{ connack: IConnackPacket; ms: number }> {
    const c = await from(address);
    const started = Date.now();
    c.send(
      {
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 5,
        clientId: uniqueName('bf'),
        clean: true,
        keepalive: 30,
        username,
        password: Buffer.from(password),
      },
      5,
    );
    const connack = (await c.next(10_000)) as IConnackPacket;
    expect(connack?.cmd).toBe('connack');
    return { connack, ms: Date.now() - started };
  }

  it('an address past perAddress failures is refused 0x86 without a password check, even with the right password; the user gets in from elsewhere', async () => {
    for (const password of ['guess-1', 'guess-2', 'guess-3', 'guess-4'])
      expect((await login('192.0.2.66', 'acme/alice', password)).connack.reasonCode).toBe(0x86);
    const refused = await login('192.0.2.66', 'acme/alice', 'alice-pw');
    expect(refused.connack.reasonCode).toBe(0x86);
    expect(refused.connack.properties?.reasonString).toBe('too many failed logins: try again later');
    // alice's login failed 4 times (over perLogin 3): from her own address she is delayed, not locked out.
    const legit = await login('198.51.100.7', 'acme/alice', 'alice-pw');
    expect(legit.connack.reasonCode).toBe(0);
    expect(legit.ms).toBeLessThan(3000);
    // Her success reset the login: the next one is not delayed.
    expect((await login('198.51.100.7', 'acme/alice', 'alice-pw')).ms).toBeLessThan(1000);
  });

  it('SCRAM guesses count too: past perAddress failed exchanges the next CONNECT with SCRAM is refused 0x86 at once', async () => {
    const exchange = async (password: string): Promise<IConnackPacket> => {
      const scram = new ScramClient('SCRAM-SHA-256', 'acme/alice', password);
      const c = await from('203.0.113.9');
      c.send(
        {
          cmd: 'connect',
          protocolId: 'MQTT',
          protocolVersion: 5,
          clientId: uniqueName('scram'),
          clean: true,
          keepalive: 30,
          properties: { authenticationMethod: 'SCRAM-SHA-256', authenticationData: Buffer.from(scram.first) },
        },
        5,
      );
      const first = (await c.next(10_000)) as IAuthPacket | IConnackPacket;
      if (first.cmd === 'connack') return first;
      const serverFirst = first.properties!.authenticationData!.toString('utf8');
      c.send(
        {
          cmd: 'auth',
          reasonCode: 0x18,
          properties: { authenticationMethod: 'SCRAM-SHA-256', authenticationData: Buffer.from(await scram.final(serverFirst)) },
        },
        5,
      );
      return (await c.next(10_000)) as IConnackPacket;
    };
    for (let i = 0; i < 4; i++) expect((await exchange(`wrong-${i}`)).reasonCode).toBe(0x86);
    const refused = await exchange('alice-pw');
    expect(refused.reasonCode).toBe(0x86);
    expect(refused.properties?.reasonString).toBe('too many failed logins: try again later');
  });
});

describe('54 brute force: the KDF queue is fair per tenant', () => {
  let tb: TestBroker;

  beforeAll(async () => {
    tb = await startTestBroker(`${authFile()}${OFF}`, { pluginsDir: path.join(REPO, 'plugins') });
  });
  afterAll(() => tb?.stop());

  it('a flood of wrong passwords in tenant acme does not delay an uncached login of tenant beta: CONNACK 0x00 within 2 s', async () => {
    // 150 guesses at once, each a different password (no check shared): far more than the KDF keeps up with.
    const flood = Array.from({ length: 150 }, (_, i) =>
      tryConnect(tb.port, {
        protocolVersion: 5,
        clientId: uniqueName('flood'),
        username: 'acme/alice',
        password: `guess-${i}`,
        reconnectPeriod: 0,
        connectTimeout: 30_000,
      }),
    );
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    const bob = await tryConnect(tb.port, {
      protocolVersion: 5,
      clientId: uniqueName('bob'),
      username: 'beta/bob',
      password: 'bob-pw',
      reconnectPeriod: 0,
    });
    const ms = Date.now() - started;
    const codes = (await Promise.all(flood)).map(codeOf);
    bob.client?.end(true);
    expect(codeOf(bob)).toBe(0);
    expect(ms).toBeLessThan(2000);
    // The flood was refused (wrong passwords, or its own tenant's queue full), never accepted.
    expect(codes.every((c) => c === 0x86 || c === 0x80)).toBe(true);
  });
});

describe('54 brute force: unknown users answered like wrong passwords', () => {
  let tb: TestBroker;

  beforeAll(async () => {
    tb = await startTestBroker(`${authFile(', unknownUser: reject')}${OFF}`, { pluginsDir: path.join(REPO, 'plugins') });
  });
  afterAll(() => tb?.stop());

  async function timed(protocolVersion: 4 | 5, username: string): Promise<{ code: number | undefined; ms: number }> {
    const started = performance.now();
    const r = await tryConnect(tb.port, {
      protocolVersion,
      clientId: uniqueName('t'),
      username,
      password: 'not-the-password',
      reconnectPeriod: 0,
    });
    r.client?.end(true);
    return { code: codeOf(r), ms: performance.now() - started };
  }

  it('the same reason code (v5 0x86, v3.1.1 4) and medians within a factor of 2 for an unknown user and a wrong password', async () => {
    await timed(5, 'acme/alice');
    const wrong: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 7; i++) {
      const w = await timed(5, 'acme/alice');
      const u = await timed(5, i % 2 === 0 ? 'acme/nobody' : `ghost-${i}`);
      expect([w.code, u.code]).toEqual([0x86, 0x86]);
      wrong.push(w.ms);
      unknown.push(u.ms);
    }
    expect([(await timed(4, 'carol')).code, (await timed(4, 'nobody')).code]).toEqual([4, 4]);
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ratio = median(unknown) / median(wrong);
    expect(ratio).toBeGreaterThan(0.5);
    expect(ratio).toBeLessThan(2);
  });
});
