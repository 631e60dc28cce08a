import type { Engine } from '../../../src/broker/engine';
import type { Session } from '../../../src/session/session';
import { handleDisconnect } from '../../../src/protocol/handlers/disconnect';
import { RC } from '../../../src/codec/reason-codes';
import { TestPort } from './test-port';

/** The DISCONNECT handler, through the connection port alone. */

const SETTINGS: Record<string, number> = { MinSessionExpirySeconds: 10, MaxSessionExpirySeconds: 3600 };

function engine(): Partial<Engine> & { events: [string, unknown][] } {
  const events: [string, unknown][] = [];
  return {
    events,
    setting: ((_tenant: string, name: string) => SETTINGS[name]) as Engine['setting'],
    emit: ((type: string, _client: unknown, details: unknown) => {
      events.push([type, typeof details === 'function' ? (details as () => unknown)() : details]);
    }) as Engine['emit'],
  } as unknown as Partial<Engine> & { events: [string, unknown][] };
}

describe('DISCONNECT handler', () => {
  it('ends the connection as the client asked: no will, cause byClient with its reason code', () => {
    const port = new TestPort({ session: { expirySeconds: 0 } as Session, engine: engine() });
    handleDisconnect(port, { cmd: 'disconnect', reasonCode: 0 });
    expect(port.normalDisconnect).toBe(true);
    expect(port.closeCause).toEqual({ type: 'byClient', reasonCode: 0 });
    expect(port.calls).toEqual([{ op: 'end' }]);
  });

  it('keeps the will for v5 reason 0x04 (Disconnect with Will Message)', () => {
    const port = new TestPort({ session: { expirySeconds: 0 } as Session, engine: engine() });
    handleDisconnect(port, { cmd: 'disconnect', reasonCode: RC.DisconnectWithWillMessage });
    expect(port.normalDisconnect).toBe(false);
    expect(port.closeCause).toEqual({ type: 'byClient', reasonCode: RC.DisconnectWithWillMessage });
  });

  it('takes a new Session Expiry Interval within the tenant limits', () => {
    const s = { expirySeconds: 60, tenantId: 't1' } as Session;
    const port = new TestPort({ session: s, engine: engine() });
    handleDisconnect(port, { cmd: 'disconnect', reasonCode: 0, properties: { sessionExpiryInterval: 999_999 } });
    expect(s.expirySeconds).toBe(3600);
    const t = { expirySeconds: 60, tenantId: 't1' } as Session;
    handleDisconnect(new TestPort({ session: t, engine: engine() }), { cmd: 'disconnect', properties: { sessionExpiryInterval: 1 } });
    expect(t.expirySeconds).toBe(10);
  });

  it('refuses a change of Session Expiry Interval from 0 as a protocol error [MQTT-3.14.2-2]', () => {
    const s = { expirySeconds: 0, tenantId: 't1' } as Session;
    const port = new TestPort({ session: s, engine: engine() });
    handleDisconnect(port, { cmd: 'disconnect', reasonCode: 0, properties: { sessionExpiryInterval: 30 } });
    expect(port.calls).toEqual([
      { op: 'protocolError', reasonCode: RC.ProtocolError, why: 'session expiry changed from 0 at DISCONNECT', event: 'protocolViolation' },
    ]);
    expect(s.expirySeconds).toBe(0);
    expect(port.closeCause).toBeUndefined();
  });

  it('ignores the expiry property of a v3 client', () => {
    const s = { expirySeconds: 0, tenantId: 't1' } as Session;
    const port = new TestPort({ version: 4, session: s, engine: engine() });
    handleDisconnect(port, { cmd: 'disconnect', properties: { sessionExpiryInterval: 30 } });
    expect(s.expirySeconds).toBe(0);
    expect(port.calls).toEqual([{ op: 'end' }]);
  });
});
