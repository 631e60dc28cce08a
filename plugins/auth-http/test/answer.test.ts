import { ACL_RULES_ATTR } from '@bifro/spi';
import { interpretAnswer, interpretJson } from '../src/answer';

const ok = (body: string, status = 200) => ({ status, contentType: 'application/json', body: Buffer.from(body) });

describe('auth-http: reading the answer', () => {
  it('allow with tenant, user, attrs and ACL rules', () => {
    const d = interpretAnswer(
      ok(
        JSON.stringify({
          result: 'allow',
          tenant: 'acme',
          user: 'alice',
          attrs: { role: 'admin', __proto__x: 'y' },
          acl: [{ permission: 'allow', action: 'publish', topic: 'acme/%u/#' }],
          expiresAt: 1_900_000_000_000,
          extra: 'ignored',
        }),
      ),
      'json',
    );
    expect(d).toEqual({
      kind: 'allow',
      tenantId: 'acme',
      userId: 'alice',
      attrs: { role: 'admin', __proto__x: 'y', [ACL_RULES_ATTR]: '[{"permission":"allow","action":"publish","topic":"acme/%u/#"}]' },
      expiresAt: 1_900_000_000_000,
    });
    if (d.kind === 'allow') expect(Object.isFrozen(d.attrs)).toBe(true);
  });

  it('an attribute named __proto__ stays an attribute', () => {
    const d = interpretAnswer(ok('{"result":"allow","attrs":{"__proto__":"x","a":"b"}}'), 'json');
    expect(d.kind).toBe('allow');
    if (d.kind === 'allow') {
      expect(Object.keys(d.attrs).sort()).toEqual(['__proto__', 'a']);
      expect(Object.getOwnPropertyDescriptor(d.attrs, '__proto__')?.value).toBe('x');
    }
  });

  it('allow without tenant or user leaves them to the options', () => {
    expect(interpretJson({ result: 'allow' })).toEqual({
      kind: 'allow',
      tenantId: undefined,
      userId: undefined,
      attrs: {},
      expiresAt: undefined,
    });
  });

  it('deny with a reason and a message; notAuthorized by default', () => {
    expect(interpretJson({ result: 'deny', reason: 'badCredentials', message: 'wrong password' })).toEqual({
      kind: 'deny',
      reason: 'badCredentials',
      text: 'wrong password',
    });
    expect(interpretJson({ result: 'deny' })).toEqual({ kind: 'deny', reason: 'notAuthorized', text: undefined });
    expect(interpretJson({ result: 'deny', reason: 'banned' })).toMatchObject({ kind: 'deny', reason: 'banned' });
  });

  it('ignore', () => {
    expect(interpretJson({ result: 'ignore' })).toEqual({ kind: 'ignore' });
  });

  it('401 and 403 deny whatever the body; other statuses fail', () => {
    expect(interpretAnswer(ok('not json', 401), 'json')).toMatchObject({ kind: 'deny', reason: 'badCredentials' });
    expect(interpretAnswer(ok('', 403), 'status')).toMatchObject({ kind: 'deny', reason: 'notAuthorized' });
    for (const status of [500, 502, 404, 302, 100, 429]) {
      expect(interpretAnswer(ok('{"result":"allow","tenant":"t"}', status), 'json')).toEqual({
        kind: 'failed',
        code: 'BIFRO_AUTH_HTTP_SERVICE_FAILED',
        message: `the service answered HTTP ${status}`,
      });
    }
  });

  it('status mode: any 2xx allows, the body is not read', () => {
    expect(interpretAnswer(ok('garbage', 204), 'status')).toMatchObject({ kind: 'allow', tenantId: undefined });
    expect(interpretAnswer(ok('{"result":"deny"}', 200), 'status')).toMatchObject({ kind: 'allow' });
  });

  it.each([
    ['not JSON', '{"result": "allow"', /not JSON/],
    ['empty', '', /not JSON/],
    ['an array', '[]', /must be a JSON object, got an array/],
    ['a string', '"allow"', /must be a JSON object/],
    ['null', 'null', /must be a JSON object, got null/],
    ['no result', '{"tenant":"t"}', /answer.result must be "allow", "deny" or "ignore", got nothing/],
    ['an unknown result', '{"result":"ALLOW"}', /answer.result .* got "ALLOW"/],
    ['an empty tenant', '{"result":"allow","tenant":""}', /answer.tenant must be a non-empty string/],
    ['a numeric tenant', '{"result":"allow","tenant":7}', /answer.tenant must be a non-empty string, got number 7/],
    ['a numeric user', '{"result":"allow","user":7}', /answer.user must be a string/],
    ['attrs as a list', '{"result":"allow","attrs":["a"]}', /answer.attrs must be an object of strings/],
    ['a number in attrs', '{"result":"allow","attrs":{"n":1}}', /answer.attrs.n must be a string, got number 1/],
    ['bifro.acl in attrs', '{"result":"allow","attrs":{"bifro.acl":"[]"}}', /must not carry bifro.acl/],
    ['acl not a list', '{"result":"allow","acl":{}}', /answer.acl: must be an array/],
    ['a bad rule', '{"result":"allow","acl":[{"permission":"allow","action":"pub","topic":"a"}]}', /answer.acl\[0\].action/],
    ['a bad topic', '{"result":"allow","acl":[{"permission":"allow","action":"all","topic":"a/#/b"}]}', /answer.acl\[0\].topic/],
    ['a bad expiresAt', '{"result":"allow","expiresAt":"soon"}', /answer.expiresAt must be a time/],
    ['an unknown deny reason', '{"result":"deny","reason":"error"}', /answer.reason must be one of badCredentials, notAuthorized, banned/],
    ['a non-string message', '{"result":"deny","message":5}', /answer.message must be a string/],
  ])('a malformed answer (%s) is a failure naming the problem', (_label, body, message) => {
    const d = interpretAnswer(ok(body), 'json');
    expect(d.kind).toBe('failed');
    if (d.kind === 'failed') {
      expect(d.code).toBe('BIFRO_AUTH_HTTP_ANSWER_INVALID');
      expect(d.message).toMatch(message);
    }
  });
});
