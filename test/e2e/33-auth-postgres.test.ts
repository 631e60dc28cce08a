import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { MqttClient } from 'mqtt';
import type { BrokerEvent, EventType } from '@bifro/spi';
import { hashPassword } from '../../plugins/auth-postgres/src/password-hash';
import type { Packet } from 'mqtt-packet';
import {
  collect,
  expectPacket,
  sleep,
  uniqueName,
  waitUntil,
  withClients,
  QUIET_MS,
  type ConnectResult,
  type ProtocolVersion,
} from '../support/mqtt-helpers';
import { startPostgres, type PostgresServer } from '../support/postgres-server';
import { FIXTURE_PLUGINS, REPO, startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * @bifro/plugin-auth-postgres in a real broker, against a real PostgreSQL
 * (test/support/postgres-server.ts) and MQTT.js clients: the plugin is the whole auth chain and
 * the whole ACL chain; users and their rules are rows. The broker logs in as a role that may only
 * SELECT, with a password (scram-sha-256). The fixture collector `@fixtures/recording-events`
 * records the events the broker reports. The plugin is loaded from its build (`npx tsc -b` first).
 */

jest.setTimeout(90_000);

const PLUGIN = '@bifro/plugin-auth-postgres';
const TTL_MS = 400;
const SINK = 'auth-postgres-33';
const SEEN = '__bifroE2e33ClientInfo';

interface Seen {
  readonly clientId: string;
  readonly tenantId: string;
  readonly userId: string;
  readonly attrs: Record<string, string>;
  readonly action: string;
}

function seenBy(clientId: string): Seen[] {
  const g = globalThis as unknown as Record<string, Seen[] | undefined>;
  return (g[SEEN] ?? []).filter((s) => s.clientId === clientId);
}

let pg: PostgresServer;
let tb: TestBroker;
let work: string;

function recorded(): BrokerEvent[] {
  const g = globalThis as { __bifroRecordedEvents?: Record<string, BrokerEvent[]> };
  return ((g.__bifroRecordedEvents ??= {})[SINK] ??= []);
}

function events(type: EventType, from = 0): BrokerEvent[] {
  return recorded()
    .slice(from)
    .filter((e) => e.type === type);
}

function codeOf(r: ConnectResult): number | undefined {
  return r.connack?.reasonCode ?? r.error?.code;
}

async function addUser(username: string, tenant: string, password: string | null, attrs: Record<string, string> = {}): Promise<void> {
  const hash = password === null ? null : await hashPassword(password, { log2N: 12 });
  await pg.query('INSERT INTO mqtt_users (username, tenant, password_hash, attrs) VALUES ($1, $2, $3, $4)', [
    username,
    tenant,
    hash,
    JSON.stringify(attrs),
  ]);
}

async function addRule(username: string, priority: number, permission: string, action: string, topic: string): Promise<void> {
  await pg.query('INSERT INTO mqtt_acls (username, priority, permission, action, topic) VALUES ($1, $2, $3, $4, $5)', [
    username,
    priority,
    permission,
    action,
    topic,
  ]);
}

beforeAll(async () => {
  const dist = path.join(REPO, 'plugins', 'auth-postgres', 'dist', 'index.js');
  if (!existsSync(dist)) throw new Error(`${dist} is missing: build first (npx tsc -b)`);
  pg = await startPostgres();
  await pg.query(`
    CREATE TABLE mqtt_users (username text PRIMARY KEY, tenant text NOT NULL, password_hash text, attrs jsonb NOT NULL DEFAULT '{}');
    CREATE TABLE mqtt_acls (
      id bigserial PRIMARY KEY, username text NOT NULL REFERENCES mqtt_users ON DELETE CASCADE,
      priority integer NOT NULL DEFAULT 0, permission text NOT NULL, action text NOT NULL, topic text NOT NULL);
    CREATE ROLE mqtt_broker LOGIN PASSWORD 'br0ker-secret';
    GRANT SELECT ON mqtt_users, mqtt_acls TO mqtt_broker;`);
  await addUser('alice', 'acme', 'alice-pw', { role: 'admin' });
  await addRule('alice', 1, 'deny', 'retain', '#');
  await addRule('alice', 2, 'allow', 'all', '%t/%u/#');
  await addRule('alice', 3, 'allow', 'subscribe', 'public/#');
  await addUser('bob', 'acme', 'bob-pw');
  await addRule('bob', 1, 'allow', 'all', '%t/%u/#');
  await addRule('bob', 2, 'allow', 'publish', 'public/#');
  await addUser('carol', 'beta', 'carol-pw');
  await addRule('carol', 1, 'allow', 'all', '%t/%u/#');
  await addUser('nopass', 'acme', null);
  await pg.query(`INSERT INTO mqtt_users (username, tenant, password_hash) VALUES ('plain', 'acme', 'plain-text')`);

  // The plugin folder is linked (its `pg` resolves from the repository), the recording collector copied.
  work = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-auth-postgres-'));
  const pluginsDir = path.join(work, 'plugins');
  mkdirSync(pluginsDir);
  symlinkSync(path.join(REPO, 'plugins', 'auth-postgres'), path.join(pluginsDir, 'auth-postgres'), 'dir');
  cpSync(path.join(FIXTURE_PLUGINS, 'recording-events'), path.join(pluginsDir, 'recording-events'), { recursive: true });
  // An ACL plugin of this test, first in the chain: it records the ClientInfo of each question and defers.
  mkdirSync(path.join(pluginsDir, 'attrs-recorder'));
  writeFileSync(
    path.join(pluginsDir, 'attrs-recorder', 'package.json'),
    JSON.stringify({ name: '@e2e/attrs-recorder', version: '1.0.0', main: 'index.js', bifro: { kinds: ['acl'], spi: '^1.0.0' } }),
  );
  writeFileSync(
    path.join(pluginsDir, 'attrs-recorder', 'index.js'),
    `module.exports = { acl: () => ({ checkPermission(client, action) {
      (globalThis.${SEEN} ??= []).push({ clientId: client.clientId, tenantId: client.tenantId, userId: client.userId, attrs: { ...client.attrs }, action: action.type });
      return 'defer';
    } }) };`,
  );
  const connectionString = pg.connectionStringFor('mqtt_broker', 'br0ker-secret');
  tb = await startTestBroker(
    [
      'plugins:',
      '  auth:',
      `    - use: '${PLUGIN}'`,
      '      options:',
      `        connectionString: ${JSON.stringify(connectionString)}`,
      `        cache: { ttlMs: ${TTL_MS} }`,
      '        pool: { max: 4, connectionTimeoutMs: 1000 }',
      '        queryTimeoutMs: 1000',
      '  acl:',
      "    - use: '@e2e/attrs-recorder'",
      `    - use: '${PLUGIN}'`,
      '  events:',
      "    - use: '@fixtures/recording-events'",
      `      options: { sink: ${SINK}, eventTypes: [pluginCallFailed, authError, unauthenticated, clientConnected, pubActionDisallow, subActionDisallow] }`,
    ].join('\n'),
    { pluginsDir },
  );
});

afterAll(async () => {
  await tb?.stop();
  await pg?.dispose();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('auth-postgres in a broker', () => {
  const clients = withClients(() => tb.port);

  function attempt(
    username: string | undefined,
    password: string | undefined,
    v: ProtocolVersion = 5,
    clientId = uniqueName(username ?? 'anon'),
  ) {
    const protocolId = v === 3 ? 'MQIsdp' : 'MQTT';
    return clients.tryMqtt({ protocolVersion: v, protocolId, clientId, username, password });
  }

  async function user(username: string, password: string, v: ProtocolVersion = 5, clientId = uniqueName(username)): Promise<MqttClient> {
    const r = await attempt(username, password, v, clientId);
    if (r.connack === undefined) throw new Error(`${username} was refused: ${String(r.error)}`);
    expect(r.connack.reasonCode ?? r.connack.returnCode).toBe(0);
    return r.client;
  }

  /** A client that works: it receives what it publishes to its own topic. */
  async function stillWorks(client: MqttClient, topic: string): Promise<void> {
    const messages = collect(client);
    await client.subscribeAsync(topic, { qos: 1 });
    await client.publishAsync(topic, 'ping', { qos: 1 });
    expect(await waitUntil(() => messages.messages.some((m) => m.topic === topic))).toBe(true);
  }

  it('the plugin loads for both kinds', () => {
    const loaded = tb.broker.plugins.filter((p) => p.name === PLUGIN);
    expect(loaded.flatMap((p) => p.kinds).sort()).toEqual(['acl', 'auth']);
  });

  it.each([5, 4, 3] as const)('v%i: the right password is accepted in the tenant and as the user of the row', async (v) => {
    const from = recorded().length;
    const clientId = uniqueName(`alice-v${v}`);
    await user('alice', 'alice-pw', v, clientId);
    expect(await waitUntil(() => events('clientConnected', from).some((e) => e.clientId === clientId))).toBe(true);
    const connected = events('clientConnected', from).find((e) => e.clientId === clientId)!;
    expect({ tenantId: connected.tenantId, userId: connected.userId }).toEqual({ tenantId: 'acme', userId: 'alice' });
    // What later plugin calls see: the row's attrs, and the rules of the ACL rows in priority order.
    const info = seenBy(clientId).find((s) => s.action === 'connect');
    expect(info).toEqual({
      clientId,
      tenantId: 'acme',
      userId: 'alice',
      action: 'connect',
      attrs: {
        role: 'admin',
        'bifro.acl': JSON.stringify([
          { permission: 'deny', action: 'retain', topic: '#' },
          { permission: 'allow', action: 'all', topic: '%t/%u/#' },
          { permission: 'allow', action: 'subscribe', topic: 'public/#' },
        ]),
      },
    });
  });

  it('a wrong password is refused: v5 0x86, v3.1.1 and v3.1 4; a row without password too', async () => {
    expect(codeOf(await attempt('alice', 'wrong'))).toBe(0x86);
    expect(codeOf(await attempt('alice', 'wrong', 4))).toBe(4);
    expect(codeOf(await attempt('alice', 'wrong', 3))).toBe(4);
    expect(codeOf(await attempt('alice', undefined))).toBe(0x86);
    expect(codeOf(await attempt('nopass', ''))).toBe(0x86);
    const refused = events('unauthenticated').filter((e) => e.detail.reason === 'badCredentials');
    expect(refused.length).toBeGreaterThanOrEqual(5);
  });

  it('an unknown user, no username, or a SQL injection attempt defers, and an all-defer chain refuses: v5 0x87, v3 5', async () => {
    const alice = await user('alice', 'alice-pw');
    expect(codeOf(await attempt('mallory', 'x'))).toBe(0x87);
    expect(codeOf(await attempt('mallory', 'x', 4))).toBe(5);
    expect(codeOf(await attempt(undefined, undefined))).toBe(0x87);
    expect(codeOf(await attempt("alice' OR '1'='1", 'alice-pw'))).toBe(0x87);
    expect(codeOf(await attempt("x'; DROP TABLE mqtt_users; --", 'x', 4))).toBe(5);
    expect((await pg.query('SELECT count(*)::int AS n FROM mqtt_users'))[0]!.n).toBeGreaterThan(0);
    await stillWorks(alice, 'acme/alice/after-bad-logins');
  });

  it('a row the plugin cannot use (a plain-text password) refuses with error (v5 0x80, v3 3); other clients go on', async () => {
    const bob = await user('bob', 'bob-pw');
    const from = recorded().length;
    expect(codeOf(await attempt('plain', 'plain-text'))).toBe(0x80);
    expect(codeOf(await attempt('plain', 'plain-text', 4))).toBe(3);
    expect(await waitUntil(() => events('pluginCallFailed', from).length >= 2)).toBe(true);
    expect(events('pluginCallFailed', from)[0]!.detail.message).toMatch(
      /^BIFRO_AUTH_POSTGRES_ROW_INVALID: .*user "plain": password_hash: the hash is in no known format/,
    );
    await stillWorks(bob, 'acme/bob/after-bad-row');
  });

  it('v5: the rules of the database are enforced: PUBACK 0x87 and nothing delivered, retain denied, SUBACK 0x87', async () => {
    const alice = await user('alice', 'alice-pw');
    const bob = await user('bob', 'bob-pw');
    const seen = collect(alice);
    await alice.subscribeAsync('public/#', { qos: 1 });
    await alice.subscribeAsync('acme/alice/#', { qos: 1 });
    const from = recorded().length;
    // bob may publish to public/ and his own topics, not alice's.
    await bob.publishAsync('public/news', 'hello', { qos: 1 });
    await expect(bob.publishAsync('acme/alice/inbox', 'spoof', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    expect(await waitUntil(() => seen.messages.some((m) => m.topic === 'public/news'))).toBe(true);
    await sleep(QUIET_MS);
    expect(seen.messages.some((m) => m.topic === 'acme/alice/inbox')).toBe(false);
    // alice may not retain anything (deny retain # comes first), and may not publish to public/.
    await expect(alice.publishAsync('acme/alice/state', 'kept?', { qos: 1, retain: true })).rejects.toMatchObject({ code: 0x87 });
    await expect(alice.publishAsync('public/news', 'x', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    await alice.publishAsync('acme/alice/state', 'plain', { qos: 1 });
    // bob may not subscribe to alice's topics, or to public/ (he has no subscribe rule there).
    await expect(bob.subscribeAsync('acme/alice/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    await expect(bob.subscribeAsync('public/#', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [0x87] } });
    expect(await waitUntil(() => events('pubActionDisallow', from).length >= 3 && events('subActionDisallow', from).length >= 2)).toBe(
      true,
    );
    expect(events('pubActionDisallow', from).map((e) => [e.userId, e.detail.topic])).toEqual(
      expect.arrayContaining([
        ['bob', 'acme/alice/inbox'],
        ['alice', 'acme/alice/state'],
        ['alice', 'public/news'],
      ]),
    );
  });

  it('a denied subscribe gets SUBACK 0x87 (v5) / 0x80 (v3) for that filter only; %t scopes the rules to the tenant of the row', async () => {
    const subackCodes = async (v: ProtocolVersion, filters: string[]): Promise<number[]> => {
      const s = await clients.raw({
        protocolVersion: v,
        clientId: uniqueName('carol-raw'),
        username: 'carol',
        password: Buffer.from('carol-pw'),
      });
      expect(s.connack.returnCode ?? s.connack.reasonCode).toBe(0);
      s.send({ cmd: 'subscribe', messageId: 7, subscriptions: filters.map((topic) => ({ topic, qos: 1 })) } as Packet);
      return (await expectPacket(s.raw, 'suback')).granted as number[];
    };
    // carol is in tenant beta: her rule %t/%u/# is beta/carol/#, not acme/carol/#.
    expect(await subackCodes(5, ['beta/carol/#', 'acme/carol/#', '#'])).toEqual([1, 0x87, 0x87]);
    expect(await subackCodes(4, ['beta/carol/#', 'acme/carol/#', '#'])).toEqual([1, 0x80, 0x80]);
    expect(await subackCodes(3, ['beta/carol/x', 'beta/+/x'])).toEqual([1, 0x80]);
    await stillWorks(await user('carol', 'carol-pw', 4), 'beta/carol/v3');
  });

  it('a change in the table is seen after the cache TTL: a new password, a new rule', async () => {
    const hash = await hashPassword('bob-new-pw', { log2N: 12 });
    await user('bob', 'bob-pw'); // cached now
    await pg.query('UPDATE mqtt_users SET password_hash = $1 WHERE username = $2', [hash, 'bob']);
    await addRule('bob', 0, 'allow', 'subscribe', 'public/#');
    try {
      // Within the TTL the cached row answers.
      expect(codeOf(await attempt('bob', 'bob-pw'))).toBe(0);
      await sleep(TTL_MS + 100);
      expect(codeOf(await attempt('bob', 'bob-pw'))).toBe(0x86);
      const bob = await user('bob', 'bob-new-pw');
      await expect(bob.subscribeAsync('public/#', { qos: 1 })).resolves.toEqual([expect.objectContaining({ qos: 1 })]);
    } finally {
      await pg.query('UPDATE mqtt_users SET password_hash = $1 WHERE username = $2', [await hashPassword('bob-pw', { log2N: 12 }), 'bob']);
      await pg.query(`DELETE FROM mqtt_acls WHERE username = 'bob' AND priority = 0`);
      await sleep(TTL_MS + 100);
    }
  });

  it('the database goes down: new clients are refused with error (v5 0x80, v3 3), logged and reported; connected clients go on; back up: accepted', async () => {
    const alice = await user('alice', 'alice-pw');
    const messages = collect(alice);
    await alice.subscribeAsync('acme/alice/#', { qos: 1 });
    await sleep(TTL_MS + 100); // nothing cached any more
    const logFrom = tb.logs.length;
    const from = recorded().length;
    await pg.stop();
    try {
      const started = Date.now();
      expect(codeOf(await attempt('bob', 'bob-pw'))).toBe(0x80);
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(codeOf(await attempt('alice', 'alice-pw', 4))).toBe(3);
      expect(codeOf(await attempt('alice', 'alice-pw', 3))).toBe(3);

      // The event: pluginCallFailed with the plugin, the call and the coded cause; and authError.
      expect(await waitUntil(() => events('pluginCallFailed', from).length >= 3 && events('authError', from).length >= 3)).toBe(true);
      const failed = events('pluginCallFailed', from)[0]!;
      expect(failed.detail).toMatchObject({ plugin: PLUGIN, kind: 'auth', method: 'authenticate', reason: 'error' });
      expect(failed.detail.message).toMatch(
        /^BIFRO_AUTH_POSTGRES_UNAVAILABLE: @bifro\/plugin-auth-postgres: the database postgres:\/\/mqtt_broker:\*\*\*@127\.0\.0\.1:\d+\/postgres is unavailable: cannot connect \(.*ECONNREFUSED.*\); the client is refused \(fail closed\)$/,
      );
      expect(events('authError', from)[0]!.detail).toMatchObject({ reason: 'error' });

      // The log: the plugin's own warn line (once for the three refusals: rate-limited) and the broker's.
      const lines = tb.logs.slice(logFrom);
      const own = lines.filter(
        (l) => l.level === 40 && String(l.msg).startsWith('BIFRO_AUTH_POSTGRES_UNAVAILABLE: @bifro/plugin-auth-postgres: the database'),
      );
      expect(own).toHaveLength(1);
      expect(own[0]).toMatchObject({ plugin: PLUGIN, code: 'BIFRO_AUTH_POSTGRES_UNAVAILABLE' });
      expect(
        lines.some((l) =>
          String(l.msg).startsWith(`plugin call failed: ${PLUGIN} auth.authenticate (error): BIFRO_AUTH_POSTGRES_UNAVAILABLE`),
        ),
      ).toBe(true);
      expect(JSON.stringify(lines)).not.toContain('br0ker-secret');

      // The connected client does not need the database: its rules are in memory.
      await alice.publishAsync('acme/alice/while-down', 'still here', { qos: 1 });
      expect(await waitUntil(() => messages.messages.some((m) => m.topic === 'acme/alice/while-down'))).toBe(true);
      await expect(alice.publishAsync('acme/bob/while-down', 'no', { qos: 1 })).rejects.toMatchObject({ code: 0x87 });
    } finally {
      await pg.start();
    }
    await user('bob', 'bob-pw');
    await user('alice', 'alice-pw', 4);
    expect(
      await waitUntil(() =>
        tb.logs
          .slice(logFrom)
          .some((l) => l.level === 30 && /@bifro\/plugin-auth-postgres: the database .* answers again/.test(String(l.msg))),
      ),
    ).toBe(true);
    expect(alice.connected).toBe(true);
  });
});
