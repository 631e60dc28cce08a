import assert from 'node:assert/strict';
import { isStorageFenced, STORAGE_FENCED, type SessionRecord, type Storage } from '../storage';
import { numberedInboxMessages, sampleSession } from './storage-fixtures';

/** Registers one fencing case: `a` and `b` are two instances open over the same data at once (two cluster nodes). */
export type AddFencingCase = (name: string, check: (a: Storage, b: Storage) => Promise<void>) => void;

const LIMIT = { maxSize: 100, dropOldest: false };

async function refused(what: string, p: Promise<unknown>): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isStorageFenced(err), `${what} must reject with code ${STORAGE_FENCED}, got ${String(err)}`);
    return true;
  });
}

function at(epoch: number, overrides: Partial<SessionRecord> = {}): SessionRecord {
  return sampleSession('t1', 'moved', false, { epoch, ...overrides });
}

/**
 * The fencing cases of the storage kit (SPI 1.7.0), for storages with `shared: true`: a session
 * record written with a newer owner epoch refuses the older owner's writes and deletes, the
 * newer owner replaces what an older one wrote, and a record the newer owner removed is not
 * brought back.
 */
export function fencingCases(add: AddFencingCase): void {
  add('fencing: a put at an older epoch than the stored record is refused and changes nothing, on either instance', async (a, b) => {
    await a.sessions.put(at(1));
    await b.sessions.get('t1', 'moved');
    await b.sessions.put(at(2, { expirySeconds: 60 }));
    await refused('a put at epoch 1 after one at epoch 2', a.sessions.put(at(1, { expirySeconds: 5 })));
    await refused('the same put on the instance that wrote epoch 2', b.sessions.put(at(1, { expirySeconds: 5 })));
    assert.deepEqual(await a.sessions.get('t1', 'moved'), at(2, { expirySeconds: 60 }));
  });

  add('fencing: the older owner cannot delete the session, its inbox or its inflight state once a newer epoch wrote', async (a, b) => {
    await a.sessions.put(at(3));
    await a.inbox.append('t1', 'moved', numberedInboxMessages(1, 2), LIMIT);
    await b.sessions.get('t1', 'moved');
    await b.sessions.put(at(4));
    await b.inflight.put('t1', 'moved', [{ packetId: 9, phase: 'pubrel' }]);
    await refused('a delete at epoch 3 after a put at epoch 4', a.sessions.delete('t1', 'moved', 3));
    assert.deepEqual(await b.sessions.get('t1', 'moved'), at(4));
    assert.equal(await b.inbox.count('t1', 'moved'), 2);
    assert.deepEqual(await b.inflight.list('t1', 'moved'), [{ packetId: 9, phase: 'pubrel' }]);
  });

  add('fencing: a newer epoch replaces a record the older owner wrote after the newer one read it', async (a, b) => {
    await a.sessions.put(at(5));
    await b.sessions.get('t1', 'moved');
    await a.sessions.put(at(5, { expirySeconds: 7 }));
    await b.sessions.put(at(6, { expirySeconds: 8 }));
    assert.deepEqual(await a.sessions.get('t1', 'moved'), at(6, { expirySeconds: 8 }));
    await b.sessions.delete('t1', 'moved', 6);
    assert.equal(await a.sessions.get('t1', 'moved'), undefined);
  });

  add('fencing: a record the newer owner removed is not brought back by the older owner', async (a, b) => {
    await a.sessions.put(at(7));
    await b.sessions.get('t1', 'moved');
    await b.sessions.delete('t1', 'moved', 8);
    await refused('a put at epoch 7 after the record was removed at epoch 8', a.sessions.put(at(7, { expirySeconds: 9 })));
    assert.equal(await b.sessions.get('t1', 'moved'), undefined);
    // A new session of the client id, at a later epoch, is written as usual.
    await a.sessions.put(at(9));
    assert.deepEqual(await b.sessions.get('t1', 'moved'), at(9));
  });
}
