import type { InboxStore, RetainStore, SessionStore, Storage, StoredMessage } from '@bifro/spi';
import { registerConformance, storageConformance, type StorageConformanceOptions } from '@bifro/spi/testing';
import { expectAllPass, expectFailures } from './support/kit-runner';
import { createNaiveStorage } from './support/naive-storage';

/** A naive storage with one fault introduced by `breakIt`. */
function broken(breakIt: (s: Storage) => void, extra: Partial<StorageConformanceOptions> = {}): StorageConformanceOptions {
  return {
    create: async () => {
      const s = createNaiveStorage();
      breakIt(s);
      return s;
    },
    ...extra,
  };
}

function patchInbox<K extends keyof InboxStore>(s: Storage, name: K, wrap: (original: InboxStore[K]) => InboxStore[K]): void {
  s.inbox[name] = wrap(s.inbox[name].bind(s.inbox) as InboxStore[K]);
}
function patchRetained<K extends keyof RetainStore>(s: Storage, name: K, wrap: (original: RetainStore[K]) => RetainStore[K]): void {
  s.retained[name] = wrap(s.retained[name].bind(s.retained) as RetainStore[K]);
}
function patchSessions<K extends keyof SessionStore>(s: Storage, name: K, wrap: (original: SessionStore[K]) => SessionStore[K]): void {
  s.sessions[name] = wrap(s.sessions[name].bind(s.sessions) as SessionStore[K]);
}

describe('storage kit against a correct naive storage', () => {
  it('passes every case, durability included', async () => {
    const cases = storageConformance({ create: async () => createNaiveStorage(), reopen: async (s) => s, durable: false });
    expect(cases.length).toBeGreaterThan(50);
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
    await expectAllPass(cases);
  });

  it('only adds the durability cases when reopen is given', () => {
    const without = storageConformance({ create: async () => createNaiveStorage() }).map((c) => c.name);
    const withReopen = storageConformance({ create: async () => createNaiveStorage(), reopen: async (s) => s }).map((c) => c.name);
    expect(without.some((n) => n.includes('durability'))).toBe(false);
    expect(withReopen.filter((n) => n.includes('durability'))).toHaveLength(5);
  });

  it('runs init, close and destroy around every case', async () => {
    const calls: string[] = [];
    const cases = storageConformance({
      create: async () =>
        Object.assign(createNaiveStorage(), { init: () => void calls.push('init'), close: () => void calls.push('close') }),
      destroy: async () => void calls.push('destroy'),
    });
    await cases[0].run();
    expect(calls).toEqual(['init', 'close', 'destroy']);
  });
});

describe('storage kit registered through registerConformance', () => {
  registerConformance(storageConformance({ create: async () => createNaiveStorage() }).slice(0, 3), { it });
});

describe('storage kit catches broken storages', () => {
  it('an inbox that reads newest first', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchInbox(
            s,
            'read',
            (read) =>
              async (...a) =>
                (await read(...a)).reverse(),
          ),
        ),
      ),
      'inbox: read returns appended entries oldest first',
    );
  });

  it('an inbox that ignores dropOldest', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => patchInbox(s, 'append', (append) => (t, c, m, limit) => append(t, c, m, { ...limit, dropOldest: false }))),
      ),
      'dropOldest true drops its oldest entries',
      'a lowered limit trims',
    );
  });

  it('an inbox whose count ignores commits', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => {
          let appended = 0;
          patchInbox(s, 'append', (append) => async (...a) => {
            const r = await append(...a);
            appended += r.appended;
            return r;
          });
          s.inbox.count = async () => appended;
        }),
      ),
      'inbox: commit removes every entry',
    );
  });

  it('an inbox that reuses seqs after a commit', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => {
          patchInbox(s, 'read', (read) => async (t, c, after, max) => {
            const all = await read(t, c, 0, Number.MAX_SAFE_INTEGER);
            const renumbered = all.map((e, i) => ({ ...e, seq: i + 1 }));
            return renumbered.filter((e) => e.seq > after).slice(0, max);
          });
        }),
      ),
      'seq keeps growing after commits',
    );
  });

  it('an inbox that ignores the tenant', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => {
          for (const name of ['append', 'read', 'commit', 'count'] as const) {
            const inbox = s.inbox as unknown as Record<string, (t: string, ...rest: unknown[]) => Promise<unknown>>;
            const original = inbox[name].bind(s.inbox);
            inbox[name] = (_t: string, ...rest: unknown[]) => original('shared', ...rest);
          }
        }),
      ),
      'inbox: inboxes of different sessions and tenants are separate',
    );
  });

  it('an inbox that loses binary payload bytes (text round trip)', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchInbox(
            s,
            'read',
            (read) =>
              async (...a) =>
                (await read(...a)).map((e) => ({
                  ...e,
                  message: { ...e.message, payload: new TextEncoder().encode(new TextDecoder().decode(e.message.payload)) },
                })),
          ),
        ),
      ),
      'inbox: binary payloads, properties and delivery fields round-trip exactly',
    );
  });

  it('a session delete that keeps the inbox', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => {
          const { inbox } = s;
          const saved = new Map<string, Awaited<ReturnType<InboxStore['read']>>>();
          patchSessions(s, 'delete', (del) => async (t, c) => {
            saved.set(`${t}|${c}`, await inbox.read(t, c, 0, 1e9));
            await del(t, c);
          });
          patchInbox(s, 'count', (count) => async (t, c) => (await count(t, c)) + (saved.get(`${t}|${c}`)?.length ?? 0));
        }),
      ),
      'sessions: delete removes the session inbox and inflight state',
    );
  });

  it('a session list whose after is inclusive', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchSessions(s, 'list', (list) => async (page) => {
            const all = await list({ ...page, after: undefined, limit: 1e9 });
            const key = (r: { tenantId: string; clientId: string }): string =>
              page.tenantId === undefined ? `${r.tenantId}\u0000${r.clientId}` : r.clientId;
            return all.filter((r) => page.after === undefined || key(r) >= page.after).slice(0, page.limit);
          }),
        ),
      ),
      'list of one tenant pages with an exclusive after',
    );
  });

  it('a session list across tenants ordered by client id only', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchSessions(
            s,
            'list',
            (list) => async (page) =>
              page.tenantId !== undefined
                ? list(page)
                : (await list({ limit: 1e9 })).sort((a, b) => (a.clientId < b.clientId ? -1 : 1)).slice(0, page.limit),
          ),
        ),
      ),
      'list across tenants is ordered by tenant then client id',
    );
  });

  it('a retained match where # and + also match $ topics', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchRetained(s, 'match', (match) => async (t, filter, limit, now) => {
            if (filter !== '#' && !filter.startsWith('+')) return match(t, filter, limit, now);
            const plain = await match(t, filter, limit, now);
            const dollar = (await s.retained.list({ tenantId: t, limit: 1e9 })).filter((m) => m.topic.startsWith('$'));
            return [...plain, ...dollar].slice(0, limit);
          }),
        ),
      ),
      '$ topics are not matched by # or + at the first level',
    );
  });

  it('a retained match that ignores expiry', async () => {
    await expectFailures(
      storageConformance(broken((s) => patchRetained(s, 'match', (match) => (t, f, limit) => match(t, f, limit, 0)))),
      'match leaves out expired messages',
    );
  });

  it('a retained match that ignores the limit', async () => {
    await expectFailures(
      storageConformance(broken((s) => patchRetained(s, 'match', (match) => (t, f, _limit, now) => match(t, f, 1e9, now)))),
      'match returns at most limit messages',
    );
  });

  it('a retained match where a/# does not match a', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchRetained(s, 'match', (match) => async (t, f, limit, now) => {
            const parent = f.endsWith('/#') ? f.slice(0, -2) : undefined;
            return (await match(t, f, 1e9, now)).filter((m) => m.topic !== parent).slice(0, limit);
          }),
        ),
      ),
      'match with # and a/#, which also matches a itself',
    );
  });

  it('retained totals counting characters instead of UTF-8 bytes', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchRetained(s, 'totals', () => async (t) => {
            const all: StoredMessage[] = await s.retained.list({ tenantId: t, limit: 1e9 });
            return { topics: all.length, bytes: all.reduce((n, m) => n + m.topic.length + m.payload.byteLength, 0) };
          }),
        ),
      ),
      'totals count topics and topic plus payload bytes',
    );
  });

  it('a retained store that keeps the caller buffers (no copy on store)', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => {
          const kept = new Map<string, StoredMessage>();
          patchRetained(s, 'put', (put) => async (t, m) => {
            kept.set(`${t}|${m.topic}`, m);
            await put(t, m);
          });
          patchRetained(s, 'get', (get) => async (t, topic) => kept.get(`${t}|${topic}`) ?? get(t, topic));
        }),
      ),
      'retained: a stored message does not change when the caller later mutates its buffers',
    );
  });

  it('retained user properties coming back sorted', async () => {
    await expectFailures(
      storageConformance(
        broken((s) =>
          patchRetained(s, 'get', (get) => async (t, topic) => {
            const m = await get(t, topic);
            const props = m?.properties?.userProperties;
            if (m === undefined || props === undefined) return m;
            return { ...m, properties: { ...m.properties, userProperties: [...props].sort() } };
          }),
        ),
      ),
      'retained: put then get round-trips the message exactly',
    );
  });

  it('an inflight put that moves a replaced record last', async () => {
    await expectFailures(
      storageConformance(
        broken((s) => {
          const { inflight } = s;
          const put = inflight.put.bind(inflight);
          inflight.put = async (t, c, records) => {
            await inflight.remove(
              t,
              c,
              records.map((r) => r.packetId),
            );
            await put(t, c, records);
          };
        }),
      ),
      'inflight: put replaces a record by packet id and keeps its place',
    );
  });

  it('a storage that loses its data on reopen', async () => {
    await expectFailures(
      storageConformance({ create: async () => createNaiveStorage(), reopen: async () => createNaiveStorage() }),
      'durability: sessions survive',
      'durability: inbox entries',
      'durability: inflight records',
      'durability: retained messages',
    );
  });

  it('a wrong durable flag', async () => {
    await expectFailures(storageConformance({ create: async () => createNaiveStorage(), durable: true }), 'storage/lifecycle');
  });

  it('a hanging call fails its case instead of hanging the run', async () => {
    const failures = await expectFailures(
      storageConformance({
        create: async () => {
          const s = createNaiveStorage();
          s.inbox.count = () => new Promise<number>(() => undefined);
          return s;
        },
        callTimeoutMs: 20,
        caseTimeoutMs: 100,
      }),
      'inbox: an unknown inbox counts 0',
    );
    expect(failures.join('\n')).toContain('did not settle within 100 ms');
  });
});
