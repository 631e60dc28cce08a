import { ACL_RULES_ATTR } from '@bifro/spi';
import { hashPassword } from '../src/password-hash';
import { rulesFromRows, userFromRows } from '../src/rows';

const AUTH_COLUMNS = ['tenant', 'password_hash', 'attrs'];
const ALL = ['mosquitto', 'pbkdf2-sha256', 'pbkdf2-sha512', 'scrypt'] as const;

function thrown(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('did not throw');
}

describe('auth-postgres: auth query row → user', () => {
  let hash: string;
  beforeAll(async () => {
    hash = await hashPassword('pw', { log2N: 10 });
  });

  it('no row: unknown user', () => {
    expect(userFromRows({ rows: [], columns: AUTH_COLUMNS }, 'alice', ALL)).toBeUndefined();
  });

  it('reads tenant, the hash, attrs as jsonb (object) or json text; user_id defaults to the username', () => {
    const fromJsonb = userFromRows(
      { rows: [{ tenant: 'acme', password_hash: hash, attrs: { role: 'admin' } }], columns: AUTH_COLUMNS },
      'alice',
      ALL,
    );
    expect(fromJsonb).toMatchObject({ tenantId: 'acme', userId: 'alice', attrs: { role: 'admin' } });
    expect(fromJsonb?.hash?.format).toBe('scrypt');
    const fromText = userFromRows(
      { rows: [{ tenant: 'acme', password_hash: hash, attrs: '{"a":"b"}', user_id: 'u-17' }], columns: [...AUTH_COLUMNS, 'user_id'] },
      'alice',
      ALL,
    );
    expect(fromText).toMatchObject({ tenantId: 'acme', userId: 'u-17', attrs: { a: 'b' } });
    const noAttrs = userFromRows({ rows: [{ tenant: 'acme', password_hash: null }], columns: ['tenant', 'password_hash'] }, 'bob', ALL);
    expect(noAttrs).toEqual({ tenantId: 'acme', userId: 'bob', hash: null, attrs: {} });
  });

  it('refuses rows it cannot use, naming the user and the column', () => {
    const code = /^BIFRO_AUTH_POSTGRES_ROW_INVALID: @bifro\/plugin-auth-postgres: /;
    expect(thrown(() => userFromRows({ rows: [{ tenant: 'a' }], columns: ['tenant'] }, 'alice', ALL))).toMatch(
      /authQuery returned no column password_hash \(it returned tenant;/,
    );
    const two = {
      rows: [
        { tenant: 'a', password_hash: hash },
        { tenant: 'b', password_hash: hash },
      ],
      columns: AUTH_COLUMNS,
    };
    expect(thrown(() => userFromRows(two, 'alice', ALL))).toMatch(/authQuery returned 2 rows for user "alice": it must return at most one/);
    const row = (r: Record<string, unknown>): string =>
      thrown(() =>
        userFromRows({ rows: [{ tenant: 'acme', password_hash: hash, ...r }], columns: [...AUTH_COLUMNS, 'user_id'] }, 'alice', ALL),
      );
    expect(row({ tenant: '' })).toMatch(code);
    expect(row({ tenant: '' })).toMatch(/authQuery row of user "alice": tenant must be a non-empty string, got an empty string/);
    expect(row({ tenant: 7 })).toMatch(/tenant must be a non-empty string, got number/);
    expect(row({ user_id: '' })).toMatch(/user_id must be a non-empty string or NULL/);
    expect(row({ password_hash: 'plain' })).toMatch(/authQuery row of user "alice": password_hash: the hash is in no known format/);
    expect(row({ password_hash: Buffer.from('x') })).toMatch(/password_hash must be text, got bytes \(bytea\)/);
    expect(row({ attrs: '{not json' })).toMatch(/attrs is text but not JSON/);
    expect(row({ attrs: [1] })).toMatch(/attrs must be a JSON object of strings, got an array/);
    expect(row({ attrs: { n: 1 } })).toMatch(/attrs\.n must be a string, got number/);
    expect(row({ attrs: { [ACL_RULES_ATTR]: '[]' } })).toMatch(/attrs\.bifro\.acl is reserved/);
  });
});

describe('auth-postgres: ACL query rows → rules', () => {
  const columns = ['id', 'permission', 'action', 'topic'];

  it('maps rows in order, ignoring other columns', () => {
    const rules = rulesFromRows(
      {
        rows: [
          { id: 1, permission: 'deny', action: 'retain', topic: '#' },
          { id: 2, permission: 'allow', action: 'all', topic: 'devices/%c/#' },
        ],
        columns,
      },
      'alice',
    );
    expect(rules).toEqual([
      { permission: 'deny', action: 'retain', topic: '#' },
      { permission: 'allow', action: 'all', topic: 'devices/%c/#' },
    ]);
    expect(rulesFromRows({ rows: [], columns: [] }, 'alice')).toEqual([]);
  });

  it('names the bad row (counted from 0) and its field', () => {
    const rows = [
      { id: 1, permission: 'allow', action: 'publish', topic: 'a/#' },
      { id: 2, permission: 'alow', action: 'publish', topic: 'b' },
    ];
    expect(thrown(() => rulesFromRows({ rows, columns }, 'alice'))).toBe(
      'BIFRO_AUTH_POSTGRES_ROW_INVALID: @bifro/plugin-auth-postgres: aclQuery rows of user "alice": rows[1].permission: must be "allow" or "deny" (got "alow")',
    );
    expect(thrown(() => rulesFromRows({ rows: [{ permission: 'allow', action: 'pub', topic: 'x' }], columns }, 'bob'))).toMatch(
      /rows\[0\]\.action: must be one of publish, subscribe, retain, all/,
    );
    expect(thrown(() => rulesFromRows({ rows: [{ permission: 'allow', action: 'all', topic: 'a/#/b' }], columns }, 'bob'))).toMatch(
      /rows\[0\]\.topic: "#" must be the last level/,
    );
    expect(thrown(() => rulesFromRows({ rows: [{ permission: 'allow', action: 'all', topic: null }], columns }, 'bob'))).toMatch(
      /rows\[0\]\.topic: must be a string \(got null\)/,
    );
    expect(
      thrown(() => rulesFromRows({ rows: [{ permission: 'allow', action: 'all' }], columns: ['permission', 'action'] }, 'bob')),
    ).toMatch(/aclQuery returned no column topic/);
  });
});
