import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { MqttClient } from 'mqtt';
import type { Packet } from 'mqtt-packet';
import { fields, startService, type AuthService, type Handler } from '../../plugins/auth-http/test/service';
import {
  collect,
  expectPacket,
  tryConnect,
  uniqueName,
  waitUntil,
  withClients,
  QUIET_MS,
  type ClientRegistry,
  type ConnectResult,
  type ProtocolVersion,
} from '../support/mqtt-helpers';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';
import { createTestCerts, type TestCerts } from '../support/tls-certs';

/**
 * @bifro/plugin-auth-http in a real broker with MQTT.js and raw clients, against a real auth
 * service (fastify on 127.0.0.1, which counts the requests and the TCP connections it gets). The
 * plugin is loaded from its build (`npx tsc -b` first). The main broker runs auth-http as its auth
 * provider and as its ACL (after a recording ACL that defers, to see the session's identity).
 */

jest.setTimeout(60000);

const RULES = [
  { permission: 'deny', action: 'all', topic: '%t/secret/#' },
  { permission: 'allow', action: 'all', topic: '%t/%u/#' },
  { permission: 'allow', action: 'subscribe', topic: '%t/public/#' },
];

/** The service's decisions, by username. */
const serviceHandler: Handler = (req) => {
  const f = fields(req);
  const username = f.username ?? '';
  if (username === 'alice') {
    return f.password === 's3cret'
      ? { json: { result: 'allow', tenant: 'acme', user: 'alice', attrs: { role: 'admin', plan: 'gold' }, acl: RULES } }
      : { json: { result: 'deny', reason: 'badCredentials', message: 'wrong password' } };
  }
  if (username === 'bob') return { json: { result: 'allow', tenant: 'acme', user: 'bob', acl: RULES } };
  if (username === 'noacl') return { json: { result: 'allow', tenant: 'acme', user: 'noacl' } };
  if (username.startsWith('dev-')) return { json: { result: 'allow', tenant: 'fleet', user: username } };
  if (username === 'slow') return { delayMs: 3000, json: { result: 'allow', tenant: 'acme', user: 'slow' } };
  if (username === 'err500') return { status: 500, json: { error: 'boom' } };
  if (username === 'garbage') return { raw: '{"result": "allow", "tenant": ' };
  if (username === 'ignored') return { json: { result: 'ignore' } };
  return { json: { result: 'deny', reason: 'notAuthorized', message: 'not on the list' } };
};

let work: string;
let pluginsDir: string;
let service: AuthService;
let tlsService: AuthService;
let certs: TestCerts;
let main: TestBroker;
const brokers: TestBroker[] = [];

/** What the recording ACL saw at connect, by client id. */
interface Seen {
  readonly tenantId: string;
  readonly userId: string;
  readonly attrs: Record<string, string>;
}
function seen(): Map<string, Seen> {
  return ((globalThis as { __authHttpE2eSeen?: Map<string, Seen> }).__authHttpE2eSeen ??= new Map());
}

/** Requests the service received for a client id. */
function requestsFor(clientId: string, svc: AuthService = service): number {
  return svc.requests.filter((r) => (r.body as { clientId?: string } | undefined)?.clientId === clientId).length;
}

function authEntry(options: Record<string, unknown>): string {
  return ["    - use: '@bifro/plugin-auth-http'", `      options: ${JSON.stringify(options)}`].join('\n');
}

async function broker(auth: Record<string, unknown>[], withAcl = true): Promise<TestBroker> {
  const yaml = [
    'plugins:',
    '  auth:',
    ...auth.map(authEntry),
    ...(withAcl ? ['  acl:', "    - use: '@e2e/auth-http-recorder'", "    - use: '@bifro/plugin-auth-http'"] : []),
  ].join('\n');
  const tb = await startTestBroker(yaml, { pluginsDir });
  brokers.push(tb);
  return tb;
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  const dist = path.join(REPO, 'plugins', 'auth-http', 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error(`${dist} is missing: build first (npx tsc -b)`);
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-auth-http-'));
  pluginsDir = path.join(work, 'plugins');
  mkdirSync(path.join(pluginsDir, 'auth-http'), { recursive: true });
  cpSync(path.join(REPO, 'plugins', 'auth-http', 'package.json'), path.join(pluginsDir, 'auth-http', 'package.json'));
  cpSync(path.join(REPO, 'plugins', 'auth-http', 'dist'), path.join(pluginsDir, 'auth-http', 'dist'), { recursive: true });
  // An ACL that records who connected (identity and attrs) and has no opinion.
  const recorder = path.join(pluginsDir, 'recorder');
  mkdirSync(recorder);
  writeFileSync(
    path.join(recorder, 'package.json'),
    JSON.stringify({ name: '@e2e/auth-http-recorder', version: '1.0.0', main: 'index.js', bifro: { kinds: ['acl'], spi: '^1.0.0' } }),
  );
  writeFileSync(
    path.join(recorder, 'index.js'),
    [
      "'use strict';",
      'module.exports = { acl: () => ({ checkPermission(client, action) {',
      "  if (action.type === 'connect') {",
      '    const seen = (globalThis.__authHttpE2eSeen ??= new Map());',
      '    seen.set(client.clientId, { tenantId: client.tenantId, userId: client.userId, attrs: { ...client.attrs } });',
      '  }',
      "  return 'defer';",
      '} }) };',
    ].join('\n'),
  );

  certs = createTestCerts();
  service = await startService({ handler: serviceHandler });
  tlsService = await startService({ handler: serviceHandler, https: { cert: certs.server.certPem, key: certs.server.keyPem } });
  main = await broker([
    {
      url: `${service.origin}/mqtt/auth`,
      timeoutMs: 1000,
      pool: { connections: 4 },
      cache: { allowTtlMs: 60000, denyTtlMs: 1500 },
    },
  ]);
});

afterAll(async () => {
  for (const tb of brokers.splice(0)) await tb.stop();
  await service?.close();
  await tlsService?.close();
  certs?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

function protocol(v: ProtocolVersion): { protocolVersion: ProtocolVersion; protocolId: 'MQTT' | 'MQIsdp' } {
  return { protocolVersion: v, protocolId: v === 3 ? 'MQIsdp' : 'MQTT' };
}

async function attempt(
  clients: ClientRegistry,
  username: string,
  password: string,
  v: ProtocolVersion = 5,
  clientId = uniqueName(username),
): Promise<ConnectResult> {
  return clients.tryMqtt({ ...protocol(v), clientId, username, password, connectTimeout: 4000 });
}

function codeOf(r: ConnectResult): number | undefined {
  return r.connack !== undefined ? (r.connack.reasonCode ?? r.connack.returnCode) : r.error?.code;
}

/** A publish from one connected client reaches another: the broker still serves. */
async function othersServed(clients: ClientRegistry, port: number): Promise<void> {
  const sub = await clients.mqtt({ port, clientId: uniqueName('witness-sub'), username: 'bob', password: 'x' });
  const messages = collect(sub.client);
  await sub.client.subscribeAsync('acme/bob/witness', { qos: 1 });
  const pub = await clients.mqtt({ port, clientId: uniqueName('witness-pub'), username: 'bob', password: 'x' });
  await pub.client.publishAsync('acme/bob/witness', 'still here', { qos: 1 });
  expect((await messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['still here']);
}

describe('auth-http in a broker: authentication', () => {
  const clients = withClients(() => main.port);

  it('allow: the session gets the tenant, user and attrs of the answer', async () => {
    const clientId = uniqueName('alice');
    const r = await attempt(clients, 'alice', 's3cret', 5, clientId);
    expect(codeOf(r)).toBe(0);
    const s = seen().get(clientId);
    expect(s).toMatchObject({ tenantId: 'acme', userId: 'alice', attrs: { role: 'admin', plan: 'gold' } });
    expect(JSON.parse(s!.attrs['bifro.acl']!)).toEqual(RULES);
    expect(main.broker.tenantMetrics('acme').connections).toBeGreaterThanOrEqual(1);
    const req = service.requests.find((q) => (q.body as { clientId?: string }).clientId === clientId)!;
    expect(req.url).toBe('/mqtt/auth');
    expect(req.body).toMatchObject({
      clientId,
      username: 'alice',
      password: 's3cret',
      remoteAddress: '127.0.0.1',
      listener: 'tcp',
      protocolVersion: '5',
    });
  });

  it.each([
    [5, 'alice', 'wrong', 0x86],
    [5, 'mallory', 'x', 0x87],
    [4, 'alice', 'wrong', 4],
    [4, 'mallory', 'x', 5],
    [3, 'mallory', 'x', 5],
  ] as const)('deny: v%i %s (password %s) is refused with %i, and other clients are served', async (v, username, password, code) => {
    const r = await attempt(clients, username, password, v);
    expect(r.connack).toBeUndefined();
    expect(codeOf(r)).toBe(code);
    expect(await waitUntil(() => r.client.connected === false)).toBe(true);
    await othersServed(clients, main.port);
  });

  it('ignore: no provider accepts, so the client is refused 0x87 (v3 5)', async () => {
    expect(codeOf(await attempt(clients, 'ignored', 'x', 5))).toBe(0x87);
    expect(codeOf(await attempt(clients, 'ignored', 'x', 4))).toBe(5);
  });

  it('slow service: refused 0x80 (v3 3) after timeoutMs, while the broker keeps serving other clients', async () => {
    const started = Date.now();
    let slowDoneAt = 0;
    const slow5 = attempt(clients, 'slow', 'x', 5).then((r) => ((slowDoneAt = Date.now()), r));
    const slow4 = attempt(clients, 'slow', 'x', 4);
    // Meanwhile: a new client connects and messages flow.
    const alice = await attempt(clients, 'alice', 's3cret', 5);
    expect(codeOf(alice)).toBe(0);
    const aliceAt = Date.now();
    await othersServed(clients, main.port);
    const [r5, r4] = await Promise.all([slow5, slow4]);
    expect(codeOf(r5)).toBe(0x80);
    expect(codeOf(r4)).toBe(3);
    expect(aliceAt).toBeLessThan(slowDoneAt);
    expect(slowDoneAt - started).toBeGreaterThanOrEqual(950);
    expect(slowDoneAt - started).toBeLessThan(2900); // the service would answer at 3000
    expect(
      main.logs.some((l) => String(l.msg).includes('BIFRO_AUTH_HTTP_SERVICE_FAILED') && String(l.msg).includes('no answer within 1000 ms')),
    ).toBe(true);
  });

  it('HTTP 500: refused 0x80 (v3 3), not cached, other clients served', async () => {
    const clientId = uniqueName('err500');
    expect(codeOf(await attempt(clients, 'err500', 'x', 5, clientId))).toBe(0x80);
    expect(codeOf(await attempt(clients, 'err500', 'x', 4, clientId))).toBe(3);
    expect(requestsFor(clientId)).toBe(2);
    await othersServed(clients, main.port);
  });

  it('malformed JSON: refused 0x80 (v3 3), logged as BIFRO_AUTH_HTTP_ANSWER_INVALID, other clients served', async () => {
    expect(codeOf(await attempt(clients, 'garbage', 'x', 5))).toBe(0x80);
    expect(codeOf(await attempt(clients, 'garbage', 'x', 3))).toBe(3);
    expect(main.logs.some((l) => String(l.msg).startsWith('BIFRO_AUTH_HTTP_ANSWER_INVALID: @bifro/plugin-auth-http'))).toBe(true);
    await othersServed(clients, main.port);
  });

  it('cache: a second CONNECT with the same credentials does not call the service', async () => {
    const clientId = uniqueName('alice-cached');
    const first = await attempt(clients, 'alice', 's3cret', 5, clientId);
    expect(codeOf(first)).toBe(0);
    first.client.end(true);
    await waitUntil(() => main.broker.openConnections() === 0 || !first.client.connected);
    const second = await attempt(clients, 'alice', 's3cret', 5, clientId);
    expect(codeOf(second)).toBe(0);
    expect(requestsFor(clientId)).toBe(1);
    // another password is another key: asked (and refused)
    expect(codeOf(await attempt(clients, 'alice', 'wrong', 5, clientId))).toBe(0x86);
    expect(requestsFor(clientId)).toBe(2);
  });

  it('cache: a deny is cached for denyTtlMs (1500 ms), then asked again', async () => {
    const clientId = uniqueName('mallory-cached');
    const firstAt = Date.now();
    expect(codeOf(await attempt(clients, 'mallory', 'x', 5, clientId))).toBe(0x87);
    expect(codeOf(await attempt(clients, 'mallory', 'x', 5, clientId))).toBe(0x87);
    expect(Date.now() - firstAt).toBeLessThan(1500);
    expect(requestsFor(clientId)).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1550 - (Date.now() - firstAt)));
    expect(codeOf(await attempt(clients, 'mallory', 'x', 5, clientId))).toBe(0x87);
    expect(requestsFor(clientId)).toBe(2);
  });

  it('keep-alive: 40 CONNECTs at once reuse at most pool.connections (4) TCP connections to the service', async () => {
    const before = service.connections();
    const asked = service.requests.length;
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => attempt(clients, `dev-${i}-${uniqueName('k')}`, 'p', 5)));
    expect(results.map(codeOf)).toEqual(Array.from({ length: 40 }, () => 0));
    expect(service.requests.length - asked).toBe(40);
    const opened = service.connections() - before;
    expect(opened).toBeLessThanOrEqual(4);
    expect(main.broker.tenantMetrics('fleet').connections).toBeGreaterThanOrEqual(40);
  });
});

describe('auth-http in a broker: ACL rules from the answer', () => {
  const clients = withClients(() => main.port);

  async function user(name: string, v: ProtocolVersion = 5): Promise<MqttClient> {
    return (await clients.mqtt({ ...protocol(v), clientId: uniqueName(name), username: name, password: name === 'alice' ? 's3cret' : 'x' }))
      .client;
  }

  async function subackCodes(name: string, v: ProtocolVersion, filters: string[]): Promise<number[]> {
    const s = await clients.raw({
      protocolVersion: v,
      clientId: uniqueName(name),
      username: name,
      password: Buffer.from(name === 'alice' ? 's3cret' : 'x'),
    });
    expect(s.connack.returnCode ?? s.connack.reasonCode).toBe(0);
    s.send({ cmd: 'subscribe', messageId: 7, subscriptions: filters.map((topic) => ({ topic, qos: 1 })) } as Packet);
    return (await expectPacket(s.raw, 'suback')).granted as number[];
  }

  it('PUBLISH: granted topics are delivered; others get v5 PUBACK 0x87 and reach nobody; the connection goes on', async () => {
    const watcher = await user('alice');
    const messages = collect(watcher);
    await watcher.subscribeAsync('acme/alice/#', { qos: 1 });
    const spy = await user('bob');
    const spied = collect(spy);
    await spy.subscribeAsync('acme/bob/#', { qos: 1 });

    const alice = await user('alice');
    await alice.publishAsync('acme/alice/temp', '21', { qos: 1 });
    await expect(alice.publishAsync('acme/bob/temp', 'spoof', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await expect(alice.publishAsync('acme/secret/x', 'leak', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    expect(alice.connected).toBe(true);
    await alice.publishAsync('acme/alice/after', 'ok', { qos: 1 });
    expect((await messages.waitFor(2)).map((m) => m.topic)).toEqual(['acme/alice/temp', 'acme/alice/after']);
    expect(await spied.settle(QUIET_MS)).toEqual([]);
  });

  it('SUBSCRIBE: SUBACK 0x87 (v5) / 0x80 (v3) for the denied filters only', async () => {
    expect(await subackCodes('alice', 5, ['acme/alice/#', 'acme/public/news', 'acme/bob/#', 'acme/secret/#', '#'])).toEqual([
      1, 1, 0x87, 0x87, 0x87,
    ]);
    expect(await subackCodes('alice', 4, ['acme/alice/#', 'acme/bob/#'])).toEqual([1, 0x80]);
    const alice = await user('alice');
    await expect(alice.subscribeAsync('acme/secret/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
  });

  it('UNSUBSCRIBE of a client with rules is granted (v5 UNSUBACK 0x00) and the subscription goes', async () => {
    const s = await clients.raw({ protocolVersion: 5, clientId: uniqueName('alice'), username: 'alice', password: Buffer.from('s3cret') });
    s.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'acme/alice/u', qos: 1 }] } as Packet);
    expect((await expectPacket(s.raw, 'suback')).granted).toEqual([1]);
    s.send({ cmd: 'unsubscribe', messageId: 2, unsubscriptions: ['acme/alice/u'] } as Packet);
    expect((await expectPacket(s.raw, 'unsuback')).granted).toEqual([0x00]);
    const alice = await user('alice');
    await alice.publishAsync('acme/alice/u', 'after', { qos: 1 });
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
    expect(s.raw.packets.filter((p) => p.cmd === 'publish')).toEqual([]);
  });

  it('%t %u are the identity the answer named; another user of the tenant gets its own topics', async () => {
    expect(await subackCodes('bob', 5, ['acme/bob/#', 'acme/alice/#'])).toEqual([1, 0x87]);
  });

  it('an answer without rules: publish and subscribe are denied (the acl defers, the chain denies)', async () => {
    const c = await user('noacl');
    await expect(c.publishAsync('acme/noacl/x', 'x', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    expect(await subackCodes('noacl', 5, ['acme/noacl/#'])).toEqual([0x87]);
  });
});

describe('auth-http in a broker: service down, fail open, TLS', () => {
  const clients = withClients(() => 0);

  async function connectTo(tb: TestBroker, username: string, password: string, v: ProtocolVersion = 5): Promise<ConnectResult> {
    const r = await tryConnect(tb.port, {
      ...protocol(v),
      clientId: uniqueName(username),
      username,
      password,
      reconnectPeriod: 0,
      connectTimeout: 4000,
    });
    clients.track(r.client);
    return r;
  }

  it('service down (connection refused): refused 0x80 (v3 3), fail closed', async () => {
    const tb = await broker([{ url: `http://127.0.0.1:${await closedPort()}/auth` }]);
    expect(codeOf(await connectTo(tb, 'alice', 's3cret', 5))).toBe(0x80);
    expect(codeOf(await connectTo(tb, 'alice', 's3cret', 4))).toBe(3);
    expect(tb.logs.some((l) => String(l.msg).includes('connection refused'))).toBe(true);
  });

  it('failOpen: a service that is down passes the client to the next provider', async () => {
    const asked = service.requests.length;
    const tb = await broker([
      { url: `http://127.0.0.1:${await closedPort()}/auth`, failOpen: true },
      { url: `${service.origin}/fallback` },
    ]);
    expect(codeOf(await connectTo(tb, 'alice', 's3cret', 5))).toBe(0);
    expect(codeOf(await connectTo(tb, 'mallory', 'x', 5))).toBe(0x87);
    expect(service.requests.slice(asked).map((r) => r.url)).toEqual(['/fallback', '/fallback']);
    // alone, fail open means "no opinion": nobody accepts, 0x87
    const alone = await broker([{ url: `http://127.0.0.1:${await closedPort()}/auth`, failOpen: true }]);
    expect(codeOf(await connectTo(alone, 'alice', 's3cret', 5))).toBe(0x87);
  });

  it('TLS to the service with a test CA; another CA is refused 0x80', async () => {
    writeFileSync(path.join(work, 'ca.pem'), certs.ca.certPem);
    const ok = await broker([{ url: `${tlsService.origin}/auth`, tls: { ca: path.join(work, 'ca.pem') } }]);
    expect(codeOf(await connectTo(ok, 'alice', 's3cret', 5))).toBe(0);
    expect(tlsService.requests.length).toBe(1);
    const wrong = await broker([{ url: `${tlsService.origin}/auth`, tls: { ca: certs.otherCa.cert } }]);
    expect(codeOf(await connectTo(wrong, 'alice', 's3cret', 5))).toBe(0x80);
    expect(tlsService.requests.length).toBe(1);
    expect(wrong.logs.some((l) => String(l.msg).includes('TLS failure'))).toBe(true);
  });

  it('a bad option stops the start with the coded error naming the key', async () => {
    await expect(broker([{ url: `${service.origin}/auth`, timeoutMs: 'soon' }])).rejects.toThrow(
      /BIFRO_AUTH_HTTP_OPTIONS_INVALID: @bifro\/plugin-auth-http: options.timeoutMs must be an integer/,
    );
  });
});
