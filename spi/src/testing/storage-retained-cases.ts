import assert from 'node:assert/strict';
import type { Storage, StoredMessage } from '../storage';
import { assertSameData, isBytes } from './contract-checks';
import { FIXTURE_TIME, plainMessage, richMessage, utf8, type AddStorageCase } from './storage-fixtures';

const NOW = FIXTURE_TIME + 60_000;

const topicsOf = (messages: readonly StoredMessage[]): string[] => messages.map((m) => m.topic);
const sortedTopics = (messages: readonly StoredMessage[]): string[] => topicsOf(messages).sort();

async function putAll(s: Storage, tenantId: string, topics: readonly string[]): Promise<void> {
  for (const t of topics) await s.retained.put(tenantId, plainMessage(t, { retain: true }));
}

async function expectMatch(s: Storage, filter: string, expected: readonly string[], tenantId = 't1'): Promise<void> {
  const got = await s.retained.match(tenantId, filter, 10_000, NOW);
  assertSameData(sortedTopics(got), [...expected].sort(), `match(${JSON.stringify(filter)})`);
  assert.equal(new Set(topicsOf(got)).size, got.length, `match(${JSON.stringify(filter)}) must not return a topic twice`);
}

const WILDCARD_TOPICS = ['a', 'a/b', 'a/c', 'a/', 'a/b/c', 'a/b/c/d', 'ab', 'ab/b', 'b/a', 'x/b', '/finance', '/', 'sport/tennis/player1'];

/** The retained store cases of the storage kit. */
export function retainedCases(add: AddStorageCase): void {
  add('retained: get of an unknown topic resolves undefined and delete resolves false', async (s) => {
    assert.equal(await s.retained.get('t1', 'a/b'), undefined);
    assert.equal(await s.retained.delete('t1', 'a/b'), false);
    await putAll(s, 't1', ['a']);
    assert.equal(await s.retained.get('t1', 'a/b'), undefined, 'a parent topic is not the topic');
    assert.equal(await s.retained.delete('t1', 'a/b'), false);
  });

  add('retained: put then get round-trips the message exactly', async (s) => {
    const rich = richMessage('r/1');
    const plain = plainMessage('r/2', { qos: 0, retain: true });
    await s.retained.put('t1', rich);
    await s.retained.put('t1', plain);
    assertSameData(await s.retained.get('t1', 'r/1'), rich, 'message with every field');
    assertSameData(await s.retained.get('t1', 'r/2'), plain, 'plain message');
    const got = await s.retained.get('t1', 'r/1');
    assert.ok(isBytes(got?.payload), 'payload must come back as a Uint8Array');
    assertSameData(
      got.properties?.userProperties?.map((p) => [...p]),
      rich.properties?.userProperties?.map((p) => [...p]),
      'user properties keep their order',
    );
  });

  add('retained: put replaces the message of its topic', async (s) => {
    await s.retained.put('t1', richMessage('r/1'));
    const replacement = plainMessage('r/1', { payload: utf8('second'), qos: 0 });
    await s.retained.put('t1', replacement);
    assertSameData(await s.retained.get('t1', 'r/1'), replacement, 'the replacement wins');
    assert.equal((await s.retained.match('t1', 'r/#', 100, NOW)).length, 1, 'a replace must not add a message');
    assert.equal((await s.retained.totals('t1')).topics, 1);
  });

  add('retained: delete removes the message and resolves true once', async (s) => {
    await putAll(s, 't1', ['a/b', 'a/b/c', 'a']);
    assert.equal(await s.retained.delete('t1', 'a/b'), true);
    assert.equal(await s.retained.get('t1', 'a/b'), undefined);
    assert.equal(await s.retained.delete('t1', 'a/b'), false, 'a second delete finds nothing');
    await expectMatch(s, 'a/#', ['a', 'a/b/c']);
    await expectMatch(s, 'a/b', []);
    assert.equal(await s.retained.delete('t1', 'a'), true);
    assert.equal(await s.retained.delete('t1', 'a/b/c'), true);
    await expectMatch(s, '#', []);
  });

  add('retained: match with an exact topic filter', async (s) => {
    await putAll(s, 't1', WILDCARD_TOPICS);
    await expectMatch(s, 'a/b', ['a/b']);
    await expectMatch(s, 'a', ['a']);
    await expectMatch(s, 'a/', ['a/']);
    await expectMatch(s, '/finance', ['/finance']);
    await expectMatch(s, 'a/x', []);
    await expectMatch(s, 'sport/tennis/player1', ['sport/tennis/player1']);
    await expectMatch(s, 'sport/tennis', []);
  });

  add('retained: match with + at the first, middle and last level', async (s) => {
    await putAll(s, 't1', WILDCARD_TOPICS);
    await expectMatch(s, 'a/+', ['a/b', 'a/c', 'a/']);
    await expectMatch(s, '+/b', ['a/b', 'ab/b', 'x/b']);
    await expectMatch(s, 'a/+/c', ['a/b/c']);
    await expectMatch(s, '+', ['a', 'ab']);
    await expectMatch(s, '+/+/+', ['a/b/c', 'sport/tennis/player1']);
    await expectMatch(s, 'sport/+/player1', ['sport/tennis/player1']);
    await expectMatch(s, 'sport/+', []);
  });

  add('retained: match with # and a/#, which also matches a itself', async (s) => {
    await putAll(s, 't1', WILDCARD_TOPICS);
    await expectMatch(s, '#', WILDCARD_TOPICS);
    await expectMatch(s, 'a/#', ['a', 'a/b', 'a/c', 'a/', 'a/b/c', 'a/b/c/d']);
    await expectMatch(s, 'a/b/#', ['a/b', 'a/b/c', 'a/b/c/d']);
    await expectMatch(s, 'sport/#', ['sport/tennis/player1']);
    await expectMatch(s, 'a/+/#', ['a/b', 'a/c', 'a/', 'a/b/c', 'a/b/c/d']);
    await expectMatch(s, 'nothing/#', []);
  });

  add('retained: match with +/+ and topics with empty levels', async (s) => {
    await putAll(s, 't1', WILDCARD_TOPICS);
    await expectMatch(s, '+/+', ['a/b', 'a/c', 'a/', 'ab/b', 'b/a', 'x/b', '/finance', '/']);
    await expectMatch(s, '/+', ['/finance', '/']);
    await expectMatch(s, '/#', ['/finance', '/']);
    await expectMatch(s, '+/', ['a/', '/']);
  });

  add('retained: $ topics are not matched by # or + at the first level, but by $SYS/#', async (s) => {
    await putAll(s, 't1', ['$SYS', '$SYS/broker/load', '$SYS/broker/clients', '$internal/x', 'a/$x', 'plain']);
    await expectMatch(s, '#', ['a/$x', 'plain']);
    await expectMatch(s, '+', ['plain']);
    await expectMatch(s, '+/broker/load', []);
    await expectMatch(s, '+/+/+', []);
    await expectMatch(s, '+/#', ['a/$x', 'plain']);
    await expectMatch(s, '$SYS/#', ['$SYS', '$SYS/broker/load', '$SYS/broker/clients']);
    await expectMatch(s, '$SYS/broker/+', ['$SYS/broker/load', '$SYS/broker/clients']);
    await expectMatch(s, '$SYS/broker/load', ['$SYS/broker/load']);
    await expectMatch(s, '$internal/+', ['$internal/x']);
    await expectMatch(s, 'a/+', ['a/$x']);
    await expectMatch(s, 'a/#', ['a/$x']);
  });

  add('retained: match leaves out expired messages, which do not use up the limit', async (s) => {
    await s.retained.put('t1', plainMessage('e/expired', { expiresAt: NOW - 1 }));
    await s.retained.put('t1', plainMessage('e/expired-long-ago', { expiresAt: FIXTURE_TIME }));
    await s.retained.put('t1', plainMessage('e/later', { expiresAt: NOW + 1000 }));
    await s.retained.put('t1', plainMessage('e/never'));
    await expectMatch(s, 'e/#', ['e/later', 'e/never']);
    await expectMatch(s, 'e/expired', []);
    assertSameData(
      sortedTopics(await s.retained.match('t1', 'e/+', 2, NOW)),
      ['e/later', 'e/never'],
      'expired messages must not count against the limit',
    );
    assertSameData(
      sortedTopics(await s.retained.match('t1', 'e/+', 10, FIXTURE_TIME - 1)),
      ['e/expired', 'e/expired-long-ago', 'e/later', 'e/never'],
      'expiry is judged by `now`',
    );
  });

  add('retained: match returns at most limit messages, all of them matching', async (s) => {
    const topics = Array.from({ length: 10 }, (_, i) => `l/${i}`);
    await putAll(s, 't1', [...topics, 'other/1', 'l']);
    for (const [filter, expected] of [
      ['l/+', topics],
      ['#', [...topics, 'l', 'other/1']],
      ['l/#', [...topics, 'l']],
    ] as const) {
      const got = await s.retained.match('t1', filter, 3, NOW);
      assert.equal(got.length, 3, `match(${filter}, limit 3) returns 3`);
      assert.equal(new Set(topicsOf(got)).size, 3, 'distinct topics');
      for (const t of topicsOf(got))
        assert.ok((expected as readonly string[]).includes(t), `match(${filter}) returned a non-matching topic ${t}`);
    }
    assertSameData(await s.retained.match('t1', 'l/+', 0, NOW), [], 'limit 0');
    assertSameData(await s.retained.match('t1', 'l/1', 0, NOW), [], 'limit 0 with an exact filter');
  });

  add('retained: match on a large tenant returns exactly the matching topics', async (s) => {
    const expectedTemp: string[] = [];
    for (let d = 0; d < 300; d++) {
      for (const metric of ['temp', 'hum', 'status/online']) {
        const topic = `dev/${d}/${metric}`;
        await s.retained.put('t1', plainMessage(topic));
        if (metric === 'temp') expectedTemp.push(topic);
      }
    }
    await expectMatch(s, 'dev/+/temp', expectedTemp);
    await expectMatch(s, 'dev/17/#', ['dev/17/temp', 'dev/17/hum', 'dev/17/status/online']);
    await expectMatch(
      s,
      'dev/+/status/+',
      Array.from({ length: 300 }, (_, d) => `dev/${d}/status/online`),
    );
    assert.equal((await s.retained.match('t1', '#', 100_000, NOW)).length, 900);
  });

  add('retained: match returns whole messages (binary payload and properties intact)', async (s) => {
    const rich = richMessage('m/rich');
    await s.retained.put('t1', rich);
    for (const filter of ['m/rich', 'm/+', '#']) {
      const got = await s.retained.match('t1', filter, 10, FIXTURE_TIME);
      assertSameData(got, [rich], `match(${filter})`);
    }
  });

  add('retained: tenants are separate', async (s) => {
    await s.retained.put('t1', plainMessage('same/topic', { payload: utf8('one') }));
    await s.retained.put('t2', plainMessage('same/topic', { payload: utf8('two!') }));
    await s.retained.put('t2', plainMessage('only/t2'));
    assertSameData(Array.from((await s.retained.get('t1', 'same/topic'))?.payload ?? []), Array.from(utf8('one')));
    assertSameData(Array.from((await s.retained.get('t2', 'same/topic'))?.payload ?? []), Array.from(utf8('two!')));
    assert.equal(await s.retained.get('t1', 'only/t2'), undefined);
    await expectMatch(s, '#', ['same/topic'], 't1');
    await expectMatch(s, '#', ['same/topic', 'only/t2'], 't2');
    await expectMatch(s, '#', [], 't3');
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 1, bytes: 10 + 3 });
    assertSameData(topicsOf(await s.retained.list({ tenantId: 't1', limit: 10 })), ['same/topic']);
    assert.equal(await s.retained.delete('t1', 'only/t2'), false);
    assert.equal(await s.retained.delete('t1', 'same/topic'), true);
    assert.ok(await s.retained.get('t2', 'same/topic'), 'a delete in another tenant must not touch this one');
  });

  add('retained: totals count topics and topic plus payload bytes (UTF-8)', async (s) => {
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 0, bytes: 0 }, 'empty tenant');
    await s.retained.put('t1', plainMessage('a/b', { payload: utf8('xyz') }));
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 1, bytes: 3 + 3 });
    await s.retained.put('t1', plainMessage('ü/€', { payload: new Uint8Array(4) }));
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 2, bytes: 6 + 6 + 4 }, 'topic bytes are UTF-8 bytes, not characters');
    await s.retained.put('t1', plainMessage('a/b', { payload: new Uint8Array(10) }));
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 2, bytes: 3 + 10 + 10 }, 'a replace counts the new payload only');
    await s.retained.put('t1', richMessage('r'));
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 3, bytes: 13 + 10 + 1 + 512 }, 'properties do not count');
    await s.retained.delete('t1', 'a/b');
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 2, bytes: 10 + 1 + 512 });
    await s.retained.delete('t1', 'ü/€');
    await s.retained.delete('t1', 'r');
    assertSameData({ ...(await s.retained.totals('t1')) }, { topics: 0, bytes: 0 });
  });

  add('retained: list pages by topic with an exclusive after and a limit', async (s) => {
    const topics = ['a', 'a/b', 'a/b/c', 'b', 'B', '$SYS/x', 'z/1', 'z/10', 'z/2'];
    await putAll(s, 't1', [...topics].reverse());
    await putAll(s, 't2', ['a/a', 'zz']);
    const ordered = [...topics].sort();
    assertSameData(
      topicsOf(await s.retained.list({ tenantId: 't1', limit: 100 })),
      ordered,
      'every topic of the tenant, ordered, $ topics included',
    );
    assertSameData(topicsOf(await s.retained.list({ tenantId: 't1', limit: 2 })), ordered.slice(0, 2), 'limit');
    assertSameData(
      topicsOf(await s.retained.list({ tenantId: 't1', after: 'a/b', limit: 3 })),
      ['a/b/c', 'b', 'z/1'],
      '`after` is exclusive',
    );
    assertSameData(topicsOf(await s.retained.list({ tenantId: 't1', after: 'a/a', limit: 1 })), ['a/b'], '`after` need not exist');
    assertSameData(await s.retained.list({ tenantId: 't1', after: 'z/2', limit: 3 }), []);
    const paged: string[] = [];
    let after: string | undefined;
    for (let guard = 0; guard < 100; guard++) {
      const page = await s.retained.list({ tenantId: 't1', after, limit: 2 });
      if (page.length === 0) break;
      paged.push(...topicsOf(page));
      after = page[page.length - 1].topic;
    }
    assertSameData(paged, ordered, 'pages of 2 cover every topic once, in order');
    assertSameData(
      (await s.retained.list({ tenantId: 't2', limit: 1 }))[0],
      plainMessage('a/a', { retain: true }),
      'listed messages are whole messages',
    );
  });

  add('retained: a stored message does not change when the caller later mutates its buffers', async (s) => {
    const message = richMessage('r/1');
    await s.retained.put('t1', message);
    message.payload.fill(0x55);
    message.properties?.correlationData?.fill(0x55);
    assertSameData(await s.retained.get('t1', 'r/1'), richMessage('r/1'), 'the stored message must keep the bytes it was given');
  });
}
