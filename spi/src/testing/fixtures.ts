import type { AccessAction } from '../acl';
import type { AuthRequest } from '../auth';
import type { ClientInfo } from '../common';

/**
 * A client as the auth chain would have established it, for plugin calls that take a
 * {@link ClientInfo}. Fields not given take plain defaults (tenant `t1`, user `u1`, MQTT 5).
 *
 * @example
 * ```ts
 * const admin = sampleClient({ attrs: { role: 'admin' } });
 * ```
 */
export function sampleClient(overrides: Partial<ClientInfo> = {}): ClientInfo {
  return {
    tenantId: 't1',
    userId: 'u1',
    clientId: 'client-1',
    protocolVersion: 5,
    remoteAddress: '127.0.0.1',
    remotePort: 50000,
    listener: 'tcp',
    attrs: {},
    ...overrides,
  };
}

/** Ordinary but varied clients the non-storage kits call plugins with. */
export function ordinaryClients(): ClientInfo[] {
  return [
    sampleClient(),
    sampleClient({ protocolVersion: 3, clientId: 'legacy-3' }),
    sampleClient({ protocolVersion: 4, tenantId: 'other-tenant', userId: 'someone', remoteAddress: '::1' }),
    sampleClient({ clientId: 'auto-assigned-8f3a', attrs: { role: 'device', group: 'a/b' } }),
    sampleClient({ tenantId: 'tenant-ü', userId: 'usér', clientId: 'clïent/with/slashes', listener: 'wss' }),
  ];
}

/** A CONNECT as the broker would hand it to an auth provider, with plain defaults. */
export function sampleAuthRequest(overrides: Partial<AuthRequest> = {}): AuthRequest {
  return {
    protocolVersion: 4,
    clientId: 'client-1',
    remoteAddress: '127.0.0.1',
    remotePort: 50000,
    listener: 'tcp',
    ...overrides,
  };
}

/** Ordinary CONNECT variants an auth provider must answer without throwing, by description. */
export function ordinaryAuthRequests(): Array<{ readonly label: string; readonly request: AuthRequest }> {
  const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);
  return [
    { label: 'no username and no password', request: sampleAuthRequest() },
    { label: 'username without password', request: sampleAuthRequest({ username: 'alice' }) },
    { label: 'username and password', request: sampleAuthRequest({ username: 'alice', password: new TextEncoder().encode('secret') }) },
    { label: 'empty client id', request: sampleAuthRequest({ clientId: '', username: 'alice', password: bytes(1, 2, 3) }) },
    { label: 'empty username and empty password', request: sampleAuthRequest({ username: '', password: bytes() }) },
    {
      label: 'binary (non UTF-8) password',
      request: sampleAuthRequest({ username: 'alice', password: bytes(0x00, 0xff, 0xfe, 0xc3, 0x28, 0x80) }),
    },
    { label: 'username with separators and unicode', request: sampleAuthRequest({ username: 'tenant/üser:x@y', password: bytes(0x61) }) },
    { label: 'very long username', request: sampleAuthRequest({ username: 'u'.repeat(65535), password: bytes(0x61) }) },
    { label: 'MQTT 3.1 client', request: sampleAuthRequest({ protocolVersion: 3, clientId: 'c3', username: 'alice' }) },
    {
      label: 'MQTT 5 client with user properties',
      request: sampleAuthRequest({
        protocolVersion: 5,
        username: 'alice',
        userProperties: [
          ['k', 'v'],
          ['k', 'w'],
        ],
      }),
    },
    {
      label: 'unverified TLS client certificate',
      request: sampleAuthRequest({
        listener: 'tls',
        clientCertificate: {
          subject: { CN: 'device-17', O: 'acme' },
          issuer: { CN: 'unknown-ca' },
          fingerprint256: 'AB:CD',
          serialNumber: '01',
          authorized: false,
          raw: bytes(0x30, 0x82),
        },
      }),
    },
    { label: 'IPv6 remote address', request: sampleAuthRequest({ remoteAddress: '::ffff:10.0.0.1', remotePort: 1 }) },
  ];
}

/** Ordinary actions of each type an access control plugin must decide on, by action type. */
export function ordinaryActions(): { readonly [K in AccessAction['type']]: ReadonlyArray<Extract<AccessAction, { type: K }>> } {
  return {
    connect: [{ type: 'connect' }],
    publish: [
      { type: 'publish', topic: 'a/b', qos: 0, retain: false },
      { type: 'publish', topic: 'a/b/c', qos: 1, retain: true },
      { type: 'publish', topic: '/leading/slash', qos: 2, retain: false },
      { type: 'publish', topic: '$SYS/broker', qos: 0, retain: false },
      { type: 'publish', topic: 'ünï/cødé', qos: 1, retain: false },
      { type: 'publish', topic: 'x', qos: 2, retain: true },
    ],
    subscribe: [
      { type: 'subscribe', filter: 'a/b', qos: 0 },
      { type: 'subscribe', filter: 'a/+/c', qos: 1 },
      { type: 'subscribe', filter: '#', qos: 2 },
      { type: 'subscribe', filter: '$share/group/a/#', qos: 1 },
      { type: 'subscribe', filter: '$SYS/#', qos: 0 },
      { type: 'subscribe', filter: '+', qos: 0 },
    ],
    unsubscribe: [
      { type: 'unsubscribe', filter: 'a/b' },
      { type: 'unsubscribe', filter: '#' },
      { type: 'unsubscribe', filter: '$share/group/a/#' },
    ],
  };
}
