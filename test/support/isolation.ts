import { readdirSync } from 'node:fs';
import { connectAsync, publish, subscribe, tryConnect, collect, uniqueName, type ProtocolVersion } from './mqtt-helpers';

/**
 * The isolation check every hostile-input test ends with: after whatever one connection did, other
 * connections still log in with *their own* credentials (and only with them), land in their own
 * tenant, and round-trip a message. The broker must run the `auth-user-table` fixture plugin
 * (see {@link USER_TABLE_AUTH}): alice (tenant ta) and bob (tenant tb).
 */

/** bifro.yml lines that load the user-table fixture as the only auth plugin (fixture plugins dir). */
export const USER_TABLE_AUTH = 'plugins:\n  auth: ["@fixtures/auth-user-table"]\n';

/**
 * The back-off of password guessing off (security.loginFailures): a suite that runs
 * {@link expectOthersUnaffected} after each of hundreds of cases makes as many wrong logins from
 * 127.0.0.1, which the default back-off rightly stops; it is tested in 54-brute-force.
 */
export const NO_LOGIN_BACKOFF = 'security:\n  loginFailures: { perLogin: 0, perAddress: 0 }\n';

export const USERS = {
  alice: { password: 'alice-pw', tenant: 'ta' },
  bob: { password: 'bob-pw', tenant: 'tb' },
} as const;

/**
 * Throws unless: alice and bob each connect with their own password (CONNACK 0), a wrong password
 * is refused (so no connection is handed someone else's login), each round-trips a QoS 1 message
 * to itself, and bob does not see alice's message (tenants stay apart).
 */
export async function expectOthersUnaffected(port: number, protocolVersion: ProtocolVersion = 5): Promise<void> {
  const wrong = await tryConnect(port, { protocolVersion, username: 'alice', password: 'not-alice', clientId: uniqueName('wrong') });
  wrong.client.end(true);
  if (wrong.connack !== undefined && (wrong.connack.reasonCode ?? wrong.connack.returnCode ?? 0) === 0)
    throw new Error('a wrong password was accepted: another login leaked into this connection');

  const topic = uniqueName('isolation/check');
  const alice = await connectAsync(port, {
    protocolVersion,
    username: 'alice',
    password: USERS.alice.password,
    clientId: uniqueName('alice'),
  });
  const bob = await connectAsync(port, { protocolVersion, username: 'bob', password: USERS.bob.password, clientId: uniqueName('bob') });
  try {
    const aliceGot = collect(alice.client);
    const bobGot = collect(bob.client);
    await subscribe(alice.client, topic, { qos: 1 });
    await subscribe(bob.client, topic, { qos: 1 });
    await publish(alice.client, topic, 'from-alice', { qos: 1 });
    await publish(bob.client, topic, 'from-bob', { qos: 1 });
    const a = await aliceGot.waitFor(1);
    const b = await bobGot.waitFor(1);
    const payloads = (ms: { payload: Buffer }[]): string[] => ms.map((m) => m.payload.toString());
    if (payloads(a).join() !== 'from-alice' || payloads(b).join() !== 'from-bob')
      throw new Error(`tenants mixed or messages lost: alice got [${payloads(a).join()}], bob got [${payloads(b).join()}]`);
  } finally {
    alice.client.end(true);
    bob.client.end(true);
  }
}

/**
 * `n` fresh MQTT 3.1.1 logins, alternating alice and bob, each with its own password; returns a
 * line per login that did not get CONNACK 0 (empty when all did). The shared-parser defect showed
 * exactly here: after one malformed CONNECT, 9 of the next 10 logins failed.
 */
export async function failedLogins(port: number, n = 10): Promise<string[]> {
  const failures: string[] = [];
  for (let i = 0; i < n; i++) {
    const user = i % 2 === 0 ? 'alice' : 'bob';
    const ok = await tryConnect(port, {
      protocolVersion: 4,
      username: user,
      password: USERS[user].password,
      clientId: uniqueName('next'),
      connectTimeout: 2000,
    });
    ok.client.end(true);
    if ((ok.connack?.returnCode ?? -1) !== 0)
      failures.push(`login ${i + 1} (${user}) failed: ${ok.error?.message ?? `CONNACK ${ok.connack?.returnCode}`}`);
  }
  return failures;
}

/** Open file descriptors of this process (the in-process broker's sockets among them), from /proc. */
export function openFileDescriptors(): number {
  return readdirSync('/proc/self/fd').length;
}
