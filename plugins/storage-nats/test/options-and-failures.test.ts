import { NatsStorage, parseOptions } from '../src';
import { startNatsServer, type NatsCluster } from '../../../test/support/nats-server';
import { freePort, pauseProcess } from '../../../test/support/server-processes';
import { storageOn } from './nats-fixtures';

describe('NATS storage options', () => {
  const servers = ['nats://127.0.0.1:4222'];
  it.each([
    [{}, 'servers: required'],
    [{ servers: [] }, 'servers: required'],
    [{ servers: ['http://x'] }, 'servers[0]: "http://x" is not a nats:// or tls:// URL'],
    [{ servers: ['nats://a:4222', 42] }, 'servers[1]: 42 is not a nats:// or tls:// URL'],
    [{ servers, partitions: 0 }, 'partitions: must be an integer from 1 to 1024, got 0'],
    [{ servers, partitions: 1025 }, 'partitions: must be an integer from 1 to 1024'],
    [{ servers, replicas: 6 }, 'replicas: must be an integer from 1 to 5, got 6'],
    [{ servers, timeoutMs: '5s' }, 'timeoutMs: must be an integer'],
    [{ servers, prefix: 'Bifro-1' }, 'prefix: must be 1 to 32 characters of [a-z0-9_], got "Bifro-1"'],
    [{ servers, user: 'u' }, 'password: user and password go together'],
    [{ servers, user: 'u', password: 'p', token: 't' }, 'token: give either user/password or token'],
    [{ servers, token: '' }, 'token: must be a non-empty string'],
    [{ servers, tls: { ca: '/nonexistent/ca.pem' } }, 'tls.ca: cannot read /nonexistent/ca.pem'],
    [{ servers, tls: { crt: 'x' } }, 'tls.crt: unknown'],
    [{ servers, tls: 'yes' }, 'tls: must be a map'],
    [{ servers, sever: 1 }, 'unknown option(s) sever'],
  ])('refuses %j naming the field', (options, message) => {
    expect(() => parseOptions(options)).toThrow(message);
    expect(() => parseOptions(options)).toThrow(/^BIFRO_STORAGE_NATS_OPTIONS_INVALID: @bifro\/plugin-storage-nats: /);
  });

  it('fills in the defaults', () => {
    expect(parseOptions({ servers })).toEqual({ servers, partitions: 16, replicas: 3, prefix: 'bifro', timeoutMs: 5000 });
  });
});

describe('NATS storage when NATS is away', () => {
  it('init rejects within the timeout when no server answers, naming the servers', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const storage = new NatsStorage(parseOptions({ servers: [url], timeoutMs: 500 }));
    const started = Date.now();
    await expect(storage.init()).rejects.toThrow(`BIFRO_STORAGE_NATS_UNREACHABLE: could not connect to NATS (${url})`);
    expect(Date.now() - started).toBeLessThan(10_000);
    await expect(storage.sessions.get('t', 'c')).rejects.toThrow('BIFRO_STORAGE_NATS_CLOSED');
  });

  describe('against a server that stops answering', () => {
    let nats: NatsCluster;
    beforeAll(async () => {
      nats = await startNatsServer();
    });
    afterAll(() => nats?.dispose());

    it('calls reject after timeoutMs saying what failed, work again once NATS answers, and close does not hang', async () => {
      const storage = storageOn(nats.urls, { timeoutMs: 1000 });
      try {
        await storage.init();
        await storage.inbox.append('t1', 'c1', [inboxMessage(1)], { maxSize: 10, dropOldest: false });
        const pid = nats.servers[0].pid as number;
        await pauseProcess(pid);
        try {
          const started = Date.now();
          await expect(storage.sessions.get('t1', 'c1')).rejects.toThrow(
            /^BIFRO_STORAGE_NATS_TIMEOUT: session get \(t1\/c1\): no answer from JetStream within 1000 ms/,
          );
          await expect(storage.inbox.append('t1', 'c1', [inboxMessage(2)], { maxSize: 10, dropOldest: false })).rejects.toThrow(
            /^BIFRO_STORAGE_NATS_TIMEOUT: inbox append \(t1\/c1, 1 messages\)/,
          );
          expect(Date.now() - started).toBeLessThan(15_000);
        } finally {
          process.kill(pid, 'SIGCONT');
        }
        // The append that timed out may or may not have been stored; the inbox keeps working either way.
        await storage.inbox.append('t1', 'c1', [inboxMessage(3)], { maxSize: 10, dropOldest: false });
        const topics = (await storage.inbox.read('t1', 'c1', 0, 10)).map((e) => e.message.topic);
        expect(topics[0]).toBe('q/1');
        expect(topics[topics.length - 1]).toBe('q/3');
      } finally {
        await storage.close();
      }
    });

    it('with the server gone, calls reject saying NATS is disconnected, and close returns', async () => {
      const storage = storageOn(nats.urls, { timeoutMs: 1000 });
      try {
        await storage.init();
        await nats.servers[0].stop();
        await expect(storage.retained.get('t1', 'a/b')).rejects.toThrow(
          /BIFRO_STORAGE_NATS_TIMEOUT: retained get \(t1, a\/b\).*NATS disconnected, reconnecting to nats:\/\/127\.0\.0\.1:/,
        );
      } finally {
        await storage.close();
      }
    });
  });
});

function inboxMessage(i: number) {
  return {
    message: { topic: `q/${i}`, payload: Buffer.from([i]), qos: 1 as const, retain: false, publishedAt: 1 },
    qos: 1 as const,
    retain: false,
  };
}
