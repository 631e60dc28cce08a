import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { tokenHash } from '../../core/src/api/api-auth';
import { API_TOKENS } from './api-broker';
import { startBrokerProcess, type BrokerProcess } from './broker-process';
import { sleep } from './mqtt-helpers';
import type { NatsCluster } from './nats-server';

/** A broker process in cluster mode, with its admin API (admin token {@link API_TOKENS.admin}). */
export interface ClusterNode {
  readonly nodeId: string;
  readonly proc: BrokerProcess;
  readonly apiUrl: string;
}

/**
 * Starts `bifro start` as node `nodeId` of the cluster on `nats` (replicas 1 unless `extraYaml`
 * says otherwise in its own `cluster` lines), data under `root/<nodeId>`. `extraYaml` is appended
 * at the top level (storage, plugins…); `clusterYaml` inside the `cluster:` section.
 */
export async function startClusterNode(
  root: string,
  nats: NatsCluster,
  nodeId: string,
  opts: { extraYaml?: string; clusterYaml?: string; port?: number } = {},
): Promise<ClusterNode> {
  const dir = path.join(root, nodeId);
  const file = `${dir}.yml`;
  writeFileSync(
    file,
    [
      `dataDir: ${JSON.stringify(dir)}`,
      'sysInterval: 0',
      'api:',
      '  host: 127.0.0.1',
      '  port: 0',
      `  tokens: [{ name: admin, hash: "${tokenHash(API_TOKENS.admin)}" }]`,
      'cluster:',
      `  servers: [${nats.urls.map((s) => JSON.stringify(s)).join(', ')}]`,
      `  nodeId: ${nodeId}`,
      opts.clusterYaml ?? '  replicas: 1',
      opts.extraYaml ?? '',
      '',
    ].join('\n'),
  );
  const proc = await startBrokerProcess(file, opts.port === undefined ? [] : ['--port', String(opts.port)]);
  const line = proc
    .output()
    .split('\n')
    .find((l) => l.includes('"admin API listening'));
  const apiUrl = line === undefined ? undefined : (JSON.parse(line) as { api?: string }).api;
  if (apiUrl === undefined) throw new Error(`no admin API address in the output:\n${proc.output()}`);
  return { nodeId, proc, apiUrl };
}

/** One metric of a node, read from its /metrics. */
export async function nodeMetric(node: ClusterNode, name: string): Promise<number> {
  const res = await fetch(`${node.apiUrl}/metrics`, { headers: { authorization: `Bearer ${API_TOKENS.admin}` } });
  const m = new RegExp(`^bifro_${name} (\\S+)$`, 'm').exec(await res.text());
  if (m === null) throw new Error(`no metric bifro_${name}`);
  return Number(m[1]);
}

/** The node ids a node lists in GET /api/v1/nodes. */
export async function nodeIds(node: ClusterNode): Promise<string[]> {
  const res = await fetch(`${node.apiUrl}/api/v1/nodes`, { headers: { authorization: `Bearer ${API_TOKENS.admin}` } });
  return ((await res.json()) as { nodes: { id: string }[] }).nodes.map((n) => n.id);
}

/** Waits until every node lists exactly `count` nodes. */
export async function waitForNodes(nodes: readonly ClusterNode[], count: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = await Promise.all(nodes.map((n) => nodeIds(n)));
    if (seen.every((ids) => ids.length === count)) return;
    if (Date.now() > deadline) throw new Error(`the nodes list ${seen.map((ids) => ids.join(',')).join(' / ')}, not ${count} each`);
    await sleep(200);
  }
}

/** Polls a metric of `node` until `ok` holds (routes travel through a KV bucket's watch). */
export async function waitForMetric(node: ClusterNode, name: string, ok: (v: number) => boolean, timeoutMs = 8000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await nodeMetric(node, name);
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`bifro_${name} is ${v} after ${timeoutMs} ms`);
    await sleep(100);
  }
}
