import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { CryptoKey, JWK, JWTPayload } from 'jose' with { 'resolution-mode': 'import' };
import type { IAuthPacket, IConnackPacket, IDisconnectPacket, IPubackPacket, ISubackPacket, Packet } from 'mqtt-packet';
import { loadJose, type JoseModule } from '../../plugins/auth-jwt/src/jose';
import {
  collect,
  expectPacket,
  uniqueName,
  withClients,
  type ClientRegistry,
  type ConnectResult,
  type ProtocolVersion,
} from '../support/mqtt-helpers';
import { RawClient } from '../support/raw-client';
import { REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * @bifro/plugin-auth-jwt in a real broker with MQTT.js and raw clients, against a real JWKS
 * endpoint (node:http on 127.0.0.1, counting its requests; a test changes its keys or takes it
 * down). The plugin is loaded from its build (`npx tsc -b` first), copied into a plugins folder
 * with its `jose` dependency, next to an ACL that records who connected and defers. Tokens are
 * signed by the test with jose; the JWT `exp` is checked against the real clock at CONNECT, the
 * session's end against the broker's clock (moved forward by the tests).
 */

jest.setTimeout(60000);

const ISSUER = 'https://idp.e2e.test';
const AUDIENCE = 'bifro-e2e';
const RULES = [
  { permission: 'deny', action: 'retain', topic: '%t/%u/no-retain' },
  { permission: 'allow', action: 'all', topic: '%t/%u/#' },
  { permission: 'allow', action: 'subscribe', topic: '%t/public/#' },
];

let jose: JoseModule;
let work: string;
let pluginsDir: string;
const brokers: TestBroker[] = [];
const servers: JwksServer[] = [];

/** A signing key and the public JWK the JWKS serves for it. */
interface Key {
  readonly kid: string;
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}

let keys = 0;
async function newKey(alg = 'ES256'): Promise<Key> {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg);
  const kid = `e2e-${alg}-${++keys}`;
  return { kid, alg, privateKey, jwk: { ...(await jose.exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

/** A token signed by `key` for user alice of tenant acme (with the ACL rules), valid `ttl` seconds; `claims` override. */
async function token(key: Key, claims: JWTPayload = {}, ttl = 300, kid = key.kid): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new jose.SignJWT({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: 'alice',
    tenant: 'acme',
    role: 'admin',
    acl: RULES,
    iat: now,
    exp: now + ttl,
    ...claims,
  })
    .setProtectedHeader({ alg: key.alg, kid })
    .sign(key.privateKey);
}

/** A JWKS endpoint on 127.0.0.1: serves `keys`, 503 while `up` is false, counts requests. */
class JwksServer {
  keys: JWK[] = [];
  up = true;
  requests = 0;
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(keys: JWK[]): Promise<JwksServer> {
    const holder: { s?: JwksServer } = {};
    const server = http.createServer((_req, res) => {
      const s = holder.s!;
      s.requests++;
      if (!s.up) res.writeHead(503).end('down for maintenance');
      else res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(JSON.stringify({ keys: s.keys }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const s = new JwksServer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`);
    s.keys = keys;
    holder.s = s;
    servers.push(s);
    return s;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }
}

/** What the recording ACL saw at connect, by client id. */
interface Seen {
  readonly tenantId: string;
  readonly userId: string;
  readonly attrs: Record<string, string>;
}
function seen(): Map<string, Seen> {
  return ((globalThis as { __authJwtE2eSeen?: Map<string, Seen> }).__authJwtE2eSeen ??= new Map());
}

/** A broker whose auth is the JWT plugin with these options (merged over the JWKS defaults), and whose ACL is recorder + JWT acl (standalone). */
async function broker(options: Record<string, unknown>): Promise<TestBroker> {
  const auth = { issuer: ISSUER, audience: AUDIENCE, clockSkewSeconds: 0, attrsClaims: ['role'], ...options };
  const yaml = [
    'plugins:',
    '  auth:',
    "    - use: '@bifro/plugin-auth-jwt'",
    `      options: ${JSON.stringify(auth)}`,
    '  acl:',
    "    - use: '@e2e/auth-jwt-recorder'",
    "    - use: '@bifro/plugin-auth-jwt'",
    '      options: { standalone: true }',
    // Every attempt here comes from 127.0.0.1 as user "ignored": no back-off of password guessing (test 54 covers it).
    'security:',
    '  loginFailures: { perLogin: 0, perAddress: 0 }',
  ].join('\n');
  const tb = await startTestBroker(yaml, { pluginsDir });
  brokers.push(tb);
  return tb;
}

function protocol(v: ProtocolVersion): { protocolVersion: ProtocolVersion; protocolId: 'MQTT' | 'MQIsdp' } {
  return { protocolVersion: v, protocolId: v === 3 ? 'MQIsdp' : 'MQTT' };
}

function attempt(clients: ClientRegistry, password: string, v: ProtocolVersion = 5, clientId = uniqueName('jwt')): Promise<ConnectResult> {
  return clients.tryMqtt({ ...protocol(v), clientId, username: 'ignored', password, connectTimeout: 4000 });
}

function codeOf(r: ConnectResult): number | undefined {
  return r.connack !== undefined ? (r.connack.reasonCode ?? r.connack.returnCode) : r.error?.code;
}

/** A raw v5 (or v4) CONNECT with the token as the password, or as Authentication Data of method `method`. */
async function rawConnect(
  tb: TestBroker,
  opts: { password?: string; method?: string; data?: string; version?: 4 | 5; clientId?: string },
): Promise<RawClient> {
  const version = opts.version ?? 5;
  const c = await RawClient.connect(tb.port, version);
  raws.push(c);
  c.send(
    {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: version,
      clientId: opts.clientId ?? uniqueName('raw-jwt'),
      clean: true,
      keepalive: 0,
      ...(opts.password === undefined ? {} : { username: 'ignored', password: Buffer.from(opts.password) }),
      ...(opts.method === undefined
        ? {}
        : {
            properties: {
              authenticationMethod: opts.method,
              ...(opts.data === undefined ? {} : { authenticationData: Buffer.from(opts.data) }),
            },
          }),
    },
    version,
  );
  return c;
}
const raws: RawClient[] = [];

async function connack(c: RawClient): Promise<IConnackPacket> {
  return expectPacket(c, 'connack');
}

beforeAll(async () => {
  const dist = path.join(REPO, 'plugins', 'auth-jwt', 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error(`${dist} is missing: build first (npx tsc -b)`);
  jose = await loadJose();
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-auth-jwt-'));
  pluginsDir = path.join(work, 'plugins');
  const plugin = path.join(pluginsDir, 'auth-jwt');
  mkdirSync(path.join(plugin, 'node_modules'), { recursive: true });
  cpSync(path.join(REPO, 'plugins', 'auth-jwt', 'package.json'), path.join(plugin, 'package.json'));
  cpSync(path.join(REPO, 'plugins', 'auth-jwt', 'dist'), path.join(plugin, 'dist'), { recursive: true });
  // Its runtime dependency, where `bifro plugin install` puts it: the plugin's own node_modules.
  symlinkSync(path.join(REPO, 'node_modules', 'jose'), path.join(plugin, 'node_modules', 'jose'), 'dir');
  const recorder = path.join(pluginsDir, 'recorder');
  mkdirSync(recorder);
  writeFileSync(
    path.join(recorder, 'package.json'),
    JSON.stringify({ name: '@e2e/auth-jwt-recorder', version: '1.0.0', main: 'index.js', bifro: { kinds: ['acl'], spi: '^1.0.0' } }),
  );
  writeFileSync(
    path.join(recorder, 'index.js'),
    [
      "'use strict';",
      'module.exports = { acl: () => ({ checkPermission(client, action) {',
      "  if (action.type === 'connect') {",
      '    const seen = (globalThis.__authJwtE2eSeen ??= new Map());',
      '    seen.set(client.clientId, { tenantId: client.tenantId, userId: client.userId, attrs: { ...client.attrs } });',
      '  }',
      "  return 'defer';",
      '} }) };',
    ].join('\n'),
  );
});

afterEach(() => {
  for (const c of raws.splice(0)) c.destroy();
});

afterAll(async () => {
  for (const tb of brokers.splice(0)) await tb.stop();
  for (const s of servers.splice(0)) await s.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('auth-jwt in a broker: tokens as the password (JWKS URL)', () => {
  let tb: TestBroker;
  let jwks: JwksServer;
  let es: Key;
  let ed: Key;
  let rs: Key;
  const clients = withClients(() => tb.port);

  beforeAll(async () => {
    [es, ed, rs] = [await newKey('ES256'), await newKey('EdDSA'), await newKey('RS256')];
    jwks = await JwksServer.start([es.jwk, ed.jwk, rs.jwk]);
    tb = await broker({ jwksUrl: jwks.url });
  });

  /** A publish from one connected client reaches another: the broker still serves. */
  async function othersServed(): Promise<void> {
    const sub = await clients.mqtt({
      ...protocol(5),
      username: 'ignored',
      clientId: uniqueName('witness-sub'),
      password: await token(es, { sub: 'witness' }),
    });
    const messages = collect(sub.client);
    await sub.client.subscribeAsync('acme/witness/ping', { qos: 1 });
    const pub = await clients.mqtt({
      ...protocol(5),
      username: 'ignored',
      clientId: uniqueName('witness-pub'),
      password: await token(es, { sub: 'witness' }),
    });
    await pub.client.publishAsync('acme/witness/ping', 'still here', { qos: 1 });
    expect((await messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['still here']);
  }

  it.each([5, 4, 3] as const)('MQTT %s: accepted; tenant, user and attrs come from the claims', async (v) => {
    for (const key of [es, ed, rs]) {
      const clientId = uniqueName(`ok-v${v}-${key.alg}`);
      const r = await attempt(clients, await token(key, { sub: `user-${v}`, tenant: 'globex' }), v, clientId);
      expect(codeOf(r)).toBe(0);
      const s = seen().get(clientId);
      expect(s).toMatchObject({ tenantId: 'globex', userId: `user-${v}`, attrs: { role: 'admin' } });
      expect(JSON.parse(s!.attrs['bifro.acl']!)).toEqual(RULES);
    }
    expect(tb.broker.tenantMetrics('globex').connections).toBeGreaterThanOrEqual(1);
  });

  it('refused: wrong audience or issuer (v5 0x87, v3 5), expired or tampered (v5 0x86, v3 4); others unaffected', async () => {
    const wrongAud = await token(es, { aud: 'another-service' });
    const wrongIss = await token(es, { iss: 'https://evil.test' });
    const expired = await token(es, {}, -60);
    const good = await token(es);
    const tampered = `${good.slice(0, -4)}${good.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    for (const [password, v5, v3] of [
      [wrongAud, 0x87, 5],
      [wrongIss, 0x87, 5],
      [expired, 0x86, 4],
      [tampered, 0x86, 4],
    ] as const) {
      expect(codeOf(await attempt(clients, password, 5))).toBe(v5);
      expect(codeOf(await attempt(clients, password, 4))).toBe(v3);
    }
    await othersServed();
  });

  it('a password that is not a JWT is not this provider’s: alone in the chain, the client is refused 0x87 / v3 5', async () => {
    expect(codeOf(await attempt(clients, 'hunter2', 5))).toBe(0x87);
    expect(codeOf(await attempt(clients, 'hunter2', 4))).toBe(5);
    const none = await clients.tryMqtt({ ...protocol(5), clientId: uniqueName('nopass'), connectTimeout: 4000 });
    expect(codeOf(none)).toBe(0x87);
  });

  it('malformed tokens (garbage, alg none, a huge token) are refused 0x86 and other connections are unaffected', async () => {
    const held = await clients.mqtt({
      ...protocol(5),
      username: 'ignored',
      clientId: uniqueName('held'),
      password: await token(es, { sub: 'held' }),
    });
    const b64 = (o: object): string => Buffer.from(JSON.stringify(o)).toString('base64url');
    const unsigned = `${b64({ alg: 'none' })}.${b64({ iss: ISSUER, aud: AUDIENCE, sub: 'mallory', tenant: 'acme', exp: 9999999999 })}.`;
    const garbage = `${b64({ alg: 'ES256', kid: es.kid })}.${Buffer.from('not json at all').toString('base64url')}.AAAA`;
    const huge = await token(es, { pad: 'x'.repeat(20000) });
    for (const password of [unsigned, garbage, huge]) expect(codeOf(await attempt(clients, password, 5))).toBe(0x86);
    expect(held.client.connected).toBe(true);
    const messages = collect(held.client);
    await held.client.subscribeAsync('acme/held/x', { qos: 1 });
    await held.client.publishAsync('acme/held/x', 'ok', { qos: 1 });
    expect((await messages.waitFor(1)).map((m) => m.payload.toString())).toEqual(['ok']);
  });

  it('ACL rules from the claims: allowed topics flow, PUBACK 0x87 / SUBACK 0x87 (v3 0x80) for the others', async () => {
    const pw = await token(es, { sub: 'carol' });
    const sub = await clients.mqtt({ ...protocol(5), username: 'ignored', clientId: uniqueName('carol-sub'), password: pw });
    const messages = collect(sub.client);
    await sub.client.subscribeAsync('acme/carol/#', { qos: 1 });
    await expect(sub.client.subscribeAsync('acme/dave/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    await expect(sub.client.subscribeAsync('acme/public/news', { qos: 1 })).resolves.toBeDefined();
    const pub = await rawConnect(tb, { password: pw });
    expect((await connack(pub)).reasonCode).toBe(0);
    const puback = async (topic: string, id: number, retain = false): Promise<number | undefined> => {
      pub.send({ cmd: 'publish', topic, payload: Buffer.from(topic), qos: 1, messageId: id, retain, dup: false } as Packet, 5);
      return ((await expectPacket(pub, 'puback')) as IPubackPacket).reasonCode;
    };
    expect(await puback('acme/carol/temp', 1)).toBe(0);
    expect(await puback('acme/dave/temp', 2)).toBe(0x87);
    expect(await puback('acme/public/news', 3)).toBe(0x87); // subscribe only
    expect(await puback('acme/carol/no-retain', 4, true)).toBe(0x87); // retain denied
    expect((await messages.waitFor(1)).map((m) => m.topic)).toEqual(['acme/carol/temp']);
    const v3 = await clients.mqtt({ ...protocol(4), username: 'ignored', clientId: uniqueName('carol-v3'), password: pw });
    await expect(v3.client.subscribeAsync('acme/dave/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x80] } });
    const s = await rawConnect(tb, { password: pw });
    expect((await connack(s)).reasonCode).toBe(0);
    s.send(
      {
        cmd: 'subscribe',
        messageId: 9,
        subscriptions: [
          { topic: 'acme/carol/a', qos: 1 },
          { topic: '#', qos: 1 },
        ],
      } as Packet,
      5,
    );
    expect(((await expectPacket(s, 'suback')) as ISubackPacket).granted).toEqual([1, 0x87]);
  });
});

describe('auth-jwt in a broker: the JWKS', () => {
  const clients = withClients(() => current.port);
  let current: TestBroker;

  it('key rotation: a token signed with a new key (new kid) is accepted after the refresh on the unknown kid', async () => {
    const old = await newKey();
    const jwks = await JwksServer.start([old.jwk]);
    current = await broker({ jwksUrl: jwks.url, jwks: { cooldownMs: 0 } });
    expect(jwks.requests).toBe(1); // fetched at start
    expect(codeOf(await attempt(clients, await token(old)))).toBe(0);
    const next = await newKey();
    const early = await token(next);
    jwks.keys = [old.jwk, next.jwk];
    expect(codeOf(await attempt(clients, early))).toBe(0);
    expect(jwks.requests).toBe(2);
    // The old key leaves the set: once the cache is refreshed (here for a third key) its tokens are refused.
    const third = await newKey();
    jwks.keys = [next.jwk, third.jwk];
    expect(codeOf(await attempt(clients, await token(third)))).toBe(0);
    expect(codeOf(await attempt(clients, await token(old)))).toBe(0x86);
  });

  it('the refresh on unknown kids is rate limited: 30 such CONNECTs cost no fetch within the cooldown, and are refused 0x86', async () => {
    const key = await newKey();
    const jwks = await JwksServer.start([key.jwk]);
    current = await broker({ jwksUrl: jwks.url, jwks: { cooldownMs: 60000 } });
    expect(jwks.requests).toBe(1);
    const strangers = await Promise.all(Array.from({ length: 30 }, (_, i) => token(key, {}, 300, `unknown-${i}`)));
    const results = await Promise.all(strangers.map((pw) => attempt(clients, pw)));
    expect(results.map(codeOf)).toEqual(strangers.map(() => 0x86));
    expect(jwks.requests).toBe(1);
    expect(codeOf(await attempt(clients, await token(key)))).toBe(0);
  });

  it('after the cooldown, many CONNECTs with unknown kids share one fetch', async () => {
    const key = await newKey();
    const jwks = await JwksServer.start([key.jwk]);
    current = await broker({ jwksUrl: jwks.url, jwks: { cooldownMs: 300 } });
    await new Promise((resolve) => setTimeout(resolve, 400));
    const before = jwks.requests;
    const strangers = await Promise.all(Array.from({ length: 20 }, (_, i) => token(key, {}, 300, `stranger-${i}`)));
    const results = await Promise.all(strangers.map((pw) => attempt(clients, pw)));
    expect(results.map(codeOf)).toEqual(strangers.map(() => 0x86));
    expect(jwks.requests - before).toBe(1);
  });

  it('JWKS down: clients are refused 0x80 / v3 3 (fail closed), logged with BIFRO_AUTH_JWT_JWKS_UNAVAILABLE; accepted once it is back', async () => {
    const key = await newKey();
    const jwks = await JwksServer.start([key.jwk]);
    jwks.up = false;
    current = await broker({ jwksUrl: jwks.url, jwks: { failureBackoffMs: 0 } });
    const pw = await token(key);
    expect(codeOf(await attempt(clients, pw, 5))).toBe(0x80);
    expect(codeOf(await attempt(clients, pw, 4))).toBe(3);
    expect(current.logs.some((l) => String(l.msg).startsWith('BIFRO_AUTH_JWT_JWKS_UNAVAILABLE'))).toBe(true);
    jwks.up = true;
    expect(codeOf(await attempt(clients, pw, 5))).toBe(0);
  });

  it('a JWKS that cannot be reached at all (closed port) refuses 0x80 within the call timeout', async () => {
    const key = await newKey();
    const jwks = await JwksServer.start([]);
    await jwks.stop();
    current = await broker({ jwksUrl: jwks.url, jwks: { timeoutMs: 500 } });
    const started = Date.now();
    expect(codeOf(await attempt(clients, await token(key)))).toBe(0x80);
    expect(Date.now() - started).toBeLessThan(4000);
  });
});

describe('auth-jwt in a broker: MQTT 5 enhanced authentication and the end of the session', () => {
  let tb: TestBroker;
  let key: Key;
  let jwks: JwksServer;

  beforeAll(async () => {
    key = await newKey();
    jwks = await JwksServer.start([key.jwk]);
  });
  // A broker per test: each moves the broker's clock from the real time.
  beforeEach(async () => {
    tb = await broker({ jwksUrl: jwks.url });
  });
  afterEach(async () => {
    for (const c of raws.splice(0)) c.destroy();
    brokers.splice(brokers.indexOf(tb), 1);
    await tb.stop();
  });

  it('the token as Authentication Data (method JWT): CONNACK 0 with the method; a bad token 0x86; another method 0x8C', async () => {
    const clientId = uniqueName('ea-ok');
    const ok = await rawConnect(tb, { method: 'JWT', data: await token(key, { sub: 'erin' }), clientId });
    const ack = await connack(ok);
    expect(ack.reasonCode).toBe(0);
    expect(ack.properties?.authenticationMethod).toBe('JWT');
    expect(seen().get(clientId)).toMatchObject({ tenantId: 'acme', userId: 'erin' });
    const bad = await rawConnect(tb, { method: 'JWT', data: await token(key, {}, -60) });
    expect((await connack(bad)).reasonCode).toBe(0x86);
    expect(await bad.waitClosed()).toBe(true);
    const empty = await rawConnect(tb, { method: 'JWT' });
    expect((await connack(empty)).reasonCode).toBe(0x86);
    const other = await rawConnect(tb, { method: 'SCRAM-SHA-256', data: 'x' });
    expect((await connack(other)).reasonCode).toBe(0x8c);
    ok.send({ cmd: 'pingreq' }, 5);
    expect((await ok.next())?.cmd).toBe('pingresp');
  });

  it('v5: the session ends at the token expiry with DISCONNECT 0xA0, not before; another client stays', async () => {
    const c = await rawConnect(tb, { password: await token(key, { sub: 'short' }, 10) });
    const other = await rawConnect(tb, { password: await token(key, { sub: 'long' }, 3600) });
    expect((await connack(c)).reasonCode).toBe(0);
    expect((await connack(other)).reasonCode).toBe(0);
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next())?.cmd).toBe('pingresp');
    await tb.clock.advance(11000);
    const bye = (await c.next()) as IDisconnectPacket;
    expect(bye.cmd).toBe('disconnect');
    expect(bye.reasonCode).toBe(0xa0);
    expect(await c.waitClosed()).toBe(true);
    other.send({ cmd: 'pingreq' }, 5);
    expect((await other.next())?.cmd).toBe('pingresp');
  });

  it('v3: the connection is closed at the token expiry', async () => {
    const c = await rawConnect(tb, { password: await token(key, { sub: 'short3' }, 10), version: 4 });
    expect((await connack(c)).returnCode).toBe(0);
    await tb.clock.advance(11000);
    expect(await c.waitClosed()).toBe(true);
  });

  it('re-authentication (AUTH 0x19) with a fresh token keeps the session past the first expiry; another user’s token ends it (0x87)', async () => {
    const c = await rawConnect(tb, { method: 'JWT', data: await token(key, { sub: 'frank' }, 10) });
    expect((await connack(c)).reasonCode).toBe(0);
    c.send(
      {
        cmd: 'auth',
        reasonCode: 0x19,
        properties: { authenticationMethod: 'JWT', authenticationData: Buffer.from(await token(key, { sub: 'frank' }, 3600)) },
      },
      5,
    );
    const reauth = (await c.next()) as IAuthPacket;
    expect(reauth.cmd).toBe('auth');
    expect(reauth.reasonCode).toBe(0);
    await tb.clock.advance(12000); // past the first token's exp
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next())?.cmd).toBe('pingresp');
    c.send(
      {
        cmd: 'auth',
        reasonCode: 0x19,
        properties: { authenticationMethod: 'JWT', authenticationData: Buffer.from(await token(key, { sub: 'mallory' }, 3600)) },
      },
      5,
    );
    const bye = (await c.next()) as IDisconnectPacket;
    expect(bye.cmd).toBe('disconnect');
    expect(bye.reasonCode).toBe(0x87);
    expect(await c.waitClosed()).toBe(true);
  });

  it('the re-authenticated token’s exp is the new deadline: DISCONNECT 0xA0 when it passes', async () => {
    const c = await rawConnect(tb, { method: 'JWT', data: await token(key, { sub: 'jill' }, 10) });
    expect((await connack(c)).reasonCode).toBe(0);
    const renewed = await token(key, { sub: 'jill' }, 30);
    c.send({ cmd: 'auth', reasonCode: 0x19, properties: { authenticationMethod: 'JWT', authenticationData: Buffer.from(renewed) } }, 5);
    expect(((await c.next()) as IAuthPacket).reasonCode).toBe(0);
    await tb.clock.advance(12000); // past the first exp
    c.send({ cmd: 'pingreq' }, 5);
    expect((await c.next())?.cmd).toBe('pingresp');
    await tb.clock.advance(20000); // past the second one
    const bye = (await c.next()) as IDisconnectPacket;
    expect(bye.cmd).toBe('disconnect');
    expect(bye.reasonCode).toBe(0xa0);
  });

  it('a re-authentication with an expired token ends the session (0x87); the others stay', async () => {
    const c = await rawConnect(tb, { method: 'JWT', data: await token(key, { sub: 'gina' }) });
    const other = await rawConnect(tb, { method: 'JWT', data: await token(key, { sub: 'hank' }) });
    expect((await connack(c)).reasonCode).toBe(0);
    expect((await connack(other)).reasonCode).toBe(0);
    c.send(
      {
        cmd: 'auth',
        reasonCode: 0x19,
        properties: { authenticationMethod: 'JWT', authenticationData: Buffer.from(await token(key, { sub: 'gina' }, -60)) },
      },
      5,
    );
    expect(((await c.next()) as IDisconnectPacket).reasonCode).toBe(0x87);
    other.send({ cmd: 'pingreq' }, 5);
    expect((await other.next())?.cmd).toBe('pingresp');
  });
});

describe('auth-jwt in a broker: a shared secret and a key file', () => {
  const clients = withClients(() => current.port);
  let current: TestBroker;

  it('HS256 with a secret from the options', async () => {
    const secret = 'e2e-secret-which-is-long-enough-for-hs256-0123456789';
    current = await broker({ secret, algorithms: ['HS256'] });
    const now = Math.floor(Date.now() / 1000);
    const sign = (alg: string): Promise<string> =>
      new jose.SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'ivy', tenant: 'acme', exp: now + 60 })
        .setProtectedHeader({ alg })
        .sign(new TextEncoder().encode(secret));
    expect(codeOf(await attempt(clients, await sign('HS256')))).toBe(0);
    expect(codeOf(await attempt(clients, await sign('HS512')))).toBe(0x86); // not in algorithms
  });

  it('a PEM key file next to the config', async () => {
    const key = await newKey('EdDSA');
    const pemDir = mkdtempSync(path.join(work, 'pem-'));
    writeFileSync(path.join(pemDir, 'jwt.pem'), await jose.exportSPKI((await jose.importJWK(key.jwk, 'EdDSA')) as CryptoKey));
    current = await broker({ publicKeyFile: path.join(pemDir, 'jwt.pem') });
    expect(codeOf(await attempt(clients, await token(key)))).toBe(0);
    expect(codeOf(await attempt(clients, await token(await newKey('EdDSA'))))).toBe(0x86);
  });

  it('a bad option fails the broker start with the coded error naming the key', async () => {
    await expect(broker({ secret: 'short' })).rejects.toThrow(
      /BIFRO_AUTH_JWT_OPTIONS_INVALID: @bifro\/plugin-auth-jwt: options\.secret must be at least 32 bytes/,
    );
  });
});
