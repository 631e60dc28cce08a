/* global process, console */
// `npm run bench:history`: what one sample of the dashboard's history costs the broker's event
// loop, by number of tenants (docs/dashboard.md § Cost). A sample runs every 2 s.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { TenantUsage, COUNTER } = require('../dist/tenancy/tenant-usage.js');
const { TrafficHistory, MAX_WATCHED_TENANTS } = require('../dist/api/traffic-history.js');

const ROUNDS = 200;
for (const tenants of [1_000, 10_000, 100_000]) {
  const usage = new TenantUsage();
  for (let i = 0; i < tenants; i++) {
    usage.bump(`t${i}`, COUNTER.messagesIn, i);
    usage.add(`t${i}`, 'TotalConnections', 1);
  }
  let now = Date.now();
  const history = new TrafficHistory(usage, () => now);
  for (let i = 0; i < MAX_WATCHED_TENANTS; i++) history.tenantAfter(`t${i}`, 0);
  for (let i = 0; i < 20; i++) history.sample((now += 2000));
  const start = process.hrtime.bigint();
  for (let i = 0; i < ROUNDS; i++) history.sample((now += 2000));
  const us = Number(process.hrtime.bigint() - start) / ROUNDS / 1000;
  console.log(
    `${tenants} tenants, ${MAX_WATCHED_TENANTS} watched: ${us.toFixed(0)} µs per sample (${((us / 2_000_000) * 100).toFixed(3)} % of a core)`,
  );
}
