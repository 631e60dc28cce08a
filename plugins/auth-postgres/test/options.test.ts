import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { testPluginContext } from '@bifro/spi/testing';
import plugin, { AUTH_POSTGRES_ERRORS } from '../src';
import { DEFAULT_ACL_QUERY, DEFAULT_AUTH_QUERY, maskConnectionString, parseAclOptions, parseAuthOptions } from '../src/options';

const CS = 'postgres://broker:s3cret@127.0.0.1:5432/mqtt';

function authProblem(options: Record<string, unknown>, configDir = '/'): string {
  try {
    parseAuthOptions({ connectionString: CS, ...options }, configDir);
  } catch (err) {
    expect((err as { code?: string }).code).toBe('BIFRO_AUTH_POSTGRES_OPTIONS_INVALID');
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(options)}`);
}

describe('auth-postgres: options', () => {
  it('defaults', () => {
    const o = parseAuthOptions({ connectionString: CS }, '/');
    expect(o.authQuery.text).toBe('SELECT tenant, password_hash, attrs FROM mqtt_users WHERE username = $1');
    expect(o.aclQuery?.text).toBe('SELECT permission, action, topic FROM mqtt_acls WHERE username = $1 ORDER BY priority, id');
    expect(DEFAULT_AUTH_QUERY).toContain('${username}');
    expect(DEFAULT_ACL_QUERY).toContain('${username}');
    expect(o).toMatchObject({
      target: 'postgres://broker:***@127.0.0.1:5432/mqtt',
      passwordHash: ['mosquitto', 'pbkdf2-sha256', 'pbkdf2-sha512', 'scrypt'],
      unknownUser: 'defer',
      pool: { max: 10, idleTimeoutMs: 10_000, connectionTimeoutMs: 2_000 },
      queryTimeoutMs: 1_000,
      cache: { ttlMs: 5_000, maxEntries: 10_000 },
      ssl: false,
    });
    expect(parseAclOptions({})).toEqual({ connect: 'granted', unmatched: 'defer' });
  });

  it('every bad option fails with the code, the plugin and the key', () => {
    const prefix = /^BIFRO_AUTH_POSTGRES_OPTIONS_INVALID: @bifro\/plugin-auth-postgres: /;
    expect(() => parseAuthOptions({}, '/')).toThrow(/options\.connectionString is required/);
    expect(authProblem({ connectionString: 'mysql://x@y/z' })).toMatch(/options\.connectionString must start with postgres:\/\//);
    expect(authProblem({ connectionString: 'not a url' })).toMatch(prefix);
    expect(authProblem({ connectionString: 'not a url' })).toMatch(/options\.connectionString is not a URL/);
    expect(authProblem({ connectionString: 7 })).toMatch(/options\.connectionString must be a URL/);
    expect(authProblem({ authQuery: 5 })).toMatch(/options\.authQuery must be an SQL query/);
    expect(authProblem({ authQuery: 'SELECT tenant, password_hash FROM u' })).toMatch(
      /options\.authQuery must select the user by \$\{username\}/,
    );
    expect(authProblem({ aclQuery: 'SELECT 1 WHERE x = ${nope}' })).toMatch(
      /options\.aclQuery: at offset 19: unknown placeholder \$\{nope\}/,
    );
    expect(authProblem({ aclQuery: true })).toMatch(/options\.aclQuery must be an SQL query \(a string\) or false/);
    expect(authProblem({ passwordHash: 'md5' })).toMatch(/options\.passwordHash: "md5" is not a hash format/);
    expect(authProblem({ passwordHash: [] })).toMatch(/options\.passwordHash must be a hash format or a non-empty list/);
    expect(authProblem({ unknownUser: 'reject' })).toMatch(/options\.unknownUser must be one of defer, badCredentials/);
    expect(authProblem({ pool: 3 })).toMatch(/options\.pool must be a mapping/);
    expect(authProblem({ pool: { max: 0 } })).toMatch(/options\.pool\.max must be an integer from 1 to 1000, got 0/);
    expect(authProblem({ pool: { size: 3 } })).toMatch(/unknown option options\.pool\.size/);
    expect(authProblem({ pool: { connectionTimeoutMs: 1.5 } })).toMatch(/options\.pool\.connectionTimeoutMs must be an integer/);
    expect(authProblem({ queryTimeoutMs: '1s' })).toMatch(/options\.queryTimeoutMs must be an integer from 10 to 60000, got "1s"/);
    expect(authProblem({ cache: { ttlMs: -1 } })).toMatch(/options\.cache\.ttlMs must be an integer from 0 to 300000/);
    expect(authProblem({ cache: { maxEntries: 0 } })).toMatch(/options\.cache\.maxEntries must be an integer from 1/);
    expect(authProblem({ ssl: 'yes' })).toMatch(/options\.ssl must be true, false or a mapping/);
    expect(authProblem({ ssl: { verify: true } })).toMatch(/unknown option options\.ssl\.verify/);
    expect(authProblem({ ssl: { rejectUnauthorized: 'no' } })).toMatch(/options\.ssl\.rejectUnauthorized must be true or false/);
    expect(authProblem({ ssl: { cert: '-----BEGIN CERTIFICATE-----' } })).toMatch(/options\.ssl\.cert and options\.ssl\.key go together/);
    expect(authProblem({ ssl: { ca: 'missing-ca.pem' } }, '/nonexistent')).toMatch(
      /options\.ssl\.ca: cannot read \/nonexistent\/missing-ca\.pem/,
    );
    expect(authProblem({ connectionString: `${CS}?sslmode=require`, ssl: true })).toMatch(
      /options\.ssl and sslmode in options\.connectionString/,
    );
    expect(authProblem({ timeout: 1 })).toMatch(/unknown option options\.timeout \(the auth kind knows options\.connectionString, /);
    expect(() => parseAclOptions({ connect: 'yes' })).toThrow(
      /^BIFRO_AUTH_POSTGRES_OPTIONS_INVALID: .*options\.connect must be one of granted, defer/,
    );
    expect(() => parseAclOptions({ unmatched: 'allow' })).toThrow(/options\.unmatched must be one of defer, denied, granted/);
    expect(() => parseAclOptions({ connectionStrin: CS })).toThrow(
      /unknown option options\.connectionStrin \(the acl kind knows options\.connect, options\.unmatched\)/,
    );
  });

  it('the two kinds may share one options mapping', () => {
    const shared = { connectionString: CS, cache: { ttlMs: 100 }, connect: 'defer', unmatched: 'denied' };
    expect(parseAuthOptions(shared, '/').cache.ttlMs).toBe(100);
    expect(parseAclOptions(shared)).toEqual({ connect: 'defer', unmatched: 'denied' });
  });

  it('aclQuery false turns the ACL lookup off; ssl reads PEM files relative to the config folder', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-pg-opts-'));
    try {
      writeFileSync(path.join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
      const o = parseAuthOptions({ connectionString: CS, aclQuery: false, ssl: { ca: 'ca.pem', servername: 'db.example' } }, dir);
      expect(o.aclQuery).toBeUndefined();
      expect(o.ssl).toEqual({
        rejectUnauthorized: true,
        ca: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
        servername: 'db.example',
      });
      expect(parseAuthOptions({ connectionString: CS, ssl: true }, dir).ssl).toEqual({ rejectUnauthorized: true });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('never shows the database password', () => {
    expect(maskConnectionString('postgresql://u:p%40ss@h/db')).toBe('postgresql://u:***@h/db');
    expect(maskConnectionString('postgres://h/db')).toBe('postgres://h/db');
    expect(authProblem({ connectionString: 'postgres://u:topsecret@h/db', queryTimeoutMs: 0 })).not.toContain('topsecret');
  });

  it('the factories check the options: a bad option fails the load with a declared code', () => {
    const auth = plugin.auth;
    const acl = plugin.acl;
    expect(() => auth(testPluginContext({ options: { connectionString: CS, pool: { max: -1 } } }))).toThrow(
      /BIFRO_AUTH_POSTGRES_OPTIONS_INVALID/,
    );
    expect(() => acl(testPluginContext({ options: { unmatched: 1 } }))).toThrow(/BIFRO_AUTH_POSTGRES_OPTIONS_INVALID/);
    for (const [code, spec] of Object.entries(AUTH_POSTGRES_ERRORS)) {
      expect(code).toMatch(/^BIFRO_AUTH_POSTGRES_[A-Z_]+$/);
      expect(spec.summary.length).toBeGreaterThan(10);
      expect(spec.remedy.length).toBeGreaterThan(10);
    }
  });
});
