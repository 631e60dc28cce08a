import type { ClientInfo } from '@bifro/spi';
import { flushAcks, queueAck, type AckQueueOwner } from '../../src/protocol/ack-queue';
import type { ConnectionState } from '../../src/protocol/connection-port';
import { PACKET, type AckType } from '../../src/codec/packet-types';
import { PublishAck } from '../../src/protocol/publish-ack';
import { RC } from '../../src/codec/reason-codes';

/** The acknowledgement queue alone: PUBLISH order [MQTT-4.6.0-2], [MQTT-4.6.0-3], and failed storage writes. */

class Owner implements AckQueueOwner {
  ackQueue: PublishAck[] | undefined;
  state: ConnectionState = 'connected';
  readonly client = { tenantId: 't1', clientId: 'c1' } as ClientInfo;
  readonly session = { inboundQoS2: new Set<number>([2]) };
  readonly sent: [AckType, number, number][] = [];
  readonly events: [string, unknown][] = [];
  readonly disconnects: number[] = [];
  /** Publishes counted as refused by a storage failure episode. */
  refused = 0;
  failing = true;
  readonly engine = {
    emit: (type: string, _client: unknown, details: unknown) => {
      this.events.push([type, details]);
    },
    storageHealth: {
      failing: this.failing,
      refused: () => void this.refused++,
    },
  } as unknown as AckQueueOwner['engine'];
  constructor(readonly v5 = true) {}
  sendAck(type: AckType, packetId: number, reasonCode: number): void {
    this.sent.push([type, packetId, reasonCode]);
  }
  disconnect(reasonCode: number): void {
    this.disconnects.push(reasonCode);
    this.state = 'closed';
  }
  flushAcks(): void {
    flushAcks(this);
  }
}

/** A deferred storage write. */
function write(): { promise: Promise<void>; done: () => void; fail: (err: Error) => void } {
  let done!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    done = resolve;
    fail = reject;
  });
  return { promise, done, fail };
}

const settle = async (): Promise<void> => {
  for (let i = 0; i < 3; i++) await Promise.resolve();
};

describe('acknowledgement queue', () => {
  it('sends an acknowledgement with nothing to wait for at once, allocating no queue', () => {
    const owner = new Owner();
    queueAck(owner, new PublishAck(owner, PACKET.PUBACK, 1, 'a'));
    expect(owner.sent).toEqual([[PACKET.PUBACK, 1, 0]]);
    expect(owner.ackQueue).toBeUndefined();
  });

  it('keeps PUBLISH order: a ready acknowledgement waits for an earlier one still writing', async () => {
    const owner = new Owner();
    const w = write();
    const first = new PublishAck(owner, PACKET.PUBACK, 1, 'a');
    first.add(w.promise);
    queueAck(owner, first);
    queueAck(owner, new PublishAck(owner, PACKET.PUBACK, 2, 'a'));
    expect(owner.sent).toEqual([]);
    w.done();
    await settle();
    expect(owner.sent).toEqual([
      [PACKET.PUBACK, 1, 0],
      [PACKET.PUBACK, 2, 0],
    ]);
  });

  it('v5: a failed write gets 0x80 and distError; a PUBREC forgets its packet id', async () => {
    const owner = new Owner();
    const w = write();
    const ack = new PublishAck(owner, PACKET.PUBREC, 2, 'a');
    ack.add(w.promise);
    queueAck(owner, ack);
    w.fail(new Error('disk full'));
    await settle();
    expect(owner.sent).toEqual([[PACKET.PUBREC, 2, RC.UnspecifiedError]]);
    expect(owner.session.inboundQoS2.has(2)).toBe(false);
    expect(owner.events.map(([type, d]) => [type, (d as { qos: number }).qos])).toEqual([['distError', 2]]);
  });

  it('v3: a failed write disconnects (the client resends); nothing more is sent once closed', async () => {
    const owner = new Owner(false);
    const w = write();
    const ack = new PublishAck(owner, PACKET.PUBACK, 1, 'a');
    ack.add(w.promise);
    queueAck(owner, ack);
    queueAck(owner, new PublishAck(owner, PACKET.PUBACK, 2, 'a'));
    w.fail(new Error('disk full'));
    await settle();
    expect(owner.disconnects).toEqual([RC.UnspecifiedError]);
    expect(owner.sent).toEqual([]);
    expect(owner.ackQueue).toEqual([]);
  });

  it('sends PUBCOMP once the release is stored; a release that was not stored disconnects, keeping the id for the PUBREL the client resends', async () => {
    const owner = new Owner();
    const stored = write();
    const ok = new PublishAck(owner, PACKET.PUBCOMP, 2, undefined);
    ok.add(stored.promise);
    queueAck(owner, ok);
    owner.session.inboundQoS2.delete(2);
    stored.done();
    await settle();
    expect(owner.sent).toEqual([[PACKET.PUBCOMP, 2, 0]]);

    const w = write();
    const ack = new PublishAck(owner, PACKET.PUBCOMP, 3, undefined);
    ack.add(w.promise);
    queueAck(owner, ack);
    w.fail(new Error('disk full'));
    await settle();
    expect(owner.sent).toEqual([[PACKET.PUBCOMP, 2, 0]]);
    expect(owner.disconnects).toEqual([RC.UnspecifiedError]);
    expect(owner.session.inboundQoS2.has(3)).toBe(true);
    expect(owner.events.map(([type]) => type)).toEqual(['distError']);
    expect(owner.refused).toBe(1);
  });
});
