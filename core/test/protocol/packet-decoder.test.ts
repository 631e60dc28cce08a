import mqttPacket, { type Packet } from 'mqtt-packet';
import {
  checkAck,
  checkPingreq,
  decodeAuth,
  decodeConnect,
  decodeDisconnect,
  decodeSubscribe,
  decodeUnsubscribe,
  isDecodeFailure,
  unexpectedPacketType,
  type DecodeFailure,
} from '../../src/codec/packet-decoder';

/** The body of an encoded packet (after the fixed header and remaining length). */
function bodyOf(packet: Packet, protocolVersion: 3 | 4 | 5): Buffer {
  const bytes = mqttPacket.generate(packet, { protocolVersion });
  let i = 1;
  while ((bytes[i]! & 0x80) !== 0) i++;
  return bytes.subarray(i + 1);
}

function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

function failure(x: unknown): DecodeFailure {
  if (!isDecodeFailure(x)) throw new Error(`expected a refusal, got ${JSON.stringify(x)}`);
  return x;
}

describe('packet decoder: CONNECT', () => {
  it('decodes what mqtt-packet encodes, v3.1, v3.1.1 and v5 with will, user name, password and properties', () => {
    for (const protocolVersion of [3, 4, 5] as const) {
      const packet = {
        cmd: 'connect' as const,
        protocolId: protocolVersion === 3 ? ('MQIsdp' as const) : ('MQTT' as const),
        protocolVersion,
        clientId: 'dev-1',
        clean: false,
        keepalive: 42,
        username: 'ü-user',
        password: Buffer.from([0, 1, 2]),
        will: {
          topic: 'w/t',
          payload: Buffer.from('bye'),
          qos: 1 as const,
          retain: true,
          ...(protocolVersion === 5
            ? { properties: { willDelayInterval: 5, contentType: 'text/plain', userProperties: { a: ['1', '2'] } } }
            : {}),
        },
        ...(protocolVersion === 5 ? { properties: { sessionExpiryInterval: 60, receiveMaximum: 10, maximumPacketSize: 1000 } } : {}),
      };
      const decoded = decodeConnect(bodyOf(packet, protocolVersion));
      if (isDecodeFailure(decoded)) throw new Error(decoded.why);
      expect(decoded.clientId).toBe('dev-1');
      expect(decoded.protocolVersion).toBe(protocolVersion);
      expect(decoded.clean).toBe(false);
      expect(decoded.keepalive).toBe(42);
      expect(decoded.username).toBe('ü-user');
      expect(decoded.password).toEqual(Buffer.from([0, 1, 2]));
      expect(decoded.will).toMatchObject({ topic: 'w/t', payload: Buffer.from('bye'), qos: 1, retain: true });
      if (protocolVersion === 5) {
        expect(decoded.properties).toEqual({ sessionExpiryInterval: 60, receiveMaximum: 10, maximumPacketSize: 1000 });
        expect(decoded.will?.properties).toMatchObject({ willDelayInterval: 5, contentType: 'text/plain' });
        expect(decoded.will?.properties?.userProperties).toEqual([
          ['a', '1'],
          ['a', '2'],
        ]);
      }
    }
  });

  it('refuses the defect reproduction: a user-name length that runs past the packet', () => {
    const frame = hex('101200044d515454048000050003667a10120004');
    const f = failure(decodeConnect(frame.subarray(2)));
    expect(f.code).toBe(0x81);
  });

  it.each([
    ['a will QoS without the will flag [MQTT-3.1.2-11]', '00044d515454 04 08 003c 0001 61', 0x81],
    ['will retain without the will flag [MQTT-3.1.2-13]', '00044d515454 04 20 003c 0001 61', 0x81],
    ['will QoS 3 [MQTT-3.1.2-14]', '00044d515454 04 1c 003c 0001 61 0001 74 0000', 0x81],
    ['a password without a user name in 3.1.1 [MQTT-3.1.2-22]', '00044d515454 04 42 003c 0001 61 0001 70', 0x81],
    ['a client id with U+0000 [MQTT-1.5.4-2]', '00044d515454 04 02 003c 0002 6100', 0x81],
    ['a client id that is not UTF-8 [MQTT-1.5.4-1]', '00044d515454 04 02 003c 0002 c328', 0x81],
    ['bytes after the payload', '00044d515454 04 02 003c 0001 61 ff', 0x81],
    ['a payload cut short', '00044d515454 04 02 003c 0005 61', 0x81],
    ['a session expiry given twice (§2.2.2.2)', '00044d515454 05 02 003c 0a 1100000001 1100000002 0001 61', 0x82],
    ['receive maximum 0', '00044d515454 05 02 003c 03 210000 0001 61', 0x82],
    ['maximum packet size 0', '00044d515454 05 02 003c 05 2700000000 0001 61', 0x82],
    ['request problem information 2', '00044d515454 05 02 003c 02 1702 0001 61', 0x82],
    ['a property not valid in CONNECT (topic alias)', '00044d515454 05 02 003c 03 230001 0001 61', 0x81],
    ['an unknown property identifier', '00044d515454 05 02 003c 02 7f00 0001 61', 0x81],
    ['authentication data without a method', '00044d515454 05 02 003c 04 16000178 0001 61', 0x82],
    ['properties longer than the packet', '00044d515454 05 02 003c 7f 1100 0001 61', 0x81],
    ['a will response topic with a wildcard [MQTT-3.3.2-14]', '00044d515454 05 06 003c 00 0001 61 06 080003612f23 0001 74 0000', 0x82],
    ['an invalid will payload format indicator', '00044d515454 05 06 003c 00 0001 61 02 0102 0001 74 0000', 0x82],
  ])('refuses %s', (_what, body, code) => {
    expect(failure(decodeConnect(hex(body))).code).toBe(code);
  });

  it('accepts a password without a user name in v5 (§3.1.2.9)', () => {
    const decoded = decodeConnect(hex('00044d515454 05 42 003c 00 0001 61 0001 70'));
    expect(isDecodeFailure(decoded)).toBe(false);
  });

  it('names the malformed string in the event', () => {
    expect(failure(decodeConnect(hex('00044d515454 04 02 003c 0002 c328'))).event).toBe('malformedClientIdentifier');
    expect(failure(decodeConnect(hex('00044d515454 04 82 003c 0001 61 0002 c328'))).event).toBe('malformedUserName');
    expect(failure(decodeConnect(hex('00044d515454 04 06 003c 0001 61 0002 c328 0000'))).event).toBe('malformedWillTopic');
  });

  it('keeps CONNECT user properties as ordered pairs, a name like __proto__ included', () => {
    // a=1, __proto__=x, a=2: the order across names is kept (§3.1.2.11.8).
    const decoded = decodeConnect(
      hex('00044d515454 05 02 003c 1d 26 0001 61 0001 31 26 0009 5f5f70726f746f5f5f 0001 78 26 0001 61 0001 32 0001 61'),
    );
    if (isDecodeFailure(decoded)) throw new Error(decoded.why);
    expect(decoded.properties!.userProperties).toEqual([
      ['a', '1'],
      ['__proto__', 'x'],
      ['a', '2'],
    ]);
  });
});

describe('packet decoder: SUBSCRIBE / UNSUBSCRIBE', () => {
  it('decodes options per version', () => {
    const v5 = decodeSubscribe(
      bodyOf(
        {
          cmd: 'subscribe',
          messageId: 7,
          subscriptions: [{ topic: 'a/+', qos: 1, nl: true, rap: true, rh: 2 }],
          properties: { subscriptionIdentifier: 9 },
        },
        5,
      ),
      true,
    );
    expect(v5).toEqual({
      cmd: 'subscribe',
      messageId: 7,
      properties: { subscriptionIdentifier: 9 },
      subscriptions: [{ topic: 'a/+', qos: 1, nl: true, rap: true, rh: 2 }],
    });
    const v4 = decodeSubscribe(bodyOf({ cmd: 'subscribe', messageId: 8, subscriptions: [{ topic: '$share/g/#', qos: 2 }] }, 4), false);
    expect(v4).toEqual({ cmd: 'subscribe', messageId: 8, subscriptions: [{ topic: '$share/g/#', qos: 2 }] });
  });

  it.each([
    ['packet id 0 [MQTT-2.2.1-3]', '0000 0001 61 00', false, 0x82],
    ['no filter [MQTT-3.8.3-3]', '0001', false, 0x82],
    ['reserved option bits in 3.1.1 [MQTT-3.8.3-4]', '0001 0001 61 04', false, 0x81],
    ['QoS 3 (§3.8.3.1)', '0001 0001 61 03', false, 0x82],
    ['a property length in more bytes than needed [MQTT-1.5.5-1]', '0001 8000 0001 61 00', true, 0x81],
    ['an empty filter [MQTT-4.7.3-1]', '0001 0000 00', false, 0x81],
    ['# not last [MQTT-4.7.1-1]', '0001 0003 232f61 00', false, 0x81],
    ['+ inside a level', '0001 0002 612b 00', false, 0x81],
    ['an empty share name [MQTT-4.8.2-1]', '0001 0009 2473686172652f2f61 00', false, 0x81],
    ['a filter with U+0000', '0001 0002 6100 00', false, 0x81],
    ['a filter cut short', '0001 0005 61 00', false, 0x81],
    ['v5 reserved option bits [MQTT-3.8.3-5]', '0001 00 0001 61 40', true, 0x81],
    ['v5 retain handling 3', '0001 00 0001 61 30', true, 0x82],
    ['v5 subscription identifier 0', '0001 02 0b00 0001 61 00', true, 0x82],
    ['v5 subscription identifier twice', '0001 04 0b01 0b02 0001 61 00', true, 0x82],
    ['v5 a property not valid in SUBSCRIBE (topic alias)', '0001 03 230001 0001 61 00', true, 0x81],
  ])('SUBSCRIBE: refuses %s', (_what, body, v5, code) => {
    expect(failure(decodeSubscribe(hex(body), v5)).code).toBe(code);
  });

  it.each([
    ['packet id 0', '0000 0001 61', false, 0x82],
    ['no filter [MQTT-3.10.3-2]', '0001', false, 0x82],
    ['an invalid filter', '0001 0003 612f23 2f', false, 0x81],
    ['v5 a subscription identifier', '0001 02 0b01 0001 61', true, 0x81],
  ])('UNSUBSCRIBE: refuses %s', (_what, body, v5, code) => {
    expect(failure(decodeUnsubscribe(hex(body), v5)).code).toBe(code);
  });
});

describe('packet decoder: DISCONNECT, AUTH, acknowledgements, PINGREQ, packet types', () => {
  it('DISCONNECT', () => {
    expect(decodeDisconnect(Buffer.alloc(0), false)).toEqual({ cmd: 'disconnect' });
    expect(decodeDisconnect(Buffer.alloc(0), true)).toEqual({ cmd: 'disconnect', reasonCode: 0 });
    expect(decodeDisconnect(hex('04'), true)).toEqual({ cmd: 'disconnect', reasonCode: 4 });
    expect(decodeDisconnect(hex('00 05 1100000010'), true)).toEqual({
      cmd: 'disconnect',
      reasonCode: 0,
      properties: { sessionExpiryInterval: 16 },
    });
    expect(failure(decodeDisconnect(hex('00'), false)).code).toBe(0x81);
    expect(failure(decodeDisconnect(hex('8e'), true)).code).toBe(0x82);
    expect(failure(decodeDisconnect(hex('00 03 1c0000'), true)).code).toBe(0x81);
    expect(failure(decodeDisconnect(hex('00 00 ff'), true)).code).toBe(0x81);
  });

  it('AUTH', () => {
    expect(decodeAuth(Buffer.alloc(0))).toEqual({ cmd: 'auth', reasonCode: 0 });
    expect(decodeAuth(hex('18 04 15000178'))).toEqual({ cmd: 'auth', reasonCode: 0x18, properties: { authenticationMethod: 'x' } });
    expect(failure(decodeAuth(hex('01'))).code).toBe(0x82);
    expect(failure(decodeAuth(hex('18 04 16000178'))).code).toBe(0x82);
    expect(failure(decodeAuth(hex('18 08 150001781500017a'))).code).toBe(0x82);
  });

  it('acknowledgements', () => {
    expect(checkAck(4, hex('0001'), false)).toBeUndefined();
    expect(checkAck(4, hex('0001 10'), true)).toBeUndefined();
    expect(checkAck(6, hex('0001 92 00'), true)).toBeUndefined();
    expect(checkAck(5, hex('0001 00 04 1f000178'), true)).toBeUndefined();
    expect(checkAck(4, hex('000100'), false)!.code).toBe(0x81);
    expect(checkAck(4, hex('00'), true)!.code).toBe(0x81);
    expect(checkAck(7, hex('0000'), false)!.code).toBe(0x82);
    expect(checkAck(4, hex('0001 92'), true)!.code).toBe(0x82);
    expect(checkAck(6, hex('0001 10'), true)!.code).toBe(0x82);
    expect(checkAck(4, hex('0001 00 03 230001'), true)!.code).toBe(0x81);
    expect(checkAck(4, hex('0001 00 08 1f0001781f000179'), true)!.code).toBe(0x82);
    expect(checkAck(4, hex('0001 00 00 ff'), true)!.code).toBe(0x81);
    expect(checkAck(4, hex('0001 00 05 1f000178'), true)!.code).toBe(0x81);
  });

  it('PINGREQ and packet types', () => {
    expect(checkPingreq(Buffer.alloc(0))).toBeUndefined();
    expect(checkPingreq(hex('00'))!.code).toBe(0x81);
    expect(unexpectedPacketType(0, true).code).toBe(0x81);
    expect(unexpectedPacketType(15, false).code).toBe(0x81);
    expect(unexpectedPacketType(2, true).code).toBe(0x82);
    expect(unexpectedPacketType(13, false).code).toBe(0x82);
  });

  it('holds no state between calls: a refused frame does not change how the next one decodes', () => {
    const good = bodyOf(
      { cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clientId: 'ok', clean: true, keepalive: 5, username: 'u' },
      4,
    );
    const first = decodeConnect(good);
    for (let cut = 0; cut < good.length; cut++) failure(decodeConnect(good.subarray(0, cut)));
    expect(decodeConnect(good)).toEqual(first);
  });
});
