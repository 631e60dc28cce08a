import net from 'node:net';
import { ACL_RULES_ATTR, type AuthRequest, type AuthResult } from '@bifro/spi';
import {
  authProviderConformance,
  registerConformance,
  sampleAuthRequest,
  testPluginContext,
  type TestPluginContext,
} from '@bifro/spi/testing';
import { startPostgres, type PostgresServer } from '../../../test/support/postgres-server';
import plugin from '../src';
import { parseAuthOptions } from '../src/options';
import { hashPassword } from '../src/password-hash';
import { PostgresAuthProvider } from '../src/postgres-auth';

/**
 * The auth kind against a real PostgreSQL (test/support/postgres-server.ts): the conformance
 * kit, what each row means, the placeholders as bind parameters, the TTL cache (injected clock),
 * the failures (bad rows, bad queries, a hung server, a stopped server) and the recovery.
 */

jest.setTimeout(60_000);

let pg: PostgresServer;
/** The broker's least-privileged role: SELECT on the two tables. */
let brokerCs: string;
const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

beforeAll(async () => {
  pg = await startPostgres();
  const cheap = { log2N: 10 } as const;
  const alice = await hashPassword('alice-pw', cheap);
  const bob = await hashPassword('bob-pw', { format: 'mosquitto', iterations: 101 });
  await pg.query(`
    CREATE TABLE mqtt_users (username text PRIMARY KEY, tenant text NOT NULL, password_hash text, attrs jsonb NOT NULL DEFAULT '{}');
    CREATE TABLE mqtt_acls (
      id bigserial PRIMARY KEY, username text NOT NULL, priority integer NOT NULL DEFAULT 0,
      permission text NOT NULL, action text NOT NULL, topic text NOT NULL);
    CREATE SEQUENCE lookups;
    CREATE ROLE broker LOGIN PASSWORD 'broker pw/with:chars';
    GRANT SELECT ON mqtt_users, mqtt_acls TO broker;
    GRANT USAGE ON SEQUENCE lookups TO broker;`);
  await pg.query(
    `INSERT INTO mqtt_users VALUES ($1, 'acme', $2, '{"role":"admin"}'), ('bob', 'beta', $3, '{}'), ('nopass', 'acme', NULL, '{}')`,
    ['alice', alice, bob],
  );
  await pg.query(`INSERT INTO mqtt_acls (username, priority, permission, action, topic) VALUES
    ('alice', 2, 'allow', 'all', 'acme/%u/#'),
    ('alice', 1, 'deny', 'retain', '#'),
    ('alice', 3, 'allow', 'subscribe', 'public/#')`);
  brokerCs = pg.connectionStringFor('broker', 'broker pw/with:chars');
});

afterAll(async () => {
  await pg?.dispose();
});

const providers: PostgresAuthProvider[] = [];
afterEach(async () => {
  for (const p of providers.splice(0)) await p.close();
});

/** A provider on the test database, with a recording context and an injected clock. */
function provider(
  options: Record<string, unknown> = {},
  now: () => number = Date.now,
): { auth: PostgresAuthProvider; ctx: TestPluginContext } {
  const ctx = testPluginContext({ options: { connectionString: brokerCs, ...options } });
  const auth = new PostgresAuthProvider(parseAuthOptions(ctx.options, ctx.configDir), ctx.logger, { now });
  providers.push(auth);
  return { auth, ctx };
}

function login(username: string | undefined, password?: string, extra: Partial<AuthRequest> = {}): AuthRequest {
  return sampleAuthRequest({ username, password: password === undefined ? undefined : utf8(password), ...extra });
}

async function failure(promise: Promise<AuthResult>): Promise<Error & { code?: string }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('authenticate did not throw');
}

async function lookups(): Promise<number> {
  const [row] = await pg.query<{ last_value: string; is_called: boolean }>('SELECT last_value, is_called FROM lookups');
  return row!.is_called ? Number(row!.last_value) : 0;
}

const COUNTING_QUERY = "SELECT tenant, password_hash, attrs, nextval('lookups') AS n FROM mqtt_users WHERE username = ${username}";

describe('auth-postgres: auth conformance kit (real PostgreSQL)', () => {
  registerConformance(
    authProviderConformance({
      create: () => plugin.auth(testPluginContext({ options: { connectionString: brokerCs } })),
      validRequest: { username: 'alice', password: utf8('alice-pw') },
      expectedIdentity: { tenantId: 'acme', userId: 'alice' },
      invalidRequest: { username: 'alice', password: utf8('wrong') },
      expectedRejectReason: 'badCredentials',
      extraRequests: [
        { label: 'a SQL injection attempt as username', request: login("x' OR '1'='1", 'p') },
        { label: 'a user without password hash', request: login('nopass', 'p') },
        { label: 'a username with U+0000', request: login('ali\u0000ce', 'alice-pw') },
      ],
    }),
    { it },
  );
});

describe('auth-postgres: what the rows say', () => {
  it('right password: tenant and user from the row, attrs, and the ACL rows in priority order under attrs[bifro.acl]', async () => {
    const { auth, ctx } = provider();
    await auth.init();
    expect(
      ctx.logged.some((l) => l.level === 'info' && /connected to postgres:\/\/broker:\*\*\*@127\.0\.0\.1:\d+\/postgres/.test(l.msg)),
    ).toBe(true);
    expect(JSON.stringify(ctx.logged)).not.toContain('broker pw');
    const result = await auth.authenticate(login('alice', 'alice-pw'));
    expect(result).toEqual({
      type: 'ok',
      tenantId: 'acme',
      userId: 'alice',
      attrs: {
        role: 'admin',
        [ACL_RULES_ATTR]: JSON.stringify([
          { permission: 'deny', action: 'retain', topic: '#' },
          { permission: 'allow', action: 'all', topic: 'acme/%u/#' },
          { permission: 'allow', action: 'subscribe', topic: 'public/#' },
        ]),
      },
    });
    // A mosquitto $7$ hash, and a user without rules: an empty rule list is attached.
    await expect(auth.authenticate(login('bob', 'bob-pw'))).resolves.toEqual({
      type: 'ok',
      tenantId: 'beta',
      userId: 'bob',
      attrs: { [ACL_RULES_ATTR]: '[]' },
    });
  });

  it('wrong, missing or empty password, or no hash: badCredentials; unknown user or no username: defer', async () => {
    const { auth } = provider();
    const bad = { type: 'reject', reason: 'badCredentials', text: 'bad user name or password' };
    await expect(auth.authenticate(login('alice', 'alice-pW'))).resolves.toEqual(bad);
    await expect(auth.authenticate(login('alice'))).resolves.toEqual(bad);
    await expect(auth.authenticate(login('alice', ''))).resolves.toEqual(bad);
    await expect(auth.authenticate(login('nopass', ''))).resolves.toEqual(bad);
    await expect(auth.authenticate(login('carol', 'x'))).resolves.toEqual({ type: 'defer' });
    await expect(auth.authenticate(login(undefined))).resolves.toEqual({ type: 'defer' });
    await expect(auth.authenticate(login("alice' --", 'alice-pw'))).resolves.toEqual({ type: 'defer' });
    await expect(auth.authenticate(login('ali\u0000ce', 'alice-pw'))).resolves.toEqual({ type: 'defer' });
  });

  it('unknownUser: badCredentials refuses unknown users instead of deferring', async () => {
    const { auth } = provider({ unknownUser: 'badCredentials' });
    await expect(auth.authenticate(login('carol', 'x'))).resolves.toMatchObject({ type: 'reject', reason: 'badCredentials' });
  });

  it('an unknown user, or a row without a hash, costs the KDF of a real check: the time does not tell who exists', async () => {
    await pg.query(`INSERT INTO mqtt_users VALUES ('slowpoke', 'acme', $1, '{}')`, [await hashPassword('slow-pw', { log2N: 15 })]);
    try {
      for (const unknownUser of ['defer', 'badCredentials'] as const) {
        const { auth } = provider({ unknownUser });
        const timed = async (user: string): Promise<{ ms: number; result: AuthResult }> => {
          const started = performance.now();
          const result = await auth.authenticate(login(user, 'guess'));
          return { ms: performance.now() - started, result };
        };
        // Rows cached, and the cost of a real hash seen, before measuring.
        for (const user of ['slowpoke', 'ghost', 'nopass']) await timed(user);
        const wrong: number[] = [];
        const unknown: number[] = [];
        const noHash: number[] = [];
        for (let i = 0; i < 3; i++) {
          wrong.push((await timed('slowpoke')).ms);
          const ghost = await timed('ghost');
          expect(ghost.result).toEqual(unknownUser === 'defer' ? { type: 'defer' } : (await timed('slowpoke')).result);
          unknown.push(ghost.ms);
          noHash.push((await timed('nopass')).ms);
        }
        const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[1]!;
        expect(median(unknown)).toBeGreaterThan(median(wrong) / 3);
        expect(median(noHash)).toBeGreaterThan(median(wrong) / 3);
      }
    } finally {
      await pg.query(`DELETE FROM mqtt_users WHERE username = 'slowpoke'`);
    }
  });

  it('custom queries: ${clientId}, ${tenant} and ${userId} are bind parameters; aclQuery false attaches no rules', async () => {
    await pg.query(`
      CREATE TABLE devices (tenant text, name text, client_prefix text, secret text, PRIMARY KEY (tenant, name));
      CREATE TABLE device_rules (tenant text, device text, topic text);
      GRANT SELECT ON devices, device_rules TO broker;`);
    await pg.query(`INSERT INTO devices VALUES ('t1', 'd1', 'sensor-', $1)`, [await hashPassword('d1-pw', { log2N: 10 })]);
    await pg.query(`INSERT INTO device_rules VALUES ('t1', 'd1', 'telemetry/%c'), ('t2', 'd1', 'other-tenant')`);
    const { auth } = provider({
      authQuery: `SELECT tenant, secret AS password_hash, name || '@' || tenant AS user_id
        FROM devices
        WHERE tenant = split_part(\${username}, '/', 1) AND name = split_part(\${username}, '/', 2)
          AND starts_with(\${clientId}, client_prefix)`,
      aclQuery: `SELECT 'allow' AS permission, 'publish' AS action, topic FROM device_rules
        WHERE tenant = \${tenant} AND device || '@' || tenant = \${userId} AND \${clientId} <> ''`,
    });
    await expect(auth.authenticate(login('t1/d1', 'd1-pw', { clientId: 'sensor-42' }))).resolves.toEqual({
      type: 'ok',
      tenantId: 't1',
      userId: 'd1@t1',
      attrs: { [ACL_RULES_ATTR]: '[{"permission":"allow","action":"publish","topic":"telemetry/%c"}]' },
    });
    await expect(auth.authenticate(login('t1/d1', 'd1-pw', { clientId: 'other-42' }))).resolves.toEqual({ type: 'defer' });
    const { auth: noAcl } = provider({ aclQuery: false });
    await expect(noAcl.authenticate(login('alice', 'alice-pw'))).resolves.toEqual({
      type: 'ok',
      tenantId: 'acme',
      userId: 'alice',
      attrs: { role: 'admin' },
    });
  });
});

describe('auth-postgres: the TTL cache', () => {
  it('a login is looked up once per TTL (concurrent CONNECTs share one lookup); a change in the table shows after the TTL', async () => {
    let now = 1_000_000;
    const { auth } = provider({ authQuery: COUNTING_QUERY, cache: { ttlMs: 2_000 } }, () => now);
    const before = await lookups();
    const results = await Promise.all([1, 2, 3, 4, 5].map(() => auth.authenticate(login('alice', 'alice-pw'))));
    expect(results.every((r) => r.type === 'ok')).toBe(true);
    expect((await lookups()) - before).toBe(1);
    await pg.query(`UPDATE mqtt_users SET tenant = 'acme2', password_hash = $1 WHERE username = 'alice'`, [
      await hashPassword('new-pw', { log2N: 10 }),
    ]);
    try {
      now += 1_999;
      await expect(auth.authenticate(login('alice', 'alice-pw'))).resolves.toMatchObject({ type: 'ok', tenantId: 'acme' });
      await expect(auth.authenticate(login('alice', 'new-pw'))).resolves.toMatchObject({ type: 'reject' });
      expect((await lookups()) - before).toBe(1);
      now += 1;
      await expect(auth.authenticate(login('alice', 'new-pw'))).resolves.toMatchObject({ type: 'ok', tenantId: 'acme2' });
      await expect(auth.authenticate(login('alice', 'alice-pw'))).resolves.toMatchObject({ type: 'reject', reason: 'badCredentials' });
      expect((await lookups()) - before).toBe(2);
    } finally {
      await pg.query(`UPDATE mqtt_users SET tenant = 'acme', password_hash = $1 WHERE username = 'alice'`, [
        await hashPassword('alice-pw', { log2N: 10 }),
      ]);
    }
  });

  it('the cache key is the user name, plus the client id when a query uses it; very long logins are not kept', async () => {
    const { auth } = provider({
      authQuery:
        "SELECT tenant, password_hash, attrs, nextval('lookups') AS n FROM mqtt_users WHERE username = ${username} AND ${clientId} <> 'banned'",
    });
    const before = await lookups();
    await auth.authenticate(login('alice', 'alice-pw', { clientId: 'c1' }));
    await auth.authenticate(login('alice', 'alice-pw', { clientId: 'c1' }));
    await expect(auth.authenticate(login('alice', 'alice-pw', { clientId: 'banned' }))).resolves.toEqual({ type: 'defer' });
    await auth.authenticate(login('alice', 'alice-pw', { clientId: 'c2' }));
    expect((await lookups()) - before).toBe(2);
    const long = 'c'.repeat(2_000);
    await auth.authenticate(login('alice', 'alice-pw', { clientId: long }));
    await auth.authenticate(login('alice', 'alice-pw', { clientId: long }));
    expect((await lookups()) - before).toBe(4);
  });

  it('cache.ttlMs 0 asks the database at every CONNECT', async () => {
    const { auth } = provider({ authQuery: COUNTING_QUERY, cache: { ttlMs: 0 } });
    const before = await lookups();
    await auth.authenticate(login('alice', 'alice-pw'));
    await auth.authenticate(login('alice', 'alice-pw'));
    expect((await lookups()) - before).toBe(2);
  });
});

describe('auth-postgres: failures are coded errors (the broker refuses with error), logged with the cause', () => {
  it('a row it cannot use: ROW_INVALID naming the user and the row; not cached', async () => {
    await pg.query(`INSERT INTO mqtt_users VALUES ('dave', 'acme', 'plain-text-pw', '{}'), ('erin', 'acme', $1, '{}')`, [
      await hashPassword('erin-pw', { log2N: 10 }),
    ]);
    await pg.query(
      `INSERT INTO mqtt_acls (username, priority, permission, action, topic) VALUES ('erin', 1, 'allow', 'all', 'ok/#'), ('erin', 2, 'allow', 'publish', 'bad/#/x')`,
    );
    const { auth, ctx } = provider();
    const dave = await failure(auth.authenticate(login('dave', 'plain-text-pw')));
    expect(dave.code).toBe('BIFRO_AUTH_POSTGRES_ROW_INVALID');
    expect(dave.message).toMatch(
      /^BIFRO_AUTH_POSTGRES_ROW_INVALID: @bifro\/plugin-auth-postgres: authQuery row of user "dave": password_hash: the hash is in no known format/,
    );
    const erin = await failure(auth.authenticate(login('erin', 'erin-pw')));
    expect(erin.message).toMatch(/aclQuery rows of user "erin": rows\[1\]\.topic: "#" must be the last level/);
    expect(ctx.logged.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([dave.message]); // one line per code per 5 s
    await pg.query(`DELETE FROM mqtt_acls WHERE username = 'erin' AND topic = 'bad/#/x'`);
    await expect(auth.authenticate(login('erin', 'erin-pw'))).resolves.toMatchObject({ type: 'ok' });
  });

  it('a query PostgreSQL refuses: QUERY_FAILED with the SQLSTATE', async () => {
    const { auth, ctx } = provider({ authQuery: 'SELECT tenant, password_hash FROM no_such_table WHERE username = ${username}' });
    const err = await failure(auth.authenticate(login('alice', 'alice-pw')));
    expect(err.code).toBe('BIFRO_AUTH_POSTGRES_QUERY_FAILED');
    expect(err.message).toMatch(
      /authQuery failed: relation "no_such_table" does not exist \(SQLSTATE 42P01, at character \d+\); the query sent was: SELECT tenant, password_hash FROM no_such_table WHERE username = \$1/,
    );
    const denied = provider({
      authQuery: 'SELECT rolname AS tenant, rolpassword AS password_hash FROM pg_authid WHERE rolname = ${username}',
    });
    expect((await failure(denied.auth.authenticate(login('alice', 'x')))).message).toMatch(/permission denied .*SQLSTATE 42501/);
    expect(ctx.logged[0]).toMatchObject({ level: 'warn', fields: { code: 'BIFRO_AUTH_POSTGRES_QUERY_FAILED' } });
  });

  it('a query that does not finish in queryTimeoutMs: UNAVAILABLE, and the pool still works', async () => {
    const { auth } = provider({
      authQuery:
        "SELECT tenant, password_hash, pg_sleep(CASE WHEN ${username} = 'slow' THEN 5 ELSE 0 END) FROM mqtt_users WHERE username IN (${username}, 'alice') ORDER BY username = ${username} DESC LIMIT 1",
      queryTimeoutMs: 200,
      pool: { max: 1 },
    });
    const started = Date.now();
    const err = await failure(auth.authenticate(login('slow', 'x')));
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(err.code).toBe('BIFRO_AUTH_POSTGRES_UNAVAILABLE');
    expect(err.message).toMatch(/authQuery got no answer \((canceling statement due to statement timeout|Query read timeout)/);
    await expect(auth.authenticate(login('alice', 'alice-pw'))).resolves.toMatchObject({ type: 'ok' });
  });

  it('a server that accepts but never answers: UNAVAILABLE after pool.connectionTimeoutMs', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const { auth } = provider({
        connectionString: `postgres://broker:pw@127.0.0.1:${port}/postgres`,
        pool: { connectionTimeoutMs: 300 },
      });
      const started = Date.now();
      const err = await failure(auth.authenticate(login('alice', 'alice-pw')));
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(err.code).toBe('BIFRO_AUTH_POSTGRES_UNAVAILABLE');
      expect(err.message).toMatch(
        new RegExp(`the database postgres://broker:\\*\\*\\*@127\\.0\\.0\\.1:${port}/postgres is unavailable: cannot connect \\(.*timeout`),
      );
      expect(err.message).not.toContain(':pw@');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('a wrong database password: UNAVAILABLE naming the refused login', async () => {
    const { auth } = provider({ connectionString: pg.connectionStringFor('broker', 'not-the-password') });
    const err = await failure(auth.authenticate(login('alice', 'alice-pw')));
    expect(err.code).toBe('BIFRO_AUTH_POSTGRES_UNAVAILABLE');
    expect(err.message).toMatch(/password authentication failed for user "broker"/);
  });

  // Last: stops the shared server.
  it('the database goes down: refused at once (fail closed), one warn line per 5 s; back up: accepted, one info line', async () => {
    let now = 5_000_000;
    const { auth, ctx } = provider({ cache: { ttlMs: 1_000 } }, () => now);
    await expect(auth.authenticate(login('alice', 'alice-pw'))).resolves.toMatchObject({ type: 'ok' });
    await pg.stop();
    // The pooled idle connection the server closed is logged (and does not crash the process).
    const idle = (): boolean =>
      ctx.logged.some((l) => l.level === 'warn' && /an idle database connection to .* failed \(.*terminat/.test(l.msg));
    for (let i = 0; i < 100 && !idle(); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(idle()).toBe(true);
    // Within the TTL the cached row still answers (a short outage does not refuse known logins).
    await expect(auth.authenticate(login('alice', 'alice-pw'))).resolves.toMatchObject({ type: 'ok' });
    now += 1_000;
    const started = Date.now();
    const down = await failure(auth.authenticate(login('alice', 'alice-pw')));
    expect(Date.now() - started).toBeLessThan(2_500);
    expect(down.code).toBe('BIFRO_AUTH_POSTGRES_UNAVAILABLE');
    expect(down.message).toMatch(
      /^BIFRO_AUTH_POSTGRES_UNAVAILABLE: @bifro\/plugin-auth-postgres: the database postgres:\/\/broker:\*\*\*@127\.0\.0\.1:\d+\/postgres is unavailable: cannot connect \(.*(ECONNREFUSED|terminat|shut)/,
    );
    expect(down.message).toMatch(/the client is refused \(fail closed\)$/);
    await failure(auth.authenticate(login('bob', 'bob-pw')));
    now += 4_999;
    await failure(auth.authenticate(login('alice', 'alice-pw')));
    const warns = (): string[] => ctx.logged.filter((l) => l.level === 'warn' && / is unavailable: /.test(l.msg)).map((l) => l.msg);
    expect(warns()).toHaveLength(1);
    now += 1;
    await failure(auth.authenticate(login('alice', 'alice-pw')));
    expect(warns()).toHaveLength(2);
    expect(warns().at(-1)).toMatch(/and \d+ more like it since the previous line/);

    // init with the database down logs and does not fail the load.
    const { auth: late, ctx: lateCtx } = provider();
    await expect(late.init()).resolves.toBeUndefined();
    expect(lateCtx.logged[0]).toMatchObject({ level: 'warn', fields: { code: 'BIFRO_AUTH_POSTGRES_UNAVAILABLE' } });

    await pg.start();
    await expect(auth.authenticate(login('alice', 'alice-pw'))).resolves.toMatchObject({ type: 'ok', tenantId: 'acme' });
    expect(ctx.logged.at(-1)).toMatchObject({
      level: 'info',
      msg: expect.stringMatching(/the database .* answers again \(\d+ lookup\(s\) failed over \d+ ms\)/),
    });
    await expect(late.authenticate(login('bob', 'bob-pw'))).resolves.toMatchObject({ type: 'ok', tenantId: 'beta' });
  });
});
