import { sampleAuthRequest } from '@bifro/spi/testing';
import { escapeHeaderValue, parseTemplate, PLACEHOLDERS, renderTemplate, TemplateValues, type Escaping } from '../src/template';

const CERT = {
  subject: { CN: 'device-17', O: 'Acme' },
  issuer: { CN: 'Bifro Test CA' },
  fingerprint256: 'AB:CD',
  serialNumber: '2002',
  authorized: true,
  raw: new Uint8Array([1]),
};

function render(source: string, escaping: Escaping, overrides: Parameters<typeof sampleAuthRequest>[0] = {}): string {
  return renderTemplate(parseTemplate(source), new TemplateValues(sampleAuthRequest(overrides)), escaping);
}

describe('auth-http: templates', () => {
  it('substitutes every placeholder from the CONNECT', () => {
    const req = {
      clientId: 'c-1',
      username: 'alice',
      password: Buffer.from('pä ss'),
      remoteAddress: '10.0.0.7',
      remotePort: 51000,
      listener: 'tls',
      protocolVersion: 5 as const,
      clientCertificate: CERT,
    };
    const all = Object.keys(PLACEHOLDERS)
      .map((n) => `${n}={${n}}`)
      .join(';');
    expect(render(all, 'text', req)).toBe(
      [
        'clientId=c-1',
        'username=alice',
        'password=pä ss',
        `passwordBase64=${Buffer.from('pä ss').toString('base64')}`,
        `basicAuth=${Buffer.from('alice:pä ss').toString('base64')}`,
        'remoteAddress=10.0.0.7',
        'remotePort=51000',
        'listener=tls',
        'protocolVersion=5',
        'certCN=device-17',
        'certSubject=CN=device-17,O=Acme',
        'certIssuer=CN=Bifro Test CA',
        'certFingerprint=AB:CD',
        'certSerial=2002',
        'certVerified=true',
      ].join(';'),
    );
  });

  it('renders absent values (no username, password or certificate) as empty strings', () => {
    expect(render('[{username}][{password}][{passwordBase64}][{certCN}][{certSubject}][{certVerified}]', 'text')).toBe('[][][][][][false]');
    expect(render('{basicAuth}', 'text')).toBe(Buffer.from(':').toString('base64'));
  });

  it('keeps binary passwords exact in passwordBase64 and basicAuth', () => {
    const password = Uint8Array.from([0x00, 0xff, 0xfe, 0xc3, 0x28]);
    expect(Buffer.from(render('{passwordBase64}', 'text', { password }), 'base64')).toEqual(Buffer.from(password));
    const basic = Buffer.from(render('{basicAuth}', 'text', { username: 'u', password }), 'base64');
    expect(basic).toEqual(Buffer.concat([Buffer.from('u:'), Buffer.from(password)]));
  });

  it('reads a password that is a view into a larger buffer without its neighbours', () => {
    const big = Buffer.from('xxsecretyy');
    expect(render('{password}', 'text', { password: big.subarray(2, 8) })).toBe('secret');
  });

  it('{{ and }} are literal braces; the rest of the text is kept', () => {
    expect(render('{{"user": "{username}"}}', 'text', { username: 'bob' })).toBe('{"user": "bob"}');
    expect(render('{{username}}', 'text', { username: 'bob' })).toBe('{username}');
    expect(render('plain', 'url')).toBe('plain');
  });

  it('rejects unknown placeholders, unclosed braces and lone closing braces, saying where', () => {
    expect(() => parseTemplate('{nope}')).toThrow(/unknown placeholder \{nope\}.*\{username\}/);
    expect(() => parseTemplate('a{username')).toThrow(/"\{" at position 1 is not closed/);
    expect(() => parseTemplate('a}b')).toThrow(/lone "\}" at position 1/);
    expect(() => parseTemplate('{}')).toThrow(/unknown placeholder \{\}/);
  });

  it('url escaping keeps a value inside its path segment or query value', () => {
    expect(render('/auth/{username}?c={clientId}', 'url', { username: 'a/b?c=d&e#f', clientId: 'x y+%' })).toBe(
      '/auth/a%2Fb%3Fc%3Dd%26e%23f?c=x%20y%2B%25',
    );
    expect(render('/{username}', 'url', { username: 'ü' })).toBe('/%C3%BC');
  });

  it('header escaping makes CR/LF injection impossible and is reversible', () => {
    const evil = 'bob\r\nX-Admin: yes';
    const out = render('Bearer {username}', 'header', { username: evil });
    expect(out).toBe('Bearer bob%0D%0AX-Admin: yes');
    expect(out).not.toMatch(/[\r\n]/);
    expect(decodeURIComponent(out.slice('Bearer '.length))).toBe(evil);
    expect(escapeHeaderValue('100% ü\u0000')).toBe('100%25 %C3%BC%00');
    expect(escapeHeaderValue('plain value ~!')).toBe('plain value ~!');
    expect(escapeHeaderValue('😀')).toBe('%F0%9F%98%80');
  });

  it('text escaping leaves values as they are (the JSON or form encoder escapes them)', () => {
    const value = 'a"b\\c\n{}';
    expect(render('{username}', 'text', { username: value })).toBe(value);
    expect(JSON.parse(JSON.stringify({ u: render('{username}', 'text', { username: value }) }))).toEqual({ u: value });
  });

  it('lists what a template uses', () => {
    expect([...parseTemplate('{username}:{password}/{username}').uses].sort()).toEqual(['password', 'username']);
    expect(parseTemplate('static').uses.size).toBe(0);
  });
});
