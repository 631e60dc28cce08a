import { compileQuery } from '../src/query-template';

const AUTH = ['username', 'clientId'] as const;
const ACL = ['username', 'clientId', 'tenant', 'userId'] as const;

/** The message compileQuery throws for `sql`. */
function problem(sql: string, allowed: readonly ('username' | 'clientId' | 'tenant' | 'userId')[] = AUTH): string {
  try {
    compileQuery(sql, 'authQuery', allowed);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`compileQuery accepted ${sql}`);
}

describe('auth-postgres: placeholders become bind parameters', () => {
  it('maps each placeholder to $n in order of first use, a repeated one to the same parameter', () => {
    const q = compileQuery(
      'SELECT * FROM t WHERE tenant = ${tenant} AND (name = ${username} OR alias = ${username}) AND client ~ ${clientId}',
      'aclQuery',
      ACL,
    );
    expect(q.text).toBe('SELECT * FROM t WHERE tenant = $1 AND (name = $2 OR alias = $2) AND client ~ $3');
    expect(q.params).toEqual(['tenant', 'username', 'clientId']);
    expect(q.values({ tenant: 'acme', username: "o'brien; DROP TABLE t", clientId: 'c-1', userId: 'ignored' })).toEqual([
      'acme',
      "o'brien; DROP TABLE t",
      'c-1',
    ]);
    expect(q.uses('username')).toBe(true);
    expect(q.uses('userId')).toBe(false);
  });

  it('never puts a value into the SQL text', () => {
    const q = compileQuery('SELECT 1 FROM u WHERE name = ${username}', 'authQuery', AUTH);
    const evil = "x' OR '1'='1";
    q.values({ username: evil, clientId: 'c' });
    expect(q.text).not.toContain(evil);
    expect(q.text).toBe('SELECT 1 FROM u WHERE name = $1');
  });

  it('keeps a parameter from running into following digits or letters', () => {
    const q = compileQuery('SELECT ${username}1, ${username}::text', 'authQuery', AUTH);
    expect(q.text).toBe('SELECT $1 1, $1::text');
  });

  it('leaves string literals, quoted identifiers, comments and dollar quotes alone, and drops a trailing semicolon', () => {
    const sql =
      "SELECT 'it''s $1 ok', E'a\\'b', \"we\"\"ird\", $$ dollar $$, $tag$ in $x$ tag $tag$, $ident, a$1 FROM u /* a /* nested */ c */ WHERE name = ${username}; -- done";
    const q = compileQuery(sql, 'authQuery', AUTH);
    expect(q.text).toBe(
      "SELECT 'it''s $1 ok', E'a\\'b', \"we\"\"ird\", $$ dollar $$, $tag$ in $x$ tag $tag$, $ident, a$1 FROM u /* a /* nested */ c */ WHERE name = $1 -- done",
    );
    expect(q.params).toEqual(['username']);
  });

  it('refuses a placeholder inside a string literal, an identifier, a comment or a dollar-quoted string, naming the offset', () => {
    expect(problem("SELECT * FROM u WHERE name = '${username}'")).toMatch(
      /^BIFRO_AUTH_POSTGRES_OPTIONS_INVALID: @bifro\/plugin-auth-postgres: options\.authQuery: at offset 30: the placeholder \$\{username\} is inside a string literal/,
    );
    expect(problem('SELECT "${username}" FROM u WHERE name = ${username}')).toMatch(/inside a quoted identifier/);
    expect(problem('SELECT 1 FROM u WHERE name = ${username} -- ${clientId}')).toMatch(/inside a comment/);
    expect(problem('SELECT 1 FROM u /* ${clientId} */ WHERE name = ${username}')).toMatch(/inside a comment/);
    expect(problem('SELECT $q$${clientId}$q$ FROM u WHERE name = ${username}')).toMatch(/inside a dollar-quoted string/);
  });

  it('refuses unknown placeholders, placeholders not known yet, positional parameters and several statements', () => {
    expect(problem('SELECT 1 FROM u WHERE name = ${user}')).toMatch(
      /unknown placeholder \$\{user\} \(placeholders: \$\{username\}, \$\{clientId\}\)/,
    );
    expect(problem('SELECT 1 FROM u WHERE name = ${username} AND tenant = ${tenant}')).toMatch(
      /the placeholder \$\{tenant\} is not known when authQuery runs/,
    );
    expect(problem('SELECT 1 FROM u WHERE name = $1')).toMatch(/positional parameters like \$1 are not supported/);
    expect(problem('SELECT 1 FROM u WHERE name = ${username}; DELETE FROM u')).toMatch(/only one SQL statement is allowed/);
    expect(problem('SELECT 1 FROM u WHERE name = ${username')).toMatch(/without a closing/);
    expect(problem("SELECT 'open")).toMatch(/unterminated string literal/);
    expect(problem('SELECT 1 /* open')).toMatch(/unterminated \/\* comment/);
    expect(problem('  ;  ')).toMatch(/empty/);
  });

  it('the ACL query may use the tenant and user id the auth query found', () => {
    const q = compileQuery('SELECT permission, action, topic FROM r WHERE tenant = ${tenant} AND uid = ${userId}', 'aclQuery', ACL);
    expect(q.values({ tenant: 't', userId: 'u', username: 'x', clientId: 'c' })).toEqual(['t', 'u']);
  });
});
