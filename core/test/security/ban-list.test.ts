import pino from 'pino';
import type { EventDetailValue, EventType } from '@bifro/spi';
import { MemoryStorage } from '../../../plugins/storage-memory/src/memory-storage';
import { BanList, banMatcher, banProblem, parseAddressBlock } from '../../src/security/ban-list';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

interface Emitted {
  type: EventType;
  tenantId: string | undefined;
  detail: Readonly<Record<string, EventDetailValue>>;
}

function setup(withStore = true): {
  bans: BanList;
  storage: MemoryStorage;
  logs: Record<string, unknown>[];
  events: Emitted[];
  clock: ReturnType<typeof manualClock>;
} {
  const logs: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const events: Emitted[] = [];
  const clock = manualClock();
  const storage = new MemoryStorage();
  const bans = new BanList(
    withStore ? storage.bans : undefined,
    logger,
    (type, client, detail) =>
      events.push({ type, tenantId: client?.tenantId, detail: typeof detail === 'function' ? detail() : (detail ?? {}) }),
    clock.now,
  );
  return { bans, storage, logs, events, clock };
}

const client = (tenantId: string, clientId: string, userId: string, remoteAddress = '192.0.2.1') => ({
  tenantId,
  clientId,
  userId,
  remoteAddress,
});

describe('parseAddressBlock and banProblem', () => {
  it('takes IPv4 and IPv6 addresses and CIDR blocks, nothing else', () => {
    expect(parseAddressBlock('10.0.0.0/8')).toEqual({ type: 'ipv4', address: '10.0.0.0', prefix: 8 });
    expect(parseAddressBlock('::1')).toEqual({ type: 'ipv6', address: '::1', prefix: 128 });
    expect(parseAddressBlock('2001:db8::/0')).toEqual({ type: 'ipv6', address: '2001:db8::', prefix: 0 });
    for (const bad of [
      '',
      'host.example',
      '10.0.0.0/33',
      '10.0.0.0/-1',
      '10.0.0.0/8/8',
      '::/129',
      'fe80::1%lo',
      '10.0.0.0/ 8',
      '010.0.0.1',
    ])
      expect([bad, parseAddressBlock(bad)]).toEqual([bad, undefined]);
  });

  it('names the field that is wrong', () => {
    expect(banProblem({ kind: 'clientId', value: 'c' })).toMatch(/^tenant:/);
    expect(banProblem({ kind: 'user', tenantId: 't', value: '' })).toMatch(/^value:/);
    expect(banProblem({ kind: 'tenant', tenantId: 'a', value: 'b' })).toMatch(/^tenant:/);
    expect(banProblem({ kind: 'address', value: '1.2.3' })).toMatch(/^value:/);
    expect(banProblem({ kind: 'address', value: '1.2.3.4' })).toBeUndefined();
    expect(banProblem({ kind: 'tenant', value: 't' })).toBeUndefined();
  });
});

describe('BanList', () => {
  it('matches by client id, user and tenant within the tenant only, and reports each refusal', async () => {
    const { bans, events, logs } = setup();
    await bans.set({ kind: 'clientId', tenantId: 't1', value: 'c1', createdAt: 0 });
    await bans.set({ kind: 'user', tenantId: 't1', value: 'alice', createdAt: 0 });
    await bans.set({ kind: 'tenant', value: 't3', createdAt: 0 });
    expect(bans.refusing(client('t1', 'c1', 'bob'))?.kind).toBe('clientId');
    expect(bans.refusing(client('t1', 'c2', 'alice'))?.kind).toBe('user');
    expect(bans.refusing(client('t3', 'any', 'any'))).toMatchObject({ kind: 'tenant', tenantId: 't3' });
    expect(bans.refusing(client('t2', 'c1', 'alice'))).toBeUndefined();
    expect(bans.refused).toBe(3);
    expect(events.map((e) => [e.type, e.tenantId, e.detail.reason, e.detail.kind])).toEqual([
      ['banned', 't1', 'ban', 'clientId'],
      ['banned', 't1', 'ban', 'user'],
      ['banned', 't3', 'ban', 'tenant'],
    ]);
    expect(logs.filter((l) => l.msg === 'banned client refused' && l.level === 20)).toHaveLength(3);
  });

  it('matches IPv4 and IPv6 blocks, IPv4-mapped addresses included, per tenant or for all', async () => {
    const { bans } = setup();
    await bans.set({ kind: 'address', tenantId: 't1', value: '127.0.0.0/8', createdAt: 0 });
    await bans.set({ kind: 'address', value: '2001:db8::/32', createdAt: 0 });
    expect(bans.match(client('t1', 'c', 'u', '127.9.9.9'))?.value).toBe('127.0.0.0/8');
    expect(bans.match(client('t1', 'c', 'u', '::ffff:127.0.0.1'))?.value).toBe('127.0.0.0/8');
    expect(bans.match(client('t2', 'c', 'u', '127.0.0.1'))).toBeUndefined();
    expect(bans.match(client('t2', 'c', 'u', '2001:db8:1::5'))?.value).toBe('2001:db8::/32');
    expect(bans.match(client('t1', 'c', 'u', '2001:db9::5'))).toBeUndefined();
    expect(bans.match(client('t1', 'c', 'u', 'not an address'))).toBeUndefined();
    expect(await bans.lift('address', 't1', '127.0.0.0/8')).toBeDefined();
    expect(bans.match(client('t1', 'c', 'u', '127.0.0.1'))).toBeUndefined();
    expect(banMatcher({ kind: 'address', value: '10.0.0.0/8', createdAt: 0 })(client('t9', 'c', 'u', '10.1.2.3'))).toBe(true);
  });

  it('drops ended bans when met, in memory and in storage, and lift of an ended one finds nothing', async () => {
    const { bans, storage, clock } = setup();
    await bans.set({ kind: 'clientId', tenantId: 't1', value: 'c1', createdAt: clock.now(), until: clock.now() + 1000 });
    await bans.set({ kind: 'address', value: '10.0.0.0/8', createdAt: clock.now(), until: clock.now() + 1000 });
    await bans.set({ kind: 'user', tenantId: 't1', value: 'u', createdAt: clock.now(), until: clock.now() + 1000 });
    expect(await storage.bans.list()).toHaveLength(3);
    clock.advance(999);
    expect(bans.match(client('t1', 'c1', 'x'))).toBeDefined();
    clock.advance(1);
    expect(bans.match(client('t1', 'c1', 'x', '10.0.0.1'))).toBeUndefined();
    await bans.settled();
    expect((await storage.bans.list()).map((b) => b.kind)).toEqual(['user']);
    expect(await bans.lift('user', 't1', 'u')).toBeUndefined();
    expect(await storage.bans.list()).toEqual([]);
    expect(bans.size).toBe(0);
  });

  it('loads stored bans, deleting ended ones and ignoring malformed ones', async () => {
    const { bans, storage, logs, clock } = setup();
    await storage.bans.put({ kind: 'clientId', tenantId: 't1', value: 'kept', createdAt: 0 });
    await storage.bans.put({ kind: 'clientId', tenantId: 't1', value: 'over', createdAt: 0, until: clock.now() });
    await storage.bans.put({ kind: 'address', value: 'garbage', createdAt: 0 });
    expect(await bans.load()).toBe(1);
    expect(bans.list().map((b) => b.value)).toEqual(['kept']);
    expect((await storage.bans.list()).map((b) => b.value).sort()).toEqual(['garbage', 'kept']);
    expect(logs.some((l) => l.msg === 'stored ban ignored: it is not well formed')).toBe(true);
  });

  it('without a ban store keeps bans in memory and warns once that they will not survive a restart', async () => {
    const { bans, logs } = setup(false);
    await bans.set({ kind: 'clientId', tenantId: 't1', value: 'a', createdAt: 0 });
    await bans.set({ kind: 'clientId', tenantId: 't1', value: 'b', createdAt: 0 });
    expect(bans.durable).toBe(false);
    expect(bans.match(client('t1', 'b', 'u'))).toBeDefined();
    expect(logs.filter((l) => l.level === 40 && String(l.msg).includes('will not survive a restart'))).toHaveLength(1);
    await expect(bans.set({ kind: 'address', value: 'nope', createdAt: 0 })).rejects.toThrow(/^value:/);
  });
});
