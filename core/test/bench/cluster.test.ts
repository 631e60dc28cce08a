import { limitOf, runClusterBench, type ClusterRun } from '../../bench/src/cluster';

/**
 * `npm run bench:cluster` run briefly (1 s measured per run, a few connections) against a real
 * nats-server and two built broker processes in cluster mode: sanity only, no timing assertions.
 * Every measurement yields figures above 0, and every process it started is gone afterwards.
 */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('bench:cluster', () => {
  it('names the saturated process, or the machine when the cores are full, or the fallback', () => {
    const idle = { nodeA: 20, nodeB: 10, nats: 1, generator: 30, generatorLoop: 25, others: 0 };
    expect(limitOf(idle, 2, 'the rate')).toBe('the rate');
    expect(limitOf({ ...idle, nodeA: 98 }, 2, 'the rate')).toBe('node A at 98 % of a core');
    expect(limitOf({ ...idle, nodeA: 95, nodeB: 70, others: 20 }, 2, 'x')).toMatch(/^node A at 95 % of a core; all 2 cores busy \(216 %/);
  });

  it('measures scale-out, QoS 1 across nodes and the hop latency, then stops what it started', async () => {
    const r = await runClusterBench({
      timing: { warmupMs: 300, measureMs: 1000, setupTimeoutMs: 10_000 },
      groupPublishers: 3,
      pairs: 3,
      inflight: 16,
      latencyRate: 1000,
      latencyPublishers: 2,
      payload: 64,
      pin: true,
    });
    const positive = (run: ClusterRun, keys: readonly string[]): void => {
      for (const k of keys) expect({ run: run.name, [k]: run.values[k]! > 0 }).toEqual({ run: run.name, [k]: true });
    };
    positive(r.scaleOut.oneNode, ['delivered', 'published']);
    positive(r.scaleOut.twoNodes, ['delivered', 'published']);
    positive(r.qos1.sameNode, ['acked', 'sent', 'roundTripMs']);
    positive(r.qos1.crossNode, ['acked', 'sent', 'roundTripMs']);
    positive(r.latency.sameNode, ['p50', 'p99', 'samples']);
    positive(r.latency.crossNode, ['p50', 'p99', 'samples']);
    expect(r.scaleOut.ratio).toBeGreaterThan(0);
    expect(r.latency.crossNode.values.p99).toBeGreaterThanOrEqual(r.latency.crossNode.values.p50!);
    // Both nodes worked in the two-node run, and only node B received across nodes.
    expect(r.scaleOut.twoNodes.cpu.nodeB).toBeGreaterThan(0);
    expect(r.qos1.crossNode.cpu.nodeB).toBeGreaterThan(0);
    for (const pid of [r.pids.nats, r.pids.nodeA, r.pids.nodeB]) expect({ pid, alive: alive(pid) }).toEqual({ pid, alive: false });
  }, 60_000);
});
