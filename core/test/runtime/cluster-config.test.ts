import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/runtime/config';
import { isNatsServerUrl } from '../../src/runtime/config-cluster';
import type { ConfigIssue } from '../../src/runtime/config-errors';

/** The `cluster` section: defaults, and every refusal naming its key (docs/cluster.md). */

let tmp: string;
beforeEach(() => (tmp = mkdtempSync(path.join(os.tmpdir(), 'bifro-cluster-config-'))));
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

function load(yaml: string, workers?: number): ReturnType<typeof loadConfig> {
  const file = path.join(tmp, 'bifro.yml');
  writeFileSync(file, yaml);
  return loadConfig({ file, cwd: tmp, env: {}, ...(workers !== undefined ? { overrides: { workers } } : {}) });
}

async function issues(yaml: string, workers?: number): Promise<ConfigIssue[]> {
  try {
    await load(yaml, workers);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return [...(err as ConfigError).issues];
  }
  throw new Error('the configuration loaded where it should have failed');
}

describe('cluster configuration', () => {
  it('is absent without a cluster section (standalone)', async () => {
    expect((await load('nodeId: a\n')).cluster).toBeUndefined();
  });

  it('fills the defaults: replicas 3, partitions 16, no node id of its own', async () => {
    expect((await load('cluster:\n  servers: [nats://127.0.0.1:4222]\n')).cluster).toEqual({
      servers: ['nats://127.0.0.1:4222'],
      partitions: 16,
      replicas: 3,
    });
  });

  it('keeps every key given, with TLS paths relative to the config file', async () => {
    const ca = path.join(tmp, 'ca.pem');
    writeFileSync(ca, 'not checked here beyond being readable');
    const cluster = (
      await load(
        'cluster:\n  servers: [nats://a:4222, "tls://b:4443", "c:4222"]\n  nodeId: n-1\n  partitions: 32\n  replicas: 1\n  user: bifro\n  password: s3cret\n  tls: { ca: ca.pem }\n',
      )
    ).cluster;
    expect(cluster).toEqual({
      servers: ['nats://a:4222', 'tls://b:4443', 'c:4222'],
      nodeId: 'n-1',
      partitions: 32,
      replicas: 1,
      user: 'bifro',
      password: 's3cret',
      tls: { ca },
    });
  });

  it('names a server that is not a NATS URL, and schema errors by their key', async () => {
    expect(await issues('cluster:\n  servers: [nats://ok:4222, "http://x:80", "nats://"]\n')).toEqual([
      expect.objectContaining({ code: 'BIFRO_CONFIG_CLUSTER_SERVER', path: 'cluster.servers[1]' }),
      expect.objectContaining({ code: 'BIFRO_CONFIG_CLUSTER_SERVER', path: 'cluster.servers[2]' }),
    ]);
    expect(await issues('cluster:\n  servers: []\n')).toEqual([
      expect.objectContaining({ code: 'BIFRO_CONFIG_INVALID_VALUE', path: 'cluster.servers' }),
    ]);
    expect(await issues('cluster:\n  replicas: 1\n')).toEqual([
      expect.objectContaining({ code: 'BIFRO_CONFIG_MISSING_KEY', path: 'cluster.servers' }),
    ]);
    const bad = await issues('cluster:\n  servers: [nats://a:4222]\n  replicas: 7\n  nodeId: "a.b"\n  partition: 3\n');
    expect(bad.map((i) => `${i.code} ${i.path}`).sort()).toEqual([
      'BIFRO_CONFIG_INVALID_VALUE cluster.nodeId',
      'BIFRO_CONFIG_INVALID_VALUE cluster.replicas',
      'BIFRO_CONFIG_UNKNOWN_KEY cluster.partition',
    ]);
    expect(bad.find((i) => i.path === 'cluster.replicas')?.message).toMatch(/bifro\.yml:3:\d+: cluster\.replicas: expected integer 1\.\.5/);
  });

  it('refuses half credentials and a token with a user', async () => {
    expect(await issues('cluster:\n  servers: [nats://a:4222]\n  user: bifro\n')).toEqual([
      expect.objectContaining({ code: 'BIFRO_CONFIG_CLUSTER_AUTH', path: 'cluster.password' }),
    ]);
    expect(await issues('cluster:\n  servers: [nats://a:4222]\n  token: t\n  user: u\n  password: p\n')).toEqual([
      expect.objectContaining({ code: 'BIFRO_CONFIG_CLUSTER_AUTH', path: 'cluster.token' }),
    ]);
  });

  it('names an unreadable cluster.tls file', async () => {
    expect(await issues('cluster:\n  servers: [nats://a:4222]\n  tls: { cert: missing.crt, key: missing.key }\n')).toEqual([
      expect.objectContaining({ code: 'BIFRO_CONFIG_TLS_FILE', path: 'cluster.tls.cert' }),
      expect.objectContaining({ code: 'BIFRO_CONFIG_TLS_FILE', path: 'cluster.tls.key' }),
    ]);
  });

  it('refuses cluster mode with several workers, from the file or --workers', async () => {
    const fromFile = await issues('workers: 2\ncluster:\n  servers: [nats://a:4222]\n');
    expect(fromFile).toEqual([expect.objectContaining({ code: 'BIFRO_CONFIG_WORKERS_CLUSTER', path: 'cluster' })]);
    expect(fromFile[0]!.message).toContain('workers: 2');
    const fromOption = await issues('cluster:\n  servers: [nats://a:4222]\n', 3);
    expect(fromOption[0]!.message).toContain('workers: 3 (--workers)');
  });

  it('tells NATS URLs from other strings', () => {
    for (const ok of ['nats://127.0.0.1:4222', 'tls://n.example:4443', 'ws://h:8080', 'wss://h', '127.0.0.1:4222', 'nats://u:p@h:4222'])
      expect([ok, isNatsServerUrl(ok)]).toEqual([ok, true]);
    for (const bad of ['http://h:4222', 'nats://', 'nats://h:4222/path', 'nats://h:99999', ' '])
      expect([bad, isNatsServerUrl(bad)]).toEqual([bad, false]);
  });
});
