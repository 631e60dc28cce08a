import {
  credentialsFromSalted,
  deriveScramCredentials,
  formatScramCredentials,
  parseClientFirst,
  parseScramCredentials,
  saltedPassword,
  ScramClient,
  serverFirst,
  verifyClientFinal,
  type ClientFirst,
  type ScramMethod,
} from '../src/scram';

function first(text: string): ClientFirst {
  const parsed = parseClientFirst(Buffer.from(text));
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
}

describe('SCRAM (RFC 5802 / RFC 7677)', () => {
  it('matches the SCRAM-SHA-256 test vector of RFC 7677 §3 (user "user", password "pencil")', async () => {
    const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
    const creds = await deriveScramCredentials('SCRAM-SHA-256', Buffer.from('pencil'), 4096, salt);
    const cf = first('n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
    expect(cf).toMatchObject({
      gs2Header: 'n,,',
      username: 'user',
      clientNonce: 'rOprNGfwEbeRWgbNEkqO',
      bare: 'n=user,r=rOprNGfwEbeRWgbNEkqO',
    });
    const exchange = serverFirst(creds, cf, '%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0');
    expect(exchange.serverFirst).toBe('r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096');
    const result = verifyClientFinal(
      exchange,
      Buffer.from('c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ='),
    );
    expect(result).toEqual({ ok: true, serverFinal: 'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=' });
    // The same vector through the client helper.
    const client = new ScramClient('SCRAM-SHA-256', 'user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
    expect(client.first).toBe('n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
    expect(await client.final(exchange.serverFirst)).toBe(
      'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
    );
    expect(client.verifyServer('v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=')).toBe(true);
    expect(client.verifyServer('v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=')).toBe(false);
  });

  it.each<ScramMethod>(['SCRAM-SHA-256', 'SCRAM-SHA-512'])(
    '%s: a full exchange succeeds and the client verifies the server',
    async (method) => {
      const creds = await deriveScramCredentials(method, Buffer.from('s3cret'), 4096);
      const client = new ScramClient(method, 'al,i=ce', 's3cret');
      expect(client.first).toContain('n=al=2Ci=3Dce,');
      const cf = first(client.first);
      expect(cf.username).toBe('al,i=ce');
      const exchange = serverFirst(creds, cf);
      expect(exchange.nonce.startsWith(cf.clientNonce)).toBe(true);
      expect(exchange.nonce.length).toBeGreaterThan(cf.clientNonce.length + 16);
      const result = verifyClientFinal(exchange, Buffer.from(await client.final(exchange.serverFirst)));
      expect(result.ok).toBe(true);
      if (result.ok) expect(client.verifyServer(result.serverFinal)).toBe(true);
    },
  );

  it.each<ScramMethod>(['SCRAM-SHA-256', 'SCRAM-SHA-512'])('%s: a wrong password gives a wrong proof', async (method) => {
    const creds = await deriveScramCredentials(method, Buffer.from('s3cret'), 4096);
    const client = new ScramClient(method, 'alice', 'wrong');
    const exchange = serverFirst(creds, first(client.first));
    const result = verifyClientFinal(exchange, Buffer.from(await client.final(exchange.serverFirst)));
    expect(result).toEqual({ ok: false, badProof: true, problem: 'wrong client proof' });
  });

  it('refuses a client-final whose nonce, channel binding or proof is not the exchange', async () => {
    const creds = await deriveScramCredentials('SCRAM-SHA-256', Buffer.from('pw'), 4096);
    const client = new ScramClient('SCRAM-SHA-256', 'u', 'pw');
    const exchange = serverFirst(creds, first(client.first));
    const final = await client.final(exchange.serverFirst);
    const check = (text: string): string => {
      const r = verifyClientFinal(exchange, Buffer.from(text));
      return r.ok ? 'ok' : r.problem;
    };
    expect(check(final)).toBe('ok');
    expect(check(final.replace(`r=${exchange.nonce}`, `r=${exchange.nonce}x`))).toMatch(/nonce/);
    expect(check(final.replace('c=biws', 'c=eSws'))).toMatch(/channel binding/);
    expect(check(final.replace(/p=.*$/, 'p=AAAA'))).toBe('bad client proof');
    expect(check(final.replace(/,p=.*$/, ''))).toMatch(/lacks p=/);
    expect(verifyClientFinal(exchange, undefined)).toMatchObject({ ok: false, badProof: false });
  });

  it('parses client-first messages and refuses malformed ones', () => {
    expect(first('y,,n=bob,r=abc')).toMatchObject({ gs2Header: 'y,,', username: 'bob' });
    expect(first('n,a=bob,n=bob,r=abc')).toMatchObject({ authzid: 'bob', gs2Header: 'n,a=bob,' });
    expect(first('n,,n=bob,r=abc,x=ext')).toMatchObject({ clientNonce: 'abc' });
    const problem = (text: string | undefined): string => {
      const r = parseClientFirst(text === undefined ? undefined : Buffer.from(text));
      return typeof r === 'string' ? r : 'parsed';
    };
    expect(problem(undefined)).toMatch(/no client-first/);
    expect(problem('n=bob,r=abc')).toMatch(/GS2 header/);
    expect(problem('p=tls-unique,,n=bob,r=abc')).toMatch(/channel binding is not supported/);
    expect(problem('q,,n=bob,r=abc')).toMatch(/flag/);
    expect(problem('n,,m=ext,n=bob,r=abc')).toMatch(/mandatory/);
    expect(problem('n,,r=abc')).toMatch(/lacks n=/);
    expect(problem('n,,n=b=ob,r=abc')).toMatch(/bad user name/);
    expect(problem('n,,n=bob')).toMatch(/lacks r=/);
    expect(problem('n,,n=bob,r=a b')).toMatch(/bad client nonce/);
    expect(problem(`n,,n=bob,r=${'a'.repeat(5000)}`)).toMatch(/too long/);
  });

  it('stores StoredKey and ServerKey, not the salted password, and reads them back', async () => {
    const salt = Buffer.from('0123456789abcdef');
    const salted = await saltedPassword('SCRAM-SHA-512', Buffer.from('pw'), salt, 5000);
    const creds = credentialsFromSalted('SCRAM-SHA-512', salted, salt, 5000);
    const text = formatScramCredentials(creds);
    expect(text).not.toContain(salted.toString('base64'));
    expect(text.startsWith('5000$')).toBe(true);
    const back = parseScramCredentials('SCRAM-SHA-512', text);
    expect(typeof back === 'object' && back.storedKey.equals(creds.storedKey) && back.serverKey.equals(creds.serverKey)).toBe(true);
    expect(parseScramCredentials('SCRAM-SHA-256', text)).toMatch(/32 bytes/);
    expect(parseScramCredentials('SCRAM-SHA-512', `100$${text.slice(5)}`)).toMatch(/out of range/);
  });
});
