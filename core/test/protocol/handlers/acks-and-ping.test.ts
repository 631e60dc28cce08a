import type { Session } from '../../../src/session/session';
import { handlePingreq } from '../../../src/protocol/handlers/pingreq';
import { handlePuback } from '../../../src/protocol/handlers/puback';
import { handlePubcomp } from '../../../src/protocol/handlers/pubcomp';
import { handlePubrec } from '../../../src/protocol/handlers/pubrec';
import { handlePubrel } from '../../../src/protocol/handlers/pubrel';
import { PACKET } from '../../../src/codec/packet-types';
import { RC } from '../../../src/codec/reason-codes';
import { TestPort } from './test-port';

/** The packet handlers of PINGREQ and of the QoS 1/2 flows, through the connection port alone. */

function session(overrides: Partial<Session> = {}): Partial<Session> & { completed: number[]; receivedIds: [number, boolean][] } {
  const completed: number[] = [];
  const receivedIds: [number, boolean][] = [];
  const inboundQoS2 = new Set<number>();
  return {
    completed,
    receivedIds,
    inboundQoS2,
    persistent: false,
    complete: (packetId: number) => {
      completed.push(packetId);
    },
    received: (packetId: number, failed: boolean) => {
      receivedIds.push([packetId, failed]);
      return packetId === 7;
    },
    ...overrides,
  } as Partial<Session> & { completed: number[]; receivedIds: [number, boolean][] };
}

describe('PINGREQ handler', () => {
  it('answers PINGRESP (0xD0 0x00) and nothing else [MQTT-3.12.4-1]', () => {
    const port = new TestPort();
    handlePingreq(port);
    expect(port.calls).toEqual([{ op: 'write', bytes: Buffer.from([0xd0, 0x00]) }]);
  });

  it('writes nothing once the connection is closed', () => {
    const port = new TestPort();
    port.state = 'closed';
    handlePingreq(port);
    expect(port.calls).toEqual([]);
  });
});

describe('PUBACK / PUBCOMP handlers', () => {
  it('complete the delivery of their packet id in the session, sending nothing', () => {
    const s = session();
    const port = new TestPort({ session: s });
    handlePuback(port, 3);
    handlePubcomp(port, 4);
    expect(s.completed).toEqual([3, 4]);
    expect(port.calls).toEqual([]);
  });

  it('are ignored without a session', () => {
    const port = new TestPort();
    expect(() => handlePuback(port, 3)).not.toThrow();
    expect(() => handlePubcomp(port, 3)).not.toThrow();
    expect(port.calls).toEqual([]);
  });
});

describe('PUBREC handler', () => {
  it('leaves a known packet id to the session (it sends PUBREL)', () => {
    const s = session();
    const port = new TestPort({ session: s });
    handlePubrec(port, 7, 0);
    expect(s.receivedIds).toEqual([[7, false]]);
    expect(port.calls).toEqual([]);
  });

  it('answers an unknown packet id with PUBREL 0x92 (v5) or 0 (v3)', () => {
    const v5 = new TestPort({ session: session() });
    handlePubrec(v5, 8, 0);
    expect(v5.of('ack')).toEqual([{ op: 'ack', type: PACKET.PUBREL, packetId: 8, reasonCode: RC.PacketIdentifierNotFound }]);
    const v3 = new TestPort({ version: 4, session: session() });
    handlePubrec(v3, 8, 0);
    expect(v3.of('ack')).toEqual([{ op: 'ack', type: PACKET.PUBREL, packetId: 8, reasonCode: 0 }]);
  });

  it('ends the flow on a failure reason (≥ 0x80): the session is told, no PUBREL goes', () => {
    const s = session();
    const port = new TestPort({ session: s });
    handlePubrec(port, 8, 0x80);
    expect(s.receivedIds).toEqual([[8, true]]);
    expect(port.calls).toEqual([]);
  });
});

describe('PUBREL handler', () => {
  it('releases a known packet id and answers PUBCOMP 0 at once (transient session)', () => {
    const s = session();
    s.inboundQoS2!.add(5);
    const port = new TestPort({ session: s });
    handlePubrel(port, 5);
    expect(s.inboundQoS2!.has(5)).toBe(false);
    expect(port.of('ack')).toEqual([{ op: 'ack', type: PACKET.PUBCOMP, packetId: 5, reasonCode: 0 }]);
  });

  it('answers an unknown packet id with PUBCOMP 0x92 (v5) or 0 (v3) [§4.3.3]', () => {
    const v5 = new TestPort({ session: session() });
    handlePubrel(v5, 9);
    expect(v5.of('ack')).toEqual([{ op: 'ack', type: PACKET.PUBCOMP, packetId: 9, reasonCode: RC.PacketIdentifierNotFound }]);
    const v3 = new TestPort({ version: 4, session: session() });
    handlePubrel(v3, 9);
    expect(v3.of('ack')).toEqual([{ op: 'ack', type: PACKET.PUBCOMP, packetId: 9, reasonCode: 0 }]);
  });

  it('for a persistent session, answers PUBCOMP only once the release is stored, and after earlier acknowledgements', async () => {
    let stored!: () => void;
    const removed = new Promise<void>((resolve) => (stored = resolve));
    const s = session({
      persistent: true,
      host: { persistence: { removeIncoming: () => removed }, storageFailed: () => undefined } as unknown as Session['host'],
    });
    s.inboundQoS2!.add(5);
    s.inboundQoS2!.add(6);
    const port = new TestPort({ session: s });
    handlePubrel(port, 5);
    handlePubrel(port, 6);
    expect(port.of('ack')).toEqual([]);
    stored();
    await removed;
    await Promise.resolve();
    expect(port.of('ack').map((a) => [a.type, a.packetId, a.reasonCode])).toEqual([
      [PACKET.PUBCOMP, 5, 0],
      [PACKET.PUBCOMP, 6, 0],
    ]);
  });

  it('disconnects instead of PUBCOMP when storing the release failed: the id stays, the client resends PUBREL', async () => {
    const failed = Promise.reject(new Error('disk full'));
    const storageFailed = jest.fn();
    const s = session({
      persistent: true,
      host: { persistence: { removeIncoming: () => failed }, storageFailed } as unknown as Session['host'],
    });
    s.inboundQoS2!.add(5);
    const port = new TestPort({ session: s, engine: { emit: jest.fn(), storageHealth: { failing: false } } as never });
    handlePubrel(port, 5);
    await failed.catch(() => undefined);
    await Promise.resolve();
    expect(storageFailed).toHaveBeenCalledTimes(1);
    expect(port.of('ack')).toEqual([]);
    expect(port.of('disconnect')).toEqual([{ op: 'disconnect', reasonCode: RC.UnspecifiedError, reasonString: 'storage write failed' }]);
    expect(s.inboundQoS2!.has(5)).toBe(true);
  });
});
