import { sessionListKey, type InboxEntry, type InflightRecord, type SessionRecord, type Storage, type StoredMessage } from '@bifro/spi';

/** MQTT topic matching written independently of the memory plugin's trie. */
export function topicMatches(filter: string, topic: string): boolean {
  const f = filter.split('/');
  const t = topic.split('/');
  if (topic.startsWith('$') && (f[0] === '+' || f[0] === '#')) return false;
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true;
    if (i >= t.length) return false;
    if (f[i] !== '+' && f[i] !== t[i]) return false;
  }
  return f.length === t.length;
}

const key = (tenantId: string, clientId: string): string => JSON.stringify([tenantId, clientId]);
const byKey = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The simplest correct storage: arrays and full scans, `structuredClone` on the way in. A
 * second, independent implementation the storage kit must pass, and the base of the broken
 * variants the kit must catch (tests patch single methods of the returned object).
 */
export function createNaiveStorage(): Storage {
  let sessions: SessionRecord[] = [];
  const inboxes = new Map<string, { entries: InboxEntry[]; next: number }>();
  const inflight = new Map<string, { out: InflightRecord[]; incoming: number[] }>();
  const retained = new Map<string, Map<string, StoredMessage>>();
  const inbox = (t: string, c: string): { entries: InboxEntry[]; next: number } => {
    const k = key(t, c);
    let q = inboxes.get(k);
    if (!q) inboxes.set(k, (q = { entries: [], next: 1 }));
    return q;
  };
  const flight = (t: string, c: string): { out: InflightRecord[]; incoming: number[] } => {
    const k = key(t, c);
    let f = inflight.get(k);
    if (!f) inflight.set(k, (f = { out: [], incoming: [] }));
    return f;
  };
  const tenantRetained = (t: string): Map<string, StoredMessage> => {
    let m = retained.get(t);
    if (!m) retained.set(t, (m = new Map()));
    return m;
  };
  return {
    durable: false,
    sessions: {
      async get(t, c) {
        return sessions.find((s) => s.tenantId === t && s.clientId === c);
      },
      async put(record) {
        sessions = sessions.filter((s) => !(s.tenantId === record.tenantId && s.clientId === record.clientId));
        sessions.push(structuredClone(record));
      },
      async delete(t, c) {
        sessions = sessions.filter((s) => !(s.tenantId === t && s.clientId === c));
        inboxes.delete(key(t, c));
        inflight.delete(key(t, c));
      },
      async list(page) {
        const tenantId = page.tenantId;
        const sortKey = (s: SessionRecord): string => (tenantId === undefined ? sessionListKey(s.tenantId, s.clientId) : s.clientId);
        return sessions
          .filter((s) => tenantId === undefined || s.tenantId === tenantId)
          .filter((s) => page.after === undefined || sortKey(s) > page.after)
          .sort((a, b) => byKey(sortKey(a), sortKey(b)))
          .slice(0, page.limit);
      },
    },
    inbox: {
      async append(t, c, messages, limit) {
        const q = inbox(t, c);
        let appended = 0;
        let dropped = 0;
        for (const m of messages) {
          if (limit.dropOldest) {
            q.entries.push({ ...structuredClone(m), seq: q.next++ });
            appended++;
            while (q.entries.length > limit.maxSize) {
              q.entries.shift();
              dropped++;
            }
          } else if (q.entries.length < limit.maxSize) {
            q.entries.push({ ...structuredClone(m), seq: q.next++ });
            appended++;
          } else {
            dropped++;
          }
        }
        return { appended, dropped };
      },
      async read(t, c, afterSeq, max) {
        return (inboxes.get(key(t, c))?.entries ?? []).filter((e) => e.seq > afterSeq).slice(0, Math.max(0, max));
      },
      async commit(t, c, uptoSeq) {
        const q = inboxes.get(key(t, c));
        if (q) q.entries = q.entries.filter((e) => e.seq > uptoSeq);
      },
      async count(t, c) {
        return inboxes.get(key(t, c))?.entries.length ?? 0;
      },
    },
    inflight: {
      async put(t, c, records) {
        const f = flight(t, c);
        for (const r of records) {
          const i = f.out.findIndex((x) => x.packetId === r.packetId);
          if (i >= 0) f.out[i] = structuredClone(r);
          else f.out.push(structuredClone(r));
        }
      },
      async remove(t, c, ids) {
        const f = flight(t, c);
        f.out = f.out.filter((r) => !ids.includes(r.packetId));
      },
      async list(t, c) {
        return [...(inflight.get(key(t, c))?.out ?? [])];
      },
      async addIncoming(t, c, id) {
        const f = flight(t, c);
        if (!f.incoming.includes(id)) f.incoming.push(id);
      },
      async removeIncoming(t, c, id) {
        const f = flight(t, c);
        f.incoming = f.incoming.filter((x) => x !== id);
      },
      async listIncoming(t, c) {
        return [...(inflight.get(key(t, c))?.incoming ?? [])];
      },
    },
    retained: {
      async put(t, message) {
        tenantRetained(t).set(message.topic, structuredClone(message));
      },
      async delete(t, topic) {
        return tenantRetained(t).delete(topic);
      },
      async get(t, topic) {
        return retained.get(t)?.get(topic);
      },
      async match(t, filter, limit, now) {
        return [...tenantRetained(t).values()]
          .filter((m) => topicMatches(filter, m.topic) && (m.expiresAt === undefined || m.expiresAt >= now))
          .slice(0, Math.max(0, limit));
      },
      async totals(t) {
        const all = [...tenantRetained(t).values()];
        return { topics: all.length, bytes: all.reduce((n, m) => n + Buffer.byteLength(m.topic) + m.payload.byteLength, 0) };
      },
      async list(page) {
        return [...tenantRetained(page.tenantId).values()]
          .filter((m) => page.after === undefined || m.topic > page.after)
          .sort((a, b) => byKey(a.topic, b.topic))
          .slice(0, page.limit);
      },
    },
  };
}
