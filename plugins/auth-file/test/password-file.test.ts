import { ACL_RULES_ATTR, aclRulesAttr } from '@bifro/spi';
import { formatHash, hashPassword, parseHash, verifyPassword } from '../src/hashes';
import { encodeFieldValue, formatEntryLine, lineIdentity, parseLine, parsePasswordFile, type TableParse } from '../src/password-file';
import { checkAclAttr } from '../src/provider';
import { deriveScramCredentials } from '../src/scram';
import { makeTempDir, mosquittoLine, removeTempDir } from './helpers';

const FILE = '/etc/bifro/passwd';

function parse(text: string, defaultTenant = 'default'): TableParse {
  return parsePasswordFile(text, { file: FILE, defaultTenant, checkAttr: checkAclAttr });
}

function problems(text: string): string[] {
  const r = parse(text);
  if (r.ok) throw new Error('expected an invalid file');
  return r.problems.map((p) => `${p.line}: ${p.message}`);
}

let SCRYPT: string;
let SEVEN: string;
let dir: string;

beforeAll(async () => {
  dir = makeTempDir();
  SCRYPT = formatHash(await hashPassword(Buffer.from('s3cret')));
  SEVEN = mosquittoLine(dir, 'mos', 'mos-pw').split(':')[1]!;
});
afterAll(() => removeTempDir(dir));

describe('password file: lines', () => {
  it('reads tenant:user:hash, user:hash (default tenant), comments, blank lines and CRLF', () => {
    const r = parse(`# users\n\nacme:alice:${SCRYPT}\r\n  # indented comment\nbob:${SEVEN}\n`, 'dflt');
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.table.entries.map((e) => [e.line, e.tenantId, e.userId, e.explicitTenant, e.hash.scheme])).toEqual([
      [3, 'acme', 'alice', true, 'scrypt'],
      [5, 'dflt', 'bob', false, 'pbkdf2-sha512'],
    ]);
    // Login names: tenant/user always, the bare user name for the default tenant.
    expect([...r.table.byLogin.keys()].sort()).toEqual(['acme/alice', 'bob', 'dflt/bob']);
  });

  it('reads attributes (percent-decoded) and SCRAM credentials after the hash', async () => {
    const c256 = await deriveScramCredentials('SCRAM-SHA-256', Buffer.from('pw'));
    const c512 = await deriveScramCredentials('SCRAM-SHA-512', Buffer.from('pw'));
    const hash = parseHash(SCRYPT);
    if (!hash.ok) throw new Error(hash.problem);
    const line = formatEntryLine({
      tenant: 't',
      user: 'u',
      hash: hash.hash,
      scram: { 'SCRAM-SHA-256': c256, 'SCRAM-SHA-512': c512 },
      attrs: { role: 'admin', note: 'a: 50% off', 'x.y-z_1': '' },
    });
    expect(line).toContain(':note=a%3A%2050%25%20off');
    const r = parse(line);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const e = r.table.entries[0]!;
    expect(e.attrs).toEqual({ role: 'admin', note: 'a: 50% off', 'x.y-z_1': '' });
    expect(e.scram['SCRAM-SHA-256']?.storedKey.equals(c256.storedKey)).toBe(true);
    expect(e.scram['SCRAM-SHA-512']?.serverKey.equals(c512.serverKey)).toBe(true);
    expect(e.scram['SCRAM-SHA-256']?.iterations).toBe(4096);
  });

  it('accepts an ACL rules attribute the SPI parser accepts, and refuses a malformed one naming the line', () => {
    const rules = aclRulesAttr([{ permission: 'allow', action: 'publish', topic: '%t/%u/#' }]);
    const r = parse(`u:${SCRYPT}:${ACL_RULES_ATTR}=${encodeFieldValue(rules)}`);
    expect(r.ok && r.table.entries[0]!.attrs[ACL_RULES_ATTR]).toBe(rules);
    const bad = encodeFieldValue(JSON.stringify([{ permission: 'maybe', action: 'publish', topic: '#' }]));
    expect(problems(`# c\nu:${SCRYPT}:${ACL_RULES_ATTR}=${bad}`)).toEqual([
      expect.stringMatching(/^2: attribute bifro\.acl: .*permission/),
    ]);
    expect(problems(`u:${SCRYPT}:${ACL_RULES_ATTR}=notjson`)).toEqual([expect.stringMatching(/^1: attribute bifro\.acl: not JSON/)]);
  });

  it('refuses plain-text passwords, $6$ (fast) hashes and unknown schemes, with the line number', () => {
    const six = mosquittoLine(dir, 'old', 'old-pw', 'sha512');
    expect(six).toMatch(/^old:\$6\$/);
    expect(problems(`# header\nalice:plaintext\n${six}\nbob:$2y$10$abcdefghijklmnopqrstuu\ncarol:$argon2id$v=19$x\ndave:$nope$x`)).toEqual([
      expect.stringMatching(/^2: the password is not hashed \(plain text is refused\)/),
      expect.stringMatching(/^3: user old: a \$6\$ hash .* fast hash and is refused/),
      expect.stringMatching(/^4: user bob: the \$2y\$ hash scheme is not supported/),
      expect.stringMatching(/^5: user carol: the \$argon2id\$ hash scheme is not supported/),
      expect.stringMatching(/^6: user dave: unknown hash scheme/),
    ]);
  });

  it('refuses malformed hashes, weak scrypt costs, bad names and fields', () => {
    const salt = 'c2FsdHNhbHRzYWx0c2FsdA==';
    const key = Buffer.alloc(32, 7).toString('base64');
    expect(
      problems(
        [
          `a:$scrypt$ln=10,r=8,p=1$${salt}$${key}`,
          `b:$scrypt$ln=15,r=8$${salt}$${key}`,
          `c:$scrypt$ln=15,r=8,p=1$not*base64$${key}`,
          `d:$7$0$${salt}$${key}`,
          `e:$7$101$${salt}$${key}`,
          `t/x:f:${SCRYPT}`,
          `a:b:c:${SCRYPT}`,
          `${SCRYPT}`,
          `g:${SCRYPT}:justtext`,
          `h:${SCRYPT}:scram-sha-256=1$x$y$z`,
          `i:${SCRYPT}:scram-foo=1`,
          `j:${SCRYPT}:bad name=1`,
          `k:${SCRYPT}:v=%zz`,
          `l:${SCRYPT}:r=1:r=2`,
          `m`,
        ].join('\n'),
      ),
    ).toEqual([
      expect.stringMatching(/^1: user a: scrypt cost ln=10 is below the minimum 14/),
      expect.stringMatching(/^2: user b: bad \$scrypt\$ parameters/),
      expect.stringMatching(/^3: user c: the \$scrypt\$ salt must be base64/),
      expect.stringMatching(/^4: user d: bad \$7\$ iteration count "0"/),
      expect.stringMatching(/^5: user e: the \$7\$ hash must be base64 of 64 bytes/),
      expect.stringMatching(/^6: a tenant cannot contain ":" or "\/"/),
      expect.stringMatching(/^7: too many fields before the hash/),
      expect.stringMatching(/^8: the line starts with a hash/),
      expect.stringMatching(/^9: field "justtext" after the hash must be <name>=<value>/),
      expect.stringMatching(/^10: user h: scram-sha-256 iterations "1" out of range/),
      expect.stringMatching(/^11: attribute name "scram-foo" is reserved/),
      expect.stringMatching(/^12: attribute name "bad name" must be/),
      expect.stringMatching(/^13: attribute v: bad percent-encoding/),
      expect.stringMatching(/^14: attribute r given twice/),
      expect.stringMatching(/^15: no password hash/),
    ]);
  });

  it('refuses a user twice in a tenant, and login names two lines would answer to', () => {
    expect(problems(`alice:${SCRYPT}\ndefault:alice:${SCRYPT}\nacme:bob:${SCRYPT}\nacme:bob:${SCRYPT}`)).toEqual([
      '2: user alice of tenant default is already on line 1',
      '4: user bob of tenant acme is already on line 3',
    ]);
    // "a/b" in the default tenant answers to login a/b, as does user b of tenant a.
    expect(problems(`a:b:${SCRYPT}\na/b:${SCRYPT}`)).toEqual(['2: login name a/b is ambiguous: line 1 answers to it too']);
    // The same user in two tenants is two users.
    expect(parse(`t1:alice:${SCRYPT}\nt2:alice:${SCRYPT}`).ok).toBe(true);
  });

  it('warns about mosquitto $7$ lines with few iterations, naming file and line', () => {
    const r = parse(`# x\nmos:${SEVEN}`);
    expect(r.ok && r.table.warnings).toEqual([
      expect.stringMatching(/^\/etc\/bifro\/passwd:2: user mos has a \$7\$ hash of only 101 PBKDF2 iterations/),
    ]);
  });

  it('an empty file (or only comments) is valid and has no users', () => {
    for (const text of ['', '# nobody yet\n', '\n\n']) {
      const r = parse(text);
      expect(r.ok && r.table.entries.length).toBe(0);
    }
  });

  it('reads the identity of lines it otherwise refuses (for bifro passwd), and formats what it parses', () => {
    expect(lineIdentity('old:$6$abc$def')).toEqual({ user: 'old' });
    expect(lineIdentity('acme:bob:$bad')).toEqual({ tenant: 'acme', user: 'bob' });
    expect(lineIdentity('# c')).toBeUndefined();
    const parsed = parseLine(`acme:bob:${SCRYPT}:role=x`, 1, 'default');
    expect(parsed.kind).toBe('entry');
    if (parsed.kind !== 'entry') return;
    expect(formatEntryLine({ tenant: 'acme', user: 'bob', hash: parsed.entry.hash, attrs: parsed.entry.attrs })).toBe(
      `acme:bob:${SCRYPT}:role=x`,
    );
  });
});

describe('password hashes', () => {
  it('scrypt: a new hash has N=2^15, r=8, p=1, a random salt, and verifies only the right password', async () => {
    const a = await hashPassword(Buffer.from('correct horse'));
    const b = await hashPassword(Buffer.from('correct horse'));
    expect(formatHash(a)).toMatch(/^\$scrypt\$ln=15,r=8,p=1\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*$/);
    expect(a.salt.equals(b.salt)).toBe(false);
    expect(await verifyPassword(a, Buffer.from('correct horse'))).toBe(true);
    expect(await verifyPassword(a, Buffer.from('correct horsf'))).toBe(false);
    expect(await verifyPassword(a, Buffer.from(''))).toBe(false);
    const reparsed = parseHash(formatHash(a));
    expect(reparsed.ok && (await verifyPassword(reparsed.hash, Buffer.from('correct horse')))).toBe(true);
  });

  it('mosquitto $7$: lines written by the real mosquitto_passwd verify, a wrong password does not', async () => {
    const line = mosquittoLine(dir, 'dev', 'päss wörd');
    const parsed = parseHash(line.split(':')[1]!);
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.hash).toMatchObject({ scheme: 'pbkdf2-sha512', iterations: 101 });
    expect(await verifyPassword(parsed.hash, Buffer.from('päss wörd', 'utf8'))).toBe(true);
    expect(await verifyPassword(parsed.hash, Buffer.from('päss word', 'utf8'))).toBe(false);
  });

  it('runs the KDF off the event loop: timers keep firing while a hash is checked', async () => {
    const hash = await hashPassword(Buffer.from('pw'));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    try {
      await verifyPassword(hash, Buffer.from('pw'));
      // scrypt N=2^15 takes ~100 ms here; run synchronously it would let no timer fire.
      expect(ticks).toBeGreaterThan(1);
    } finally {
      clearInterval(timer);
    }
  });
});
