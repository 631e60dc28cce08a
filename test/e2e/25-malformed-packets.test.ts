import { writeFileSync } from 'node:fs';
import type { MqttClient } from 'mqtt';
import { expectOthersUnaffected, openFileDescriptors, NO_LOGIN_BACKOFF, USER_TABLE_AUTH } from '../support/isolation';
import { collect, connectAsync, subscribe, uniqueName, waitUntil, type MessageCollector } from '../support/mqtt-helpers';
import {
  ack,
  auth,
  cat,
  connect,
  describeExpect,
  describeObserved,
  disconnect,
  frame,
  hex,
  judge,
  loginConnect,
  PID,
  PINGREQ,
  prop,
  props,
  publish,
  runBytes,
  str,
  subscribe as subscribeBytes,
  TYPE,
  u16,
  unsubscribe,
  type ConnectSpec,
  type Expect,
  type Version,
} from '../support/mqtt-bytes';
import { startTestBroker, type TestBroker } from '../support/test-broker';

/**
 * Standing defence 1 (issue "Hardening"): byte-level malformed input, packet type by packet type,
 * for MQTT 3.1.1 and 5.0 (and a few 3.1), in the habit of mosquitto's test/broker/13-malformed-*.
 * One table: each row is a name (with the clause of the specification it rests on), a protocol
 * version, the bytes, and the outcome the specification requires:
 *
 * - 3.1/3.1.1 after CONNACK: the connection is closed and nothing is sent [MQTT-4.8.0-1];
 * - 5.0 after CONNACK: DISCONNECT with 0x81 Malformed Packet / 0x82 Protocol Error (or the code the
 *   clause names) and the close (§4.13.1; where the specification leaves the choice between two
 *   codes, both are accepted);
 * - a bad CONNECT: closed without CONNACK in 3.1.1 [MQTT-3.1.4-1], in 5.0 optionally after a
 *   CONNACK with the error code (§4.13.1);
 * - the valid rows in between (boundary cases a strict decoder must still accept) stay open.
 *
 * The hostile connection logs in as alice or bob with the right password first (unless the row is
 * about the CONNECT itself). After every row, other connections log in with their own credentials,
 * a wrong password is refused and each round-trips a message (expectOthersUnaffected).
 * BIFRO_MALFORMED_REPORT=<file> writes every failing row (bytes, outcome, requirement) to a file.
 */

jest.setTimeout(15_000);

type Group =
  | 'CONNECT'
  | 'CONNACK'
  | 'PUBLISH'
  | 'PUBACK'
  | 'PUBREC'
  | 'PUBREL'
  | 'PUBCOMP'
  | 'SUBSCRIBE'
  | 'SUBACK/UNSUBACK'
  | 'UNSUBSCRIBE'
  | 'PINGREQ'
  | 'PINGRESP'
  | 'DISCONNECT'
  | 'AUTH'
  | 'reserved types';

interface Case {
  group: Group;
  v: Version;
  name: string;
  bytes: Buffer | ((ctx: { topicAliasMaximum: number; clientId: string }) => Buffer);
  expect: Expect;
  /** Log in first (default: true except for the CONNECT group). */
  login?: boolean;
  /** Extra CONNECT fields for the login (e.g. a will). */
  loginExtra?: Partial<ConnectSpec>;
  /** For DISCONNECT rows: the login carries a will, which must (not) be published. */
  will?: 'published' | 'discarded';
}

// ---------------------------------------------------------------------------------------------
// Outcomes

const CLOSE: Expect = { t: 'close' };
const D = (...codes: number[]): Expect => ({ t: 'disconnect', codes });
/** The error the specification names for v5 (`codes`); v3.1/3.1.1 just close [MQTT-4.8.0-1]. */
const err = (v: Version, ...codes: number[]): Expect => (v === 5 ? D(...codes) : CLOSE);
const MAL = (v: Version): Expect => err(v, 0x81);
const PROTO = (v: Version): Expect => err(v, 0x82);
/** The specification says the packet is invalid without naming which of the two codes. */
const MAL_OR_PROTO = (v: Version): Expect => err(v, 0x81, 0x82);
/**
 * An ill-formed topic filter: v5 0x8F "Topic Filter invalid" is defined as "correctly formed but not
 * allowed" (§3.9.3), so an ill-formed one is a malformed packet / protocol error (§1.2, §4.13);
 * v3.1.1: a protocol violation, close [MQTT-4.8.0-1].
 */
const BAD_FILTER = MAL_OR_PROTO;
/** A bad CONNECT: v3.1.1 close without CONNACK [MQTT-3.1.4-1]; v5 CONNACK with `codes` allowed first (§4.13.1); 3.1 any refusal. */
function badConnect(v: Version, codes: number[] = [0x81, 0x82]): Expect {
  if (v === 5) return { t: 'refuse', connack: 'optional', codes };
  if (v === 4) return { t: 'refuse', connack: 'forbidden', codes: [] };
  return { t: 'refuse', connack: 'optional', codes: [0x01, 0x02, 0x03, 0x04, 0x05] };
}
const OPEN: Expect = { t: 'open' };
const answers = (reply: number, ...replyCodes: number[]): Expect => ({
  t: 'open',
  reply,
  ...(replyCodes.length > 0 ? { replyCodes } : {}),
});

// ---------------------------------------------------------------------------------------------
// Byte helpers

/** Strings that are not well-formed UTF-8, or contain U+0000 [MQTT-1.5.3-1/2] (v5 [MQTT-1.5.4-1/2]). */
const BAD_UTF8: [string, Buffer][] = [
  ['U+0000', hex('610062')],
  ['overlong "/" (C0 AF)', hex('61c0af')],
  ['overlong NUL (C0 80)', hex('61c080')],
  ['a surrogate (ED A0 80)', hex('61eda080')],
  ['byte FF', hex('61ff')],
  ['a truncated sequence (E2 82)', hex('61e282')],
  ['a 5-byte sequence (F8 88 80 80 80)', hex('61f888808080')],
  ['a code point above U+10FFFF (F4 90 80 80)', hex('61f4908080')],
];
const SOME_BAD_UTF8 = BAD_UTF8.filter((_, i) => i % 2 === 0);

const V45: Version[] = [4, 5];
const vs = (v: Version): string => (v === 5 ? '[MQTT-1.5.4-1/2]' : '[MQTT-1.5.3-1/2]');

/** A CONNECT that logs in as alice; `over` changes fields. */
function goodConnect(v: Version, over: Partial<ConnectSpec> = {}): Buffer {
  return connect({ v, clientId: uniqueName('m25c'), username: 'alice', password: 'alice-pw', ...over });
}

/** A CONNECT body with a given flags byte and payload, as the bytes after the keep alive. */
function rawConnect(v: Version, flags: number, payload: Buffer, p: Buffer = props()): Buffer {
  return frame(0x10, str(v === 3 ? 'MQIsdp' : 'MQTT'), v, flags, u16(30), v === 5 ? p : [], payload);
}

const TOPIC = 'm25/t';

// ---------------------------------------------------------------------------------------------
// The table

const cases: Case[] = [];
const add = (group: Group, v: Version, name: string, bytes: Case['bytes'], expect: Expect, more: Partial<Case> = {}): void => {
  cases.push({ group, v, name, bytes, expect, ...more });
};

// CONNECT ----------------------------------------------------------------------------------------
for (const v of V45) {
  const C = (name: string, bytes: Case['bytes'], e: Expect = badConnect(v)): void => add('CONNECT', v, name, bytes, e, { login: false });
  C('valid CONNECT (control)', () => goodConnect(v), answers(TYPE.CONNACK, 0));
  C(
    'PINGREQ right after CONNECT, before CONNACK, is allowed (§3.1.4 "Clients need not wait for a CONNACK")',
    () => cat(goodConnect(v), PINGREQ),
    answers(TYPE.CONNACK, 0),
  );
  C('reserved connect flag (bit 0) set [MQTT-3.1.2-3]', () => goodConnect(v, { flags: 0xc3 }), badConnect(v, [0x81]));
  // [MQTT-3.1.2-1]: the server MAY close, or process the CONNECT by another specification (so 3.1.1 may answer 0x01).
  const badName: Expect = v === 5 ? badConnect(5, [0x84, 0x81, 0x82]) : { t: 'refuse', connack: 'optional', codes: [0x01] };
  for (const [what, name] of [
    ['MQTX', str('MQTX')],
    ['lower case mqtt', str('mqtt')],
    ['MQTT + space', str('MQTT ')],
    ['empty', str('')],
  ] as const)
    C(`protocol name ${what} [MQTT-3.1.2-1]`, () => goodConnect(v, { protocolName: name }), badName);
  // The name selects MQTT 3.1, which has no level 4/5: 0x01 (3.1 form) is the 3.1 answer; or close.
  C(`protocol name MQIsdp at level ${v} [MQTT-3.1.2-1]`, () => goodConnect(v, { protocolName: str('MQIsdp') }), {
    t: 'refuse',
    connack: 'optional',
    codes: v === 5 ? [0x01, 0x84, 0x81, 0x82] : [0x01],
  });
  C(
    'protocol name length runs past the packet',
    () =>
      frame(
        0x10,
        u16(40),
        'MQTT'.split('').map((c) => c.charCodeAt(0)),
        v,
      ),
    badConnect(v, [0x81]),
  );
  C('Remaining Length 0', hex('1000'), badConnect(v, [0x81]));
  C('ends after the protocol level', () => frame(0x10, str('MQTT'), v), badConnect(v, [0x81]));
  C('keep alive cut short', () => frame(0x10, str('MQTT'), v, 0xc2, 0x00), badConnect(v, [0x81]));
  if (v === 5) C('ends before the property length', () => frame(0x10, str('MQTT'), 5, 0xc2, u16(30)), badConnect(v, [0x81]));
  C('client id length runs past the packet', () => rawConnect(v, 0x02, cat(u16(20), Buffer.from('abc'))), badConnect(v, [0x81]));
  C('no client id field at all', () => rawConnect(v, 0x02, Buffer.alloc(0)), badConnect(v, [0x81]));
  C('user name flag, payload ends after the client id', () => rawConnect(v, 0xc2, str(uniqueName('m25'))), badConnect(v, [0x81]));
  C(
    'password flag, payload ends after the user name',
    () => rawConnect(v, 0xc2, cat(str(uniqueName('m25')), str('alice'))),
    badConnect(v, [0x81]),
  );
  C('user name length runs past the packet', () => rawConnect(v, 0x82, cat(str('fz'), u16(3), 0x61)), badConnect(v, [0x81]));
  C(
    'password length runs past the packet',
    () => rawConnect(v, 0xc2, cat(str('fz'), str('alice'), u16(9), Buffer.from('alice'))),
    badConnect(v, [0x81]),
  );
  C('will flag, no will topic', () => rawConnect(v, 0x06, cat(str(uniqueName('m25')), v === 5 ? props() : [])), badConnect(v, [0x81]));
  C(
    'will flag, no will payload',
    () => rawConnect(v, 0x06, cat(str(uniqueName('m25')), v === 5 ? props() : [], str('w/t'))),
    badConnect(v, [0x81]),
  );
  C(
    'will payload length runs past the packet',
    () => rawConnect(v, 0x06, cat(str(uniqueName('m25')), v === 5 ? props() : [], str('w/t'), u16(50), 0x61)),
    badConnect(v, [0x81]),
  );
  C('trailing bytes after the payload [MQTT-3.1.4-1]', () => goodConnect(v, { trailing: hex('0000') }), badConnect(v, [0x81]));
  C(
    'will flag 0 with will QoS 1 ' + (v === 5 ? '[MQTT-3.1.2-11]' : '[MQTT-3.1.2-13]'),
    () => goodConnect(v, { flags: 0xc2 | 0x08 }),
    badConnect(v, [0x81, 0x82]),
  );
  C(
    'will flag 0 with will QoS 2 ' + (v === 5 ? '[MQTT-3.1.2-11]' : '[MQTT-3.1.2-13]'),
    () => goodConnect(v, { flags: 0xc2 | 0x10 }),
    badConnect(v, [0x81, 0x82]),
  );
  C(
    'will flag 0 with will retain ' + (v === 5 ? '[MQTT-3.1.2-13]' : '[MQTT-3.1.2-15]'),
    () => goodConnect(v, { flags: 0xc2 | 0x20 }),
    badConnect(v, [0x81, 0x82]),
  );
  C(
    'will QoS 3 ' + (v === 5 ? '[MQTT-3.1.2-12]' : '[MQTT-3.1.2-14]'),
    () => goodConnect(v, { will: { topic: 'w/t', qos: 3 } }),
    badConnect(v, [0x81]),
  );
  if (v === 4)
    C('password flag without user name flag [MQTT-3.1.2-22]', () => rawConnect(4, 0x42, cat(str(uniqueName('m25')), str('alice-pw'))));
  for (const [what, bad] of BAD_UTF8) {
    C(
      `client id with ${what} ${vs(v)}`,
      () => goodConnect(v, { clientId: cat(Buffer.from(uniqueName('m25')), bad) }),
      badConnect(v, [0x81]),
    );
    C(`user name with ${what} ${vs(v)}`, () => goodConnect(v, { username: bad }), badConnect(v, [0x81]));
    C(`will topic with ${what} ${vs(v)}`, () => goodConnect(v, { will: { topic: cat(Buffer.from('w/'), bad) } }), badConnect(v, [0x81]));
  }
  for (const t of ['w/+', 'w/#', '#', '+/x'])
    C(
      `will topic with a wildcard (${t}) [MQTT-4.7.1-1] [MQTT-3.3.2-2]`,
      () => goodConnect(v, { will: { topic: t } }),
      badConnect(v, [0x90, 0x81, 0x82]),
    );
  C('empty will topic [MQTT-4.7.3-1]', () => goodConnect(v, { will: { topic: '' } }), badConnect(v, [0x90, 0x81, 0x82]));
  add(
    'CONNECT',
    v,
    'second CONNECT on a logged-in connection [MQTT-3.1.0-2]',
    ({ clientId }) => loginConnect(v, `${clientId}x`, 'bob'),
    PROTO(v),
    {
      login: true,
    },
  );
  if (v === 4)
    C('empty client id with clean session 0 → CONNACK 0x02 [MQTT-3.1.3-8]', () => goodConnect(4, { clientId: '', clean: false }), {
      t: 'refuse',
      connack: 'required',
      codes: [0x02],
    });
}
// Protocol levels no version of the specification defines [MQTT-3.1.2-2]: CONNACK 0x01 (0x84 in the v5 form), then close.
for (const level of [0, 2, 6, 7, 255]) {
  add(
    'CONNECT',
    4,
    `protocol level ${level} [MQTT-3.1.2-2]`,
    () => goodConnect(4, { level }),
    { t: 'refuse', connack: 'required', codes: [0x01, 0x84] },
    { login: false },
  );
}
add(
  'CONNECT',
  5,
  'protocol level 6 in the v5 layout [MQTT-3.1.2-2]',
  () => goodConnect(5, { level: 6 }),
  { t: 'refuse', connack: 'required', codes: [0x01, 0x84] },
  { login: false },
);
// v5 CONNECT properties (§3.1.2.11) and will properties (§3.1.3.2).
{
  const C5 = (name: string, p: Buffer, codes: number[]): void =>
    add('CONNECT', 5, name, () => goodConnect(5, { props: p }), badConnect(5, codes), { login: false });
  const W5 = (name: string, p: Buffer, codes: number[]): void =>
    add('CONNECT', 5, name, () => goodConnect(5, { will: { topic: 'm25/will', props: p } }), badConnect(5, codes), { login: false });
  const dup = (b: Buffer): Buffer => props(b, b);
  C5('Session Expiry Interval twice (§3.1.2.11.2)', dup(prop.u32(PID.sessionExpiry, 0)), [0x82]);
  C5('Receive Maximum twice (§3.1.2.11.3)', dup(prop.u16(PID.receiveMaximum, 10)), [0x82]);
  C5('Receive Maximum 0 (§3.1.2.11.3)', props(prop.u16(PID.receiveMaximum, 0)), [0x82]);
  C5('Maximum Packet Size twice (§3.1.2.11.4)', dup(prop.u32(PID.maximumPacketSize, 1000)), [0x82]);
  C5('Maximum Packet Size 0 (§3.1.2.11.4)', props(prop.u32(PID.maximumPacketSize, 0)), [0x82]);
  C5('Topic Alias Maximum twice (§3.1.2.11.5)', dup(prop.u16(PID.topicAliasMaximum, 5)), [0x82]);
  C5('Request Response Information 2 (§3.1.2.11.6)', props(prop.byte(PID.requestResponseInfo, 2)), [0x82]);
  C5('Request Response Information twice (§3.1.2.11.6)', dup(prop.byte(PID.requestResponseInfo, 0)), [0x82]);
  C5('Request Problem Information 2 (§3.1.2.11.7)', props(prop.byte(PID.requestProblemInfo, 2)), [0x82]);
  C5('Request Problem Information twice (§3.1.2.11.7)', dup(prop.byte(PID.requestProblemInfo, 1)), [0x82]);
  C5('Authentication Method twice (§3.1.2.11.9)', dup(prop.str(PID.authMethod, 'M')), [0x82]);
  C5('Authentication Data without Authentication Method (§3.1.2.11.10)', props(prop.str(PID.authData, 'x')), [0x82]);
  for (const id of [0x00, 0x04, 0x7f]) C5(`unknown property id 0x${id.toString(16)} (§2.2.2.2)`, props(cat(id, 0)), [0x81, 0x82]);
  for (const [n, b] of [
    ['Topic Alias', prop.u16(PID.topicAlias, 1)],
    ['Payload Format Indicator (a will property)', prop.byte(PID.payloadFormat, 0)],
    ['Subscription Identifier', prop.vbi(PID.subscriptionId, 1)],
    ['Server Keep Alive', prop.u16(PID.serverKeepAlive, 10)],
    ['Maximum QoS', prop.byte(PID.maximumQoS, 1)],
    ['Will Delay Interval (a will property)', prop.u32(PID.willDelay, 1)],
  ] as const)
    C5(`${n} in CONNECT properties (not a CONNECT property, §3.1.2.11)`, props(b), [0x81, 0x82]);
  C5('property length runs past the packet', cat(0x20), [0x81]);
  C5('property length of five bytes (§1.5.5)', hex('ffffffff7f'), [0x81]);
  C5('property length not minimally encoded (80 00) [MQTT-1.5.5-1]', hex('8000'), [0x81]);
  C5('Session Expiry Interval cut short', cat(3, PID.sessionExpiry, 0, 0), [0x81]);
  C5('User Property key with U+0000 [MQTT-1.5.4-2]', props(prop.pair(PID.userProperty, hex('6100'), 'v')), [0x81]);
  C5('User Property value not UTF-8 [MQTT-1.5.4-1]', props(prop.pair(PID.userProperty, 'k', hex('ff'))), [0x81]);
  C5('User Property without its value', props(cat(PID.userProperty, str('k'))), [0x81]);
  C5('Authentication Method not UTF-8 [MQTT-1.5.4-1]', props(prop.str(PID.authMethod, hex('c0af'))), [0x81]);
  add(
    'CONNECT',
    5,
    'every valid CONNECT property, User Property twice with the same name (control)',
    () =>
      goodConnect(5, {
        props: props(
          prop.u32(PID.sessionExpiry, 0),
          prop.u16(PID.receiveMaximum, 10),
          prop.u32(PID.maximumPacketSize, 100000),
          prop.u16(PID.topicAliasMaximum, 5),
          prop.byte(PID.requestResponseInfo, 0),
          prop.byte(PID.requestProblemInfo, 1),
          prop.pair(PID.userProperty, 'k', 'v1'),
          prop.pair(PID.userProperty, 'k', 'v2'),
        ),
      }),
    answers(TYPE.CONNACK, 0),
    { login: false },
  );
  add(
    'CONNECT',
    5,
    'will with every valid will property (control)',
    () =>
      goodConnect(5, {
        will: {
          topic: 'm25/will',
          props: props(
            prop.u32(PID.willDelay, 0),
            prop.byte(PID.payloadFormat, 1),
            prop.u32(PID.messageExpiry, 60),
            prop.str(PID.contentType, 'text/plain'),
            prop.str(PID.responseTopic, 'm25/r'),
            prop.str(PID.correlationData, 'c'),
            prop.pair(PID.userProperty, 'k', 'v'),
          ),
        },
      }),
    answers(TYPE.CONNACK, 0),
    { login: false },
  );
  add(
    'CONNECT',
    5,
    'unknown Authentication Method [MQTT-4.12.0-1]',
    () => goodConnect(5, { props: props(prop.str(PID.authMethod, 'NO-SUCH-METHOD')) }),
    badConnect(5, [0x8c, 0x87]),
    { login: false },
  );
  W5('Will Delay Interval twice (§3.1.3.2.2)', dup(prop.u32(PID.willDelay, 0)), [0x82]);
  W5('will Payload Format Indicator twice (§3.1.3.2.3)', dup(prop.byte(PID.payloadFormat, 0)), [0x82]);
  W5('will Payload Format Indicator 2 (§3.1.3.2.3: 0 or 1)', props(prop.byte(PID.payloadFormat, 2)), [0x81, 0x82]);
  W5('will Message Expiry Interval twice (§3.1.3.2.4)', dup(prop.u32(PID.messageExpiry, 5)), [0x82]);
  W5('will Content Type twice (§3.1.3.2.5)', dup(prop.str(PID.contentType, 'a')), [0x82]);
  W5('will Content Type not UTF-8 [MQTT-1.5.4-1]', props(prop.str(PID.contentType, hex('eda080'))), [0x81]);
  W5('will Response Topic twice (§3.1.3.2.6)', dup(prop.str(PID.responseTopic, 'a')), [0x82]);
  W5('Topic Alias in will properties (not a will property)', props(prop.u16(PID.topicAlias, 1)), [0x81, 0x82]);
  W5('Session Expiry Interval in will properties (not a will property)', props(prop.u32(PID.sessionExpiry, 1)), [0x81, 0x82]);
  W5('will property length runs past the packet', hex('7f'), [0x81]);
}
// A few MQTT 3.1 (MQIsdp, level 3) CONNECTs.
{
  const C3 = (name: string, bytes: Case['bytes']): void => add('CONNECT', 3, name, bytes, badConnect(3), { login: false });
  add('CONNECT', 3, 'valid 3.1 CONNECT (control)', () => goodConnect(3), answers(TYPE.CONNACK, 0), { login: false });
  C3('3.1: user name length runs past the packet', hex('101400064d514973647003800005000366' + '7a1012' + '0004'));
  C3('3.1: client id length runs past the packet', () => rawConnect(3, 0x02, cat(u16(20), Buffer.from('abc'))));
  C3('3.1: will QoS 3', () => goodConnect(3, { will: { topic: 'w/t', qos: 3 } }));
  C3('3.1: user name flag, no user name', () => rawConnect(3, 0x82, str(uniqueName('m25'))));
  C3('3.1: Remaining Length 0', hex('1000'));
}
// The defect reproduction of the issue (a CONNECT whose user-name length runs past the packet).
add(
  'CONNECT',
  4,
  'the defect reproduction 101200044d515454048000050003667a10120004',
  hex('101200044d515454048000050003667a10120004'),
  badConnect(4),
  {
    login: false,
  },
);

// CONNACK / SUBACK / UNSUBACK / PINGRESP sent by a client (server-to-client packets, §2.1.2 Table 2-1) --------------
for (const v of V45) {
  add(
    'CONNACK',
    v,
    'CONNACK from a client (a server-to-client packet, §2.1.2)',
    v === 5 ? hex('2003000000') : hex('20020000'),
    MAL_OR_PROTO(v),
  );
  add('CONNACK', v, 'CONNACK as the first packet [MQTT-3.1.0-1]', v === 5 ? hex('2003000000') : hex('20020000'), CLOSE, { login: false });
  add('CONNACK', v, 'CONNACK with flags 0001 from a client', hex('21020000'), MAL_OR_PROTO(v));
  add('SUBACK/UNSUBACK', v, 'SUBACK from a client (§2.1.2)', v === 5 ? hex('9004000100' + '00') : hex('9003000100'), MAL_OR_PROTO(v));
  add('SUBACK/UNSUBACK', v, 'UNSUBACK from a client (§2.1.2)', v === 5 ? hex('b00400010000') : hex('b0020001'), MAL_OR_PROTO(v));
  add('SUBACK/UNSUBACK', v, 'SUBACK as the first packet [MQTT-3.1.0-1]', hex('9003000100'), CLOSE, { login: false });
  add('PINGRESP', v, 'PINGRESP from a client (§2.1.2)', hex('d000'), MAL_OR_PROTO(v));
  add('PINGRESP', v, 'PINGRESP with flags 0001 from a client', hex('d100'), MAL_OR_PROTO(v));
  add('PINGRESP', v, 'PINGRESP as the first packet [MQTT-3.1.0-1]', hex('d000'), CLOSE, { login: false });
}

// PUBLISH -------------------------------------------------------------------------------------------
for (const v of V45) {
  const P = (name: string, bytes: Case['bytes'], e: Expect): void => add('PUBLISH', v, name, bytes, e);
  const wild = v === 5 ? D(0x81, 0x82, 0x90) : CLOSE;
  P('QoS 0 (control)', publish(v, { topic: TOPIC }), OPEN);
  P('QoS 1 (control)', publish(v, { topic: TOPIC, qos: 1, id: 7 }), answers(TYPE.PUBACK, 0x00, 0x10));
  P('QoS 2 (control)', publish(v, { topic: TOPIC, qos: 2, id: 8 }), answers(TYPE.PUBREC, 0x00, 0x10));
  P(
    'QoS 1 retained, empty payload (control)',
    publish(v, { topic: `${TOPIC}/r`, qos: 1, retain: true, payload: '' }),
    answers(TYPE.PUBACK, 0x00, 0x10),
  );
  for (const first of [0x36, 0x37, 0x3e, 0x3f])
    P(`QoS 3 (first byte ${first.toString(16)}) [MQTT-3.3.1-4]`, publish(v, { topic: TOPIC, first }), MAL(v));
  for (const first of [0x38, 0x39])
    P(`DUP 1 with QoS 0 (first byte ${first.toString(16)}) [MQTT-3.3.1-2]`, publish(v, { topic: TOPIC, first }), MAL_OR_PROTO(v));
  P(
    `QoS 1 with packet id 0 ${v === 5 ? '[MQTT-2.2.1-3]' : '[MQTT-2.3.1-1]'}`,
    publish(v, { topic: TOPIC, qos: 1, id: 0 }),
    MAL_OR_PROTO(v),
  );
  P(
    `QoS 2 with packet id 0 ${v === 5 ? '[MQTT-2.2.1-3]' : '[MQTT-2.3.1-1]'}`,
    publish(v, { topic: TOPIC, qos: 2, id: 0 }),
    MAL_OR_PROTO(v),
  );
  for (const t of ['+', '#', 'a/+', 'a/#', 'a/+/b', 'a#', 'a+b', '#/a'])
    P(`topic with a wildcard (${t}) [MQTT-3.3.2-2]`, publish(v, { topic: t, qos: 1 }), wild);
  P(
    `empty topic without a Topic Alias ${v === 5 ? '(§3.3.2.3.4: a Protocol Error)' : '[MQTT-4.7.3-1]'}`,
    publish(v, { topic: '' }),
    PROTO(v),
  );
  for (const [what, bad] of BAD_UTF8) P(`topic with ${what} ${vs(v)}`, publish(v, { topic: bad }), MAL(v));
  P('Remaining Length 0', hex('3000'), MAL(v));
  P('Remaining Length 1', hex('300100'), MAL(v));
  P('topic length runs past the packet', hex('3003000561'), MAL(v));
  P('QoS 1 without a packet id', hex('3203000161'), MAL(v));
  P('QoS 1 with half a packet id', hex('320400016100'), MAL(v));
  P('Remaining Length of five bytes (§1.5.5)', hex('30ffffffff7f'), MAL(v));
  if (v === 5) {
    P('QoS 0 without the property length', hex('3003000161'), MAL(5));
    P('QoS 1 with packet id, without the property length', hex('32050001610001'), MAL(5));
    P('Remaining Length not minimally encoded [MQTT-1.5.5-1]', hex('30 8500 0001 61 00 78'), MAL(5));
  }
}
{
  const P5 = (
    name: string,
    p: Buffer | ((ctx: { topicAliasMaximum: number }) => Buffer),
    e: Expect,
    topic: string | Buffer = TOPIC,
  ): void => add('PUBLISH', 5, name, (ctx) => publish(5, { topic, qos: 1, props: typeof p === 'function' ? p(ctx) : p }), e);
  const dup = (b: Buffer): Buffer => props(b, b);
  P5(
    'every valid PUBLISH property, User Property twice (control)',
    props(
      prop.byte(PID.payloadFormat, 1),
      prop.u32(PID.messageExpiry, 60),
      prop.str(PID.contentType, 'text/plain'),
      prop.str(PID.responseTopic, 'm25/resp'),
      prop.str(PID.correlationData, hex('00ff')),
      prop.pair(PID.userProperty, 'k', 'v1'),
      prop.pair(PID.userProperty, 'k', 'v2'),
    ),
    answers(TYPE.PUBACK, 0x00, 0x10),
  );
  P5('Topic Alias 1 with a topic (control)', props(prop.u16(PID.topicAlias, 1)), answers(TYPE.PUBACK, 0x00, 0x10));
  add(
    'PUBLISH',
    5,
    'Topic Alias set, then used with an empty topic (control)',
    cat(
      publish(5, { topic: TOPIC, props: props(prop.u16(PID.topicAlias, 1)) }),
      publish(5, { topic: '', qos: 1, props: props(prop.u16(PID.topicAlias, 1)) }),
    ),
    answers(TYPE.PUBACK, 0x00, 0x10),
  );
  P5('Payload Format Indicator twice (§3.3.2.3.2)', dup(prop.byte(PID.payloadFormat, 0)), D(0x82));
  P5('Message Expiry Interval twice (§3.3.2.3.3)', dup(prop.u32(PID.messageExpiry, 5)), D(0x82));
  P5('Topic Alias twice (§3.3.2.3.4)', dup(prop.u16(PID.topicAlias, 1)), D(0x82));
  P5('Response Topic twice (§3.3.2.3.5)', dup(prop.str(PID.responseTopic, 'a')), D(0x82));
  P5('Correlation Data twice (§3.3.2.3.6)', dup(prop.str(PID.correlationData, 'a')), D(0x82));
  P5('Content Type twice (§3.3.2.3.9)', dup(prop.str(PID.contentType, 'a')), D(0x82));
  for (const value of [2, 0xff])
    P5(`Payload Format Indicator ${value} (§3.3.2.3.2: 0 or 1)`, props(prop.byte(PID.payloadFormat, value)), D(0x81, 0x82));
  P5('Topic Alias 0 [MQTT-3.3.2-8]', props(prop.u16(PID.topicAlias, 0)), D(0x94, 0x82));
  P5(
    'Topic Alias above the announced Topic Alias Maximum [MQTT-3.2.2-17]',
    ({ topicAliasMaximum }) => props(prop.u16(PID.topicAlias, topicAliasMaximum + 1)),
    D(0x94, 0x82),
  );
  P5('Topic Alias 65535 [MQTT-3.2.2-17]', props(prop.u16(PID.topicAlias, 0xffff)), D(0x94, 0x82));
  P5('empty topic with a Topic Alias never set (§3.3.2.3.4)', props(prop.u16(PID.topicAlias, 3)), D(0x82), '');
  P5('Subscription Identifier from a client [MQTT-3.3.4-6]', props(prop.vbi(PID.subscriptionId, 1)), D(0x81, 0x82));
  for (const t of ['a/+', '#'])
    P5(`Response Topic with a wildcard (${t}) [MQTT-3.3.2-14]`, props(prop.str(PID.responseTopic, t)), D(0x81, 0x82, 0x90));
  for (const [what, bad] of SOME_BAD_UTF8) {
    P5(`Response Topic with ${what} [MQTT-3.3.2-13] [MQTT-1.5.4-1/2]`, props(prop.str(PID.responseTopic, bad)), D(0x81));
    P5(`Content Type with ${what} [MQTT-1.5.4-1/2]`, props(prop.str(PID.contentType, bad)), D(0x81));
    P5(`User Property name with ${what} [MQTT-1.5.4-1/2]`, props(prop.pair(PID.userProperty, bad, 'v')), D(0x81));
  }
  for (const [n, b] of [
    ['Session Expiry Interval', prop.u32(PID.sessionExpiry, 0)],
    ['Receive Maximum', prop.u16(PID.receiveMaximum, 10)],
    ['Server Keep Alive', prop.u16(PID.serverKeepAlive, 10)],
    ['Authentication Method', prop.str(PID.authMethod, 'M')],
    ['Will Delay Interval', prop.u32(PID.willDelay, 0)],
    ['Request Problem Information', prop.byte(PID.requestProblemInfo, 1)],
    ['Maximum QoS', prop.byte(PID.maximumQoS, 1)],
    ['Maximum Packet Size', prop.u32(PID.maximumPacketSize, 100)],
    ['Assigned Client Identifier', prop.str(PID.assignedClientId, 'x')],
    ['Reason String', prop.str(PID.reasonString, 'x')],
  ] as const)
    P5(`${n} in PUBLISH (not a PUBLISH property, §3.3.2.3)`, props(b), D(0x81, 0x82));
  for (const id of [0x00, 0x04, 0x05, 0x10, 0x2b, 0x7f])
    P5(`unknown property id 0x${id.toString(16)} (§2.2.2.2)`, props(cat(id, 0)), D(0x81, 0x82));
  P5('Payload Format Indicator without its value', cat(1, PID.payloadFormat), D(0x81));
  P5('Message Expiry Interval cut short', cat(3, PID.messageExpiry, 0, 1), D(0x81));
  P5('Topic Alias cut short', cat(2, PID.topicAlias, 1), D(0x81));
  P5('Response Topic length runs past the properties', cat(4, PID.responseTopic, u16(9), 0x61), D(0x81));
  P5('property length runs past the packet', cat(0x7f), D(0x81));
  P5('property length of five bytes', hex('ffffffff7f'), D(0x81));
  P5('property length not minimally encoded (80 00) [MQTT-1.5.5-1]', hex('8000'), D(0x81));
  P5('Subscription Identifier 0 from a client [MQTT-3.3.4-6]', props(prop.vbi(PID.subscriptionId, 0)), D(0x81, 0x82));
}

// PUBACK, PUBREC, PUBREL, PUBCOMP ---------------------------------------------------------------------
{
  const ACKS: [Group, number][] = [
    ['PUBACK', TYPE.PUBACK],
    ['PUBREC', TYPE.PUBREC],
    ['PUBREL', TYPE.PUBREL],
    ['PUBCOMP', TYPE.PUBCOMP],
  ];
  const rel = (t: number): boolean => t === TYPE.PUBREL;
  for (const [g, t] of ACKS) {
    const okFlags = rel(t) ? 0x02 : 0x00;
    const first = (t << 4) | okFlags;
    const badFlags = rel(t) ? [0x00, 0x01, 0x03, 0x0a] : [0x01, 0x02, 0x08, 0x0f];
    const flagsClause = rel(t) ? '[MQTT-3.6.1-1]' : '';
    const validCodes = t === TYPE.PUBACK || t === TYPE.PUBREC ? [0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99] : [0x00, 0x92];
    const badCodes = t === TYPE.PUBACK || t === TYPE.PUBREC ? [0x01, 0x04, 0x81, 0x92, 0xff] : [0x01, 0x10, 0x80, 0x91, 0xff];
    // A PUBREL is answered with PUBCOMP even for an unknown id (§4.3.3); the others need no answer.
    const ok: Expect = rel(t) ? answers(TYPE.PUBCOMP) : OPEN;
    const sec = { [TYPE.PUBACK]: '3.4', [TYPE.PUBREC]: '3.5', [TYPE.PUBREL]: '3.6', [TYPE.PUBCOMP]: '3.7' }[t]!;
    for (const v of V45) {
      const A = (name: string, bytes: Buffer, e: Expect): void => add(g, v, name, bytes, e);
      A(`${g} id 9, Remaining Length 2 (control)`, ack(t, 9), ok);
      for (const f of badFlags)
        A(
          `${g} fixed header flags ${f.toString(2).padStart(4, '0')} ${flagsClause || (v === 5 ? '[MQTT-2.1.3-1]' : '[MQTT-2.2.2-2]')}`,
          frame((t << 4) | f, u16(9)),
          MAL(v),
        );
      A(`${g} Remaining Length 0`, frame(first), MAL(v));
      A(`${g} Remaining Length 1`, frame(first, 0x00), MAL(v));
      A(`${g} packet id 0 ${v === 5 ? '[MQTT-2.2.1-5]' : '[MQTT-2.3.1-6]'}`, ack(t, 0), MAL_OR_PROTO(v));
      if (v === 4) {
        A(`${g} Remaining Length 3 (§${sec}.1: it is 2)`, frame(first, u16(9), 0x00), CLOSE);
        A(`${g} Remaining Length 4 (§${sec}.1: it is 2)`, frame(first, u16(9), 0x00, 0x00), CLOSE);
      } else {
        A(`${g} Remaining Length 3, reason 0x00 (control)`, ack(t, 9, 0x00), ok);
        A(`${g} Remaining Length 4, empty properties (control)`, ack(t, 9, 0x00, props()), ok);
        A(
          `${g} Reason String and User Property (control)`,
          ack(t, 9, validCodes[validCodes.length - 1], props(prop.str(PID.reasonString, 'why'), prop.pair(PID.userProperty, 'k', 'v'))),
          ok,
        );
        for (const rc of badCodes)
          A(`${g} reason code 0x${rc.toString(16)} (not a ${g} code, §${sec}.2.1)`, ack(t, 9, rc), MAL_OR_PROTO(5));
        A(`${g} property length runs past the packet`, ack(t, 9, 0x00, hex('05')), MAL(5));
        A(`${g} property length of five bytes`, ack(t, 9, 0x00, hex('ffffffff7f')), MAL(5));
        A(`${g} a byte after the properties (§${sec}.3: no payload)`, ack(t, 9, 0x00, cat(props(), 0x00)), MAL(5));
        A(
          `${g} Reason String twice (§${sec}.2.2.2)`,
          ack(t, 9, 0x00, props(prop.str(PID.reasonString, 'a'), prop.str(PID.reasonString, 'b'))),
          PROTO(5),
        );
        A(`${g} Topic Alias (not a ${g} property)`, ack(t, 9, 0x00, props(prop.u16(PID.topicAlias, 1))), MAL_OR_PROTO(5));
        A(`${g} Subscription Identifier (not a ${g} property)`, ack(t, 9, 0x00, props(prop.vbi(PID.subscriptionId, 1))), MAL_OR_PROTO(5));
        A(`${g} unknown property id 0x00`, ack(t, 9, 0x00, props(hex('0000'))), MAL_OR_PROTO(5));
        A(`${g} Reason String not UTF-8 [MQTT-1.5.4-1]`, ack(t, 9, 0x00, props(prop.str(PID.reasonString, hex('c0af')))), MAL(5));
        A(`${g} User Property without its value`, ack(t, 9, 0x00, props(cat(PID.userProperty, str('k')))), MAL(5));
      }
    }
  }
}

// SUBSCRIBE --------------------------------------------------------------------------------------------
for (const v of V45) {
  const S = (name: string, bytes: Buffer, e: Expect): void => add('SUBSCRIBE', v, name, bytes, e);
  const granted = v === 5 ? [0x00, 0x01, 0x02] : [0x00, 0x01, 0x02];
  S('one filter QoS 1 (control)', subscribeBytes(v, 3, [['m25/s/a', 0x01]]), answers(TYPE.SUBACK, ...granted));
  S(
    'three filters with wildcards (control)',
    subscribeBytes(v, 3, [
      ['m25/#', 0x00],
      ['+/+', 0x01],
      ['m25/+/x/#', 0x02],
    ]),
    answers(TYPE.SUBACK, ...granted),
  );
  for (const f of [0x00, 0x01, 0x03, 0x06, 0x0a])
    S(
      `fixed header flags ${f.toString(2).padStart(4, '0')} [MQTT-3.8.1-1]`,
      subscribeBytes(v, 3, [['m25/s', 0]], undefined, 0x80 | f),
      MAL(v),
    );
  S(`packet id 0 ${v === 5 ? '[MQTT-2.2.1-3]' : '[MQTT-2.3.1-1]'}`, subscribeBytes(v, 0, [['m25/s', 0]]), MAL_OR_PROTO(v));
  S(`no topic filter ${v === 5 ? '[MQTT-3.8.3-2]' : '[MQTT-3.8.3-3]'}`, subscribeBytes(v, 3, []), PROTO(v));
  S('Remaining Length 0', hex('8200'), MAL(v));
  S('Remaining Length 1', hex('820100'), MAL(v));
  if (v === 5) S('ends before the property length', hex('82020003'), MAL(5));
  S('filter length runs past the packet', frame(0x82, u16(3), v === 5 ? props() : [], u16(20), Buffer.from('ab'), 0), MAL(v));
  S('filter without its options byte', frame(0x82, u16(3), v === 5 ? props() : [], str('m25/s')), MAL(v));
  S('second filter without its options byte', frame(0x82, u16(3), v === 5 ? props() : [], str('m25/s'), 0, str('m25/t')), MAL(v));
  S('half a filter length', frame(0x82, u16(3), v === 5 ? props() : [], 0x00), MAL(v));
  S(`requested QoS 3 ${v === 5 ? '(§3.8.3.1: a Protocol Error)' : '[MQTT-3.8.3-4]'}`, subscribeBytes(v, 3, [['m25/s', 0x03]]), PROTO(v));
  if (v === 4) {
    for (const o of [0x04, 0x08, 0x10, 0x40, 0x80, 0xfc])
      S(`reserved option bits 0x${o.toString(16)} [MQTT-3.8.3-4]`, subscribeBytes(4, 3, [['m25/s', o]]), CLOSE);
  } else {
    for (const o of [0x40, 0x80, 0xc0, 0xc1])
      S(`reserved option bits 0x${o.toString(16)} [MQTT-3.8.3-5]`, subscribeBytes(5, 3, [['m25/s', o]]), MAL(5));
    S('Retain Handling 3 (§3.8.3.1: a Protocol Error)', subscribeBytes(5, 3, [['m25/s', 0x30]]), PROTO(5));
    S('No Local on a shared subscription [MQTT-3.8.3-4]', subscribeBytes(5, 3, [['$share/g/m25/s', 0x04]]), PROTO(5));
    S(
      'No Local, Retain As Published, Retain Handling 2, QoS 2 (control)',
      subscribeBytes(5, 3, [['m25/s', 0x2e]]),
      answers(TYPE.SUBACK, ...granted),
    );
    S('a shared subscription (control)', subscribeBytes(5, 3, [['$share/g/m25/s/#', 0x01]]), answers(TYPE.SUBACK, ...granted));
    for (const f of ['$share//m25/s', '$share/g', '$share/g+/m25', '$share/g#/m25', '$share/g/'])
      S(`ill-formed shared subscription ${f} [MQTT-4.8.2-1/2]`, subscribeBytes(5, 3, [[f, 0]]), BAD_FILTER(5));
    const S5 = (name: string, p: Buffer, e: Expect): void => S(name, subscribeBytes(5, 3, [['m25/s', 0]], p), e);
    S5(
      'Subscription Identifier 1 and a User Property (control)',
      props(prop.vbi(PID.subscriptionId, 1), prop.pair(PID.userProperty, 'k', 'v')),
      answers(TYPE.SUBACK, 0),
    );
    S5('Subscription Identifier 0 (§3.8.2.1.2)', props(prop.vbi(PID.subscriptionId, 0)), PROTO(5));
    S5('Subscription Identifier twice (§3.8.2.1.2)', props(prop.vbi(PID.subscriptionId, 1), prop.vbi(PID.subscriptionId, 2)), PROTO(5));
    S5('Subscription Identifier of five bytes', props(cat(PID.subscriptionId, hex('ffffffff7f'))), MAL(5));
    for (const [n, b] of [
      ['Topic Alias', prop.u16(PID.topicAlias, 1)],
      ['Session Expiry Interval', prop.u32(PID.sessionExpiry, 0)],
      ['Payload Format Indicator', prop.byte(PID.payloadFormat, 0)],
      ['Reason String', prop.str(PID.reasonString, 'x')],
      ['Message Expiry Interval', prop.u32(PID.messageExpiry, 1)],
    ] as const)
      S5(`${n} in SUBSCRIBE (not a SUBSCRIBE property, §3.8.2.1)`, props(b), MAL_OR_PROTO(5));
    for (const id of [0x00, 0x7f]) S5(`unknown property id 0x${id.toString(16)}`, props(cat(id, 0)), MAL_OR_PROTO(5));
    S5('property length runs past the packet', hex('7f'), MAL(5));
    S5('User Property name not UTF-8 [MQTT-1.5.4-1]', props(prop.pair(PID.userProperty, hex('ff'), 'v')), MAL(5));
  }
  S('empty filter [MQTT-4.7.3-1]', subscribeBytes(v, 3, [['', 0]]), BAD_FILTER(v));
  for (const f of ['a/#/b', '#/a', 'a#', '#a', 'a/b#'])
    S(`'#' not alone or not last (${f}) ${v === 5 ? '[MQTT-4.7.1-1]' : '[MQTT-4.7.1-2]'}`, subscribeBytes(v, 3, [[f, 0]]), BAD_FILTER(v));
  for (const f of ['a+', '+a', 'a/b+/c', 'a/+b', '++'])
    S(`'+' not a whole level (${f}) ${v === 5 ? '[MQTT-4.7.1-2]' : '[MQTT-4.7.1-3]'}`, subscribeBytes(v, 3, [[f, 0]]), BAD_FILTER(v));
  S(
    'a good filter, then an ill-formed one',
    subscribeBytes(v, 3, [
      ['m25/ok', 0],
      ['a/#/b', 0],
    ]),
    BAD_FILTER(v),
  );
  for (const [what, bad] of BAD_UTF8) S(`filter with ${what} ${vs(v)}`, subscribeBytes(v, 3, [[bad, 0]]), MAL(v));
}

// UNSUBSCRIBE ------------------------------------------------------------------------------------------
for (const v of V45) {
  const U = (name: string, bytes: Buffer, e: Expect): void => add('UNSUBSCRIBE', v, name, bytes, e);
  U('one filter (control)', unsubscribe(v, 4, ['m25/u']), answers(TYPE.UNSUBACK));
  U('two filters with wildcards (control)', unsubscribe(v, 4, ['m25/#', '+/x']), answers(TYPE.UNSUBACK));
  for (const f of [0x00, 0x01, 0x03, 0x08])
    U(`fixed header flags ${f.toString(2).padStart(4, '0')} [MQTT-3.10.1-1]`, unsubscribe(v, 4, ['m25/u'], undefined, 0xa0 | f), MAL(v));
  U(`packet id 0 ${v === 5 ? '[MQTT-2.2.1-3]' : '[MQTT-2.3.1-1]'}`, unsubscribe(v, 0, ['m25/u']), MAL_OR_PROTO(v));
  U('no topic filter [MQTT-3.10.3-2]', unsubscribe(v, 4, []), PROTO(v));
  U('Remaining Length 0', hex('a200'), MAL(v));
  U('Remaining Length 1', hex('a20100'), MAL(v));
  if (v === 5) U('ends before the property length', hex('a2020004'), MAL(5));
  U('filter length runs past the packet', frame(0xa2, u16(4), v === 5 ? props() : [], u16(30), Buffer.from('ab')), MAL(v));
  U('second filter with half a length', frame(0xa2, u16(4), v === 5 ? props() : [], str('m25/u'), 0x00), MAL(v));
  U('empty filter [MQTT-4.7.3-1]', unsubscribe(v, 4, ['']), BAD_FILTER(v));
  U(`'#' not last (a/#/b) ${v === 5 ? '[MQTT-4.7.1-1]' : '[MQTT-4.7.1-2]'}`, unsubscribe(v, 4, ['a/#/b']), BAD_FILTER(v));
  U(`'+' inside a level (a+/b) ${v === 5 ? '[MQTT-4.7.1-2]' : '[MQTT-4.7.1-3]'}`, unsubscribe(v, 4, ['a+/b']), BAD_FILTER(v));
  for (const [what, bad] of SOME_BAD_UTF8) U(`filter with ${what} ${vs(v)}`, unsubscribe(v, 4, [bad]), MAL(v));
  if (v === 5) {
    const U5 = (name: string, p: Buffer, e: Expect): void => U(name, unsubscribe(5, 4, ['m25/u'], p), e);
    U5('a User Property (control)', props(prop.pair(PID.userProperty, 'k', 'v')), answers(TYPE.UNSUBACK));
    U5('Subscription Identifier (not an UNSUBSCRIBE property, §3.10.2.1)', props(prop.vbi(PID.subscriptionId, 1)), MAL_OR_PROTO(5));
    U5('Topic Alias (not an UNSUBSCRIBE property)', props(prop.u16(PID.topicAlias, 1)), MAL_OR_PROTO(5));
    U5('Reason String (not an UNSUBSCRIBE property)', props(prop.str(PID.reasonString, 'x')), MAL_OR_PROTO(5));
    U5('unknown property id 0x00', props(hex('0000')), MAL_OR_PROTO(5));
    U5('property length runs past the packet', hex('7f'), MAL(5));
    U5('User Property value with U+0000 [MQTT-1.5.4-2]', props(prop.pair(PID.userProperty, 'k', hex('6100'))), MAL(5));
  }
}

// PINGREQ ---------------------------------------------------------------------------------------------
for (const v of V45) {
  add('PINGREQ', v, 'PINGREQ (control)', PINGREQ, answers(TYPE.PINGRESP));
  add('PINGREQ', v, 'PINGREQ with Remaining Length 1 (§3.12: no variable header, no payload)', hex('c00100'), MAL(v));
  add('PINGREQ', v, 'PINGREQ with Remaining Length 2', hex('c0020000'), MAL(v));
  for (const f of [0x1, 0x2, 0x8, 0xf])
    add(
      'PINGREQ',
      v,
      `PINGREQ fixed header flags ${f.toString(2).padStart(4, '0')} ${v === 5 ? '[MQTT-2.1.3-1]' : '[MQTT-2.2.2-2]'}`,
      frame(0xc0 | f),
      MAL(v),
    );
  add('PINGREQ', v, 'PINGREQ as the first packet [MQTT-3.1.0-1]', PINGREQ, CLOSE, { login: false });
}
add('PINGREQ', 5, 'PINGREQ with Remaining Length 0 in two bytes (80 00) [MQTT-1.5.5-1]', hex('c08000'), MAL(5));

// DISCONNECT ------------------------------------------------------------------------------------------
// The login carries a will: a valid DISCONNECT (reason 0x00) discards it [MQTT-3.14.4-3]; a malformed one
// is not a DISCONNECT, so the connection ends by a protocol error and the will is published (§3.1.2.5).
{
  const Dc = (v: Version, name: string, bytes: Buffer, e: Expect, will: 'published' | 'discarded'): void =>
    add('DISCONNECT', v, name, bytes, e, { will });
  for (const v of V45) {
    Dc(v, 'DISCONNECT (control: will discarded) [MQTT-3.14.4-3]', hex('e000'), CLOSE, 'discarded');
    for (const f of [0x1, 0x2, 0x8])
      Dc(
        v,
        `DISCONNECT fixed header flags ${f.toString(2).padStart(4, '0')} ${v === 5 ? '[MQTT-2.1.3-1]' : '[MQTT-2.2.2-2]'}`,
        frame(0xe0 | f),
        MAL(v),
        'published',
      );
  }
  Dc(4, 'DISCONNECT with Remaining Length 1 (§3.14: no variable header)', hex('e00100'), CLOSE, 'published');
  Dc(4, 'DISCONNECT with Remaining Length 2', hex('e0020000'), CLOSE, 'published');
  Dc(5, 'DISCONNECT reason 0x00, Remaining Length 1 (control)', hex('e00100'), CLOSE, 'discarded');
  Dc(5, 'DISCONNECT reason 0x00, empty properties (control)', hex('e0020000'), CLOSE, 'discarded');
  Dc(5, 'DISCONNECT reason 0x04 "with will" (control)', hex('e00104'), CLOSE, 'published');
  Dc(
    5,
    'DISCONNECT with a Reason String and User Property (control)',
    disconnect(0x00, props(prop.str(PID.reasonString, 'bye'), prop.pair(PID.userProperty, 'k', 'v'))),
    CLOSE,
    'discarded',
  );
  for (const rc of [0x01, 0x02, 0x05, 0x10, 0x84, 0xff])
    Dc(5, `DISCONNECT reason 0x${rc.toString(16)} (not a DISCONNECT code) [MQTT-3.14.2-1]`, disconnect(rc), MAL_OR_PROTO(5), 'published');
  Dc(5, 'DISCONNECT property length runs past the packet', hex('e0020005'), MAL(5), 'published');
  Dc(5, 'DISCONNECT property length of five bytes', disconnect(0x00, hex('ffffffff7f')), MAL(5), 'published');
  Dc(5, 'DISCONNECT a byte after the properties (§3.14.3: no payload)', hex('e003000000'), MAL(5), 'published');
  Dc(
    5,
    'DISCONNECT Session Expiry Interval 0 → 10 [MQTT-3.14.2-2]',
    disconnect(0x00, props(prop.u32(PID.sessionExpiry, 10))),
    PROTO(5),
    'published',
  );
  Dc(
    5,
    'DISCONNECT Session Expiry Interval twice (§3.14.2.2.2)',
    disconnect(0x00, props(prop.u32(PID.sessionExpiry, 0), prop.u32(PID.sessionExpiry, 0))),
    PROTO(5),
    'published',
  );
  Dc(
    5,
    'DISCONNECT Reason String twice (§3.14.2.2.3)',
    disconnect(0x00, props(prop.str(PID.reasonString, 'a'), prop.str(PID.reasonString, 'b'))),
    PROTO(5),
    'published',
  );
  Dc(
    5,
    'DISCONNECT Topic Alias (not a DISCONNECT property)',
    disconnect(0x00, props(prop.u16(PID.topicAlias, 1))),
    MAL_OR_PROTO(5),
    'published',
  );
  Dc(
    5,
    'DISCONNECT Receive Maximum (not a DISCONNECT property)',
    disconnect(0x00, props(prop.u16(PID.receiveMaximum, 1))),
    MAL_OR_PROTO(5),
    'published',
  );
  Dc(5, 'DISCONNECT unknown property id 0x00', disconnect(0x00, props(hex('0000'))), MAL_OR_PROTO(5), 'published');
  Dc(
    5,
    'DISCONNECT Reason String not UTF-8 [MQTT-1.5.4-1]',
    disconnect(0x00, props(prop.str(PID.reasonString, hex('eda080')))),
    MAL(5),
    'published',
  );
  Dc(5, 'DISCONNECT Session Expiry Interval cut short', disconnect(0x00, cat(3, PID.sessionExpiry, 0, 0)), MAL(5), 'published');
}

// AUTH and the reserved packet types ----------------------------------------------------------------------
{
  add('AUTH', 4, 'AUTH in 3.1.1 (packet type 15 is reserved, §2.2.1 Table 2.1)', hex('f000'), CLOSE);
  add(
    'AUTH',
    4,
    'AUTH 0x18 with an Authentication Method in 3.1.1 (reserved type)',
    auth(0x18, props(prop.str(PID.authMethod, 'M'))),
    CLOSE,
  );
  add('AUTH', 4, 'AUTH as the first packet in 3.1.1 [MQTT-3.1.0-1]', hex('f000'), CLOSE, { login: false });
  add('AUTH', 5, 'AUTH as the first packet [MQTT-3.1.0-1]', auth(0x18, props(prop.str(PID.authMethod, 'M'))), CLOSE, { login: false });
  const A5 = (name: string, bytes: Buffer, e: Expect): void => add('AUTH', 5, name, bytes, e);
  // The login used no Authentication Method, so no AUTH may follow (§4.12, [MQTT-4.12.1-1]).
  A5('AUTH 0x00, Remaining Length 0, with no authentication going on (§4.12)', hex('f000'), PROTO(5));
  A5(
    'AUTH 0x19 re-authentication when CONNECT had no Authentication Method [MQTT-4.12.1-1]',
    auth(0x19, props(prop.str(PID.authMethod, 'SCRAM-SHA-1'))),
    PROTO(5),
  );
  A5('AUTH 0x18 continue with no exchange going on (§4.12)', auth(0x18, props(prop.str(PID.authMethod, 'SCRAM-SHA-1'))), PROTO(5));
  A5('AUTH 0x18 without Authentication Method (§3.15.2.2.2)', auth(0x18, props()), PROTO(5));
  for (const rc of [0x01, 0x04, 0x87, 0xff])
    A5(
      `AUTH reason 0x${rc.toString(16)} (not an AUTH code) [MQTT-3.15.2-1]`,
      auth(rc, props(prop.str(PID.authMethod, 'M'))),
      MAL_OR_PROTO(5),
    );
  for (const f of [0x1, 0x2, 0x8])
    A5(
      `AUTH fixed header flags ${f.toString(2).padStart(4, '0')} [MQTT-3.15.1-1]`,
      frame(0xf0 | f, 0x19, props(prop.str(PID.authMethod, 'M'))),
      MAL(5),
    );
  A5('AUTH property length runs past the packet', hex('f00319' + '05' + '15'), MAL_OR_PROTO(5));
  A5(
    'AUTH Authentication Method twice (§3.15.2.2.2)',
    auth(0x19, props(prop.str(PID.authMethod, 'M'), prop.str(PID.authMethod, 'M'))),
    PROTO(5),
  );
  A5(
    'AUTH Authentication Data twice (§3.15.2.2.3)',
    auth(0x19, props(prop.str(PID.authMethod, 'M'), prop.str(PID.authData, 'a'), prop.str(PID.authData, 'b'))),
    PROTO(5),
  );
  A5(
    'AUTH Topic Alias (not an AUTH property)',
    auth(0x19, props(prop.str(PID.authMethod, 'M'), prop.u16(PID.topicAlias, 1))),
    MAL_OR_PROTO(5),
  );
  A5('AUTH Authentication Method not UTF-8 [MQTT-1.5.4-1]', auth(0x19, props(prop.str(PID.authMethod, hex('c0af')))), MAL_OR_PROTO(5));
  for (const v of V45) {
    add('reserved types', v, 'packet type 0 (reserved), Remaining Length 0', hex('0000'), MAL_OR_PROTO(v));
    add('reserved types', v, 'packet type 0 (reserved) with a body', hex('0002' + '0001'), MAL_OR_PROTO(v));
    add('reserved types', v, 'packet type 0 with flags 1111', hex('0f00'), MAL_OR_PROTO(v));
    add('reserved types', v, 'packet type 0 as the first packet [MQTT-3.1.0-1]', hex('0000'), CLOSE, { login: false });
  }
  add('reserved types', 4, 'packet type 15 with flags 1111 (reserved in 3.1.1)', hex('ff00'), CLOSE);
}

// MQTT 3.1 after CONNACK
{
  const X = (g: Group, name: string, bytes: Buffer): void => add(g, 3, `3.1: ${name}`, bytes, CLOSE);
  X('PUBLISH', 'PUBLISH QoS 3', publish(3, { topic: TOPIC, first: 0x36 }));
  X('PUBLISH', 'PUBLISH topic length runs past the packet', hex('3003000561'));
  X('PUBLISH', 'PUBLISH QoS 1 without a packet id', hex('3203000161'));
  X('SUBSCRIBE', 'SUBSCRIBE without a filter', hex('82020003'));
  X('SUBSCRIBE', 'SUBSCRIBE filter without its QoS byte', frame(0x82, u16(3), str('m25/s')));
  X('UNSUBSCRIBE', 'UNSUBSCRIBE filter length runs past the packet', frame(0xa2, u16(4), u16(30), Buffer.from('ab')));
  X('PUBACK', 'PUBACK Remaining Length 0', hex('4000'));
  X('PINGREQ', 'PINGREQ with Remaining Length 1', hex('c00100'));
  X('reserved types', 'packet type 0', hex('0000'));
  X('AUTH', 'packet type 15', hex('f000'));
  add('PUBLISH', 3, '3.1: PUBLISH QoS 1 (control)', publish(3, { topic: TOPIC, qos: 1, id: 5 }), answers(TYPE.PUBACK));
}

// ---------------------------------------------------------------------------------------------
// Running the table

interface Failure {
  group: Group;
  v: Version;
  name: string;
  bytes: string;
  expected: string;
  observed: string;
  problems: string[];
}

describe('25 malformed packets, by packet type', () => {
  let tb: TestBroker;
  let watcher: MqttClient;
  let wills: MessageCollector;
  const failures: Failure[] = [];
  let n = 0;
  /** This process's open file descriptors once the broker and the will watcher run. */
  let baselineFds = 0;

  beforeAll(async () => {
    tb = await startTestBroker(USER_TABLE_AUTH + NO_LOGIN_BACKOFF);
    watcher = (
      await connectAsync(tb.port, { protocolVersion: 5, username: 'alice', password: 'alice-pw', clientId: uniqueName('m25-will') })
    ).client;
    wills = collect(watcher);
    await subscribe(watcher, 'm25/will/#', { qos: 0 });
    baselineFds = openFileDescriptors();
  });
  afterAll(async () => {
    watcher?.end(true);
    const file = process.env.BIFRO_MALFORMED_REPORT;
    if (file) writeFileSync(file, JSON.stringify({ total: cases.length, failures }, null, 2));
    await tb?.stop();
  });

  it('the table covers every packet type, both protocol versions', () => {
    const count = (g: Group, v: Version): number => cases.filter((c) => c.group === g && c.v === v).length;
    for (const g of [
      'CONNECT',
      'PUBLISH',
      'PUBACK',
      'PUBREC',
      'PUBREL',
      'PUBCOMP',
      'SUBSCRIBE',
      'UNSUBSCRIBE',
      'PINGREQ',
      'DISCONNECT',
      'AUTH',
    ] as const) {
      expect(count(g, 4)).toBeGreaterThan(0);
      expect(count(g, 5)).toBeGreaterThan(0);
    }
    expect(cases.length).toBeGreaterThan(300);
  });

  it.each(
    cases.map(
      (c, i) => [`${c.group} v${c.v === 4 ? '3.1.1' : c.v === 5 ? '5' : '3.1'} #${i}: ${c.name} → ${describeExpect(c.expect)}`, c] as const,
    ),
  )('%s', async (_title, c) => {
    n += 1;
    const clientId = uniqueName('m25');
    const login = c.login ?? c.group !== 'CONNECT';
    const user = n % 2 === 0 ? 'alice' : 'bob';
    // The DISCONNECT rows' will goes to a topic of this case, watched by alice's long-lived client.
    const willTopic = `m25/will/${clientId}`;
    const extra = c.will !== undefined ? { will: { topic: willTopic, payload: 'gone' } } : c.loginExtra;
    const bytesOf = typeof c.bytes === 'function' ? c.bytes : () => c.bytes as Buffer;
    let sent: Buffer = Buffer.alloc(0);
    const r = await runBytes(
      tb.port,
      (ctx) => (sent = bytesOf({ ...ctx, clientId })),
      c.expect,
      login ? { login: { v: c.v, user: c.will !== undefined ? 'alice' : user, clientId, ...(extra ? { extra } : {}) } } : {},
    );
    const problems = r.setupError !== undefined ? [r.setupError] : judge(c.expect, r.observed);
    if (c.will !== undefined && r.setupError === undefined) {
      const got = (): boolean => wills.messages.some((m) => m.topic === willTopic);
      if (c.will === 'published') {
        if (!(await waitUntil(got, 1000))) problems.push('the will was not published (the connection ended without a valid DISCONNECT)');
      } else if (await waitUntil(got, 150)) problems.push('the will was published after a valid DISCONNECT 0x00 [MQTT-3.14.4-3]');
    }
    let isolation: string | undefined;
    try {
      await expectOthersUnaffected(tb.port, n % 2 === 0 ? 5 : 4);
    } catch (e) {
      isolation = (e as Error).message;
      problems.push(`other connections affected: ${isolation}`);
    }
    if (problems.length > 0) {
      const f: Failure = {
        group: c.group,
        v: c.v,
        name: c.name,
        bytes: sent.toString('hex'),
        expected: describeExpect(c.expect) + (c.will ? `; will ${c.will}` : ''),
        observed: describeObserved(r.observed),
        problems,
      };
      failures.push(f);
      throw new Error(
        `${c.name}\n  bytes:    ${f.bytes}\n  expected: ${f.expected}\n  observed: ${f.observed}\n  problems: ${problems.join('; ')}`,
      );
    }
  });

  it('every socket of the table is released: file descriptors back at the baseline (/proc/self/fd)', async () => {
    await waitUntil(() => openFileDescriptors() <= baselineFds + 3, 5000, 50);
    expect(openFileDescriptors()).toBeLessThanOrEqual(baselineFds + 3);
  });
});
