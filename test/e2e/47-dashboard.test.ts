import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { MqttClient } from 'mqtt';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { API_TOKENS, apiYaml, startApiBroker, type ApiBroker } from '../support/api-broker';
import { startBrokerProcess } from '../support/broker-process';
import { REPO } from '../support/test-broker';
import { connectAsync, disconnectOf, publish, sleep, uniqueName } from '../support/mqtt-helpers';

/**
 * Area 47, the web dashboard (docs/dashboard.md), in headless Chromium against a real broker:
 * an admin logs in and watches the messages/s plot move while a publisher runs; changes a
 * tenant setting (an invalid value is shown next to its field, a valid one reaches the next
 * CONNACK); finds a session and kicks it with a redirect (the MQTT client gets DISCONNECT 0x9C);
 * clears a retained message; reads the plugins page. A tenant token sees only its tenant. Phone
 * width, keyboard use and the dark theme are checked too. Every page is saved as a screenshot
 * under $BIFRO_ARTIFACTS (default: test-artifacts/screenshots/ in the repository, ignored by git:
 * CI keeps that folder as the run's artefacts).
 */

const CHROMIUM = process.env.BIFRO_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.BIFRO_ARTIFACTS ?? path.join(REPO, 'test-artifacts', 'screenshots');
/** What a browser step may take on a loaded 2-core machine. */
const UI_MS = 15_000;

const SETTINGS_FILE = `# Bifro tenant settings (e2e 47)
tenants:
  t1:
    MaxTopicLevels: 32
`;

let b: ApiBroker;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const clients: MqttClient[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  b = await startApiBroker('', {
    settings: SETTINGS_FILE,
    plugins: ['  throttler:', "    use: '@bifro/plugin-throttler-quota'", '    options: { defaults: { TotalConnections: 10 } }'].join('\n'),
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    // Chromium's own network traffic (updates, sync) has nowhere to go here and only slows it.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  console.log(`dashboard screenshots: ${SHOTS}`);
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.end(true);
  await browser?.close();
  await b?.stop();
});

beforeEach(async () => {
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(UI_MS);
  watch(page);
});

afterEach(async () => {
  await context?.close();
  // No page threw, and the browser logged no error: no refused resource, no blocked style or script.
  expect(pageErrors.splice(0)).toEqual([]);
});

/** What went wrong in the page: uncaught exceptions and the browser's error messages. */
const pageErrors: string[] = [];

/**
 * Expected: the first test makes the page evaluate a string, to see the policy refuse it, and the
 * API's 400, 401 and 403 answers the tests provoke (the page shows them).
 */
const expectedError = (text: string): boolean => text.includes("'unsafe-eval'") || /status of 40[013]\b/.test(text);

function watch(p: Page): void {
  // Kick, ban and clear ask for confirmation.
  p.on('dialog', (d) => void d.accept());
  p.on('pageerror', (err) => {
    if (!expectedError(err.message)) pageErrors.push(`uncaught: ${err.message}`);
  });
  p.on('console', (m) => {
    if (m.type() === 'error' && !expectedError(m.text())) pageErrors.push(`console: ${m.text()}`);
  });
}

async function mqtt(username: string, clientId = uniqueName('dash'), extra: Record<string, unknown> = {}) {
  const c = await connectAsync(b.port, { protocolVersion: 5, clientId, username, reconnectPeriod: 0, ...extra });
  clients.push(c.client);
  return c;
}

async function login(token: string): Promise<void> {
  await page.goto(`${b.api.url}/dashboard/`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.locator('#nav').waitFor();
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** The latest values a plot shows (its figure's data-last), once it has some. */
async function lastValues(selector: string): Promise<number[]> {
  const raw = await page.locator(selector).getAttribute('data-last');
  return raw === null ? [] : (JSON.parse(raw) as number[]);
}

/**
 * The value axis labels a plot drew (its figure's data-y-ticks) as numbers, after checking they
 * step evenly by 1, 2 or 5 times a power of ten: no 2.5 / 7.5, no 0.25 shown rounded as 0.3.
 */
async function yTicks(selector: string): Promise<number[]> {
  const raw = await page.locator(selector).getAttribute('data-y-ticks');
  const ticks = (JSON.parse(raw ?? '[]') as string[]).map((label) => Number(label.replace(/,/g, '')));
  expect(ticks.length).toBeGreaterThanOrEqual(2);
  const step = ticks[1]! - ticks[0]!;
  const mantissa = Number((step / 10 ** Math.floor(Math.log10(step))).toFixed(6));
  expect({ labels: raw, mantissa: [1, 2, 5].includes(mantissa) }).toEqual({ labels: raw, mantissa: true });
  for (let i = 1; i < ticks.length; i++)
    expect({ labels: raw, step: ticks[i]! - ticks[i - 1]! }).toEqual({ labels: raw, step: expect.closeTo(step, 9) });
  return ticks;
}

it('refuses a wrong token on the login form, then an admin sees the messages/s plot move while a publisher runs', async () => {
  // Loading the page asks for nothing that needs a token (a favicon answered 401 before, which
  // counted toward the failed-login limit of the address).
  const failed: string[] = [];
  page.on('response', (r) => {
    if (r.status() >= 400) failed.push(`${r.status()} ${r.url()}`);
  });
  await page.goto(`${b.api.url}/dashboard`);
  await page.getByLabel('API token').waitFor();
  await sleep(500);
  expect(failed).toEqual([]);
  await page.getByLabel('API token').fill('not-a-token');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('alert').filter({ hasText: 'not valid' }).waitFor();

  await page.getByLabel('API token').fill(API_TOKENS.admin);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('link', { name: 'Plugins' }).waitFor();
  // The page's Content-Security-Policy holds: script built from a string (the poll's) is refused.
  await expect(page.waitForFunction('window.bifroNever === true', undefined, { timeout: 5000 })).rejects.toThrow(/Content Security Policy/);
  const chart = '#chart-messages';
  await page.locator(`${chart}[data-points]`).waitFor();

  // A publisher at about 200 msg/s with one subscriber: in and out both rise above 0.
  const sub = await mqtt('t1/watcher');
  await new Promise<void>((resolve, reject) => sub.client.subscribe('load/#', { qos: 0 }, (err) => (err ? reject(err) : resolve())));
  const pub = await mqtt('t1/loader');
  const pointsBefore = Number(await page.locator(chart).getAttribute('data-points'));
  const timer = setInterval(() => {
    for (let i = 0; i < 20; i++) pub.client.publish('load/1', 'x', { qos: 0 });
  }, 100);
  try {
    const deadline = Date.now() + UI_MS;
    for (let v = await lastValues(chart); !(v.length === 2 && v[0]! > 50 && v[1]! > 50); v = await lastValues(chart)) {
      if (Date.now() > deadline) throw new Error(`the plot did not rise: last values ${JSON.stringify(v)}`);
      await sleep(250);
    }
  } finally {
    clearInterval(timer);
  }
  expect(Number(await page.locator(chart).getAttribute('data-points'))).toBeGreaterThan(pointsBefore);
  const [inRate] = await lastValues(chart);
  expect(inRate).toBeLessThan(1000);
  // The caption says it in words too.
  await expect(page.locator(`${chart} figcaption .now`).textContent()).resolves.toMatch(/^in [\d,.]+ · out [\d,.]+$/);
  // In and out are equal with one subscriber: "out" is dashed, in the legend too, so "in" shows under it.
  const outMarker = page.locator(`${chart} .u-legend .u-series`, { hasText: 'out' }).locator('.u-marker');
  await expect(outMarker.getAttribute('style')).resolves.toContain('dashed');
  await yTicks(chart);
  // Connections are whole: the axis steps by whole numbers (it showed 0.3, 0.5, 0.8 for 0 to 1).
  const connectionTicks = await yTicks('#chart-connections');
  for (const t of connectionTicks) expect(Number.isInteger(t)).toBe(true);
  await page.getByRole('heading', { name: 'Node' }).waitFor();
  await shot('overview');
}, 60_000);

it('an admin changes a tenant setting: an invalid value is shown at its field, a valid one reaches the next CONNACK', async () => {
  await mqtt('t1/one');
  await login(API_TOKENS.admin);
  await page.getByRole('link', { name: 'Tenants', exact: true }).click();
  const row = page.locator('tbody tr', { has: page.getByRole('link', { name: 't1', exact: true }) });
  await row.waitFor();
  // The connection quota (10) shows as a bar in the table.
  await row.locator('.bar[data-level]').waitFor();
  await shot('tenants');

  await row.getByRole('link', { name: 't1', exact: true }).click();
  await page.getByRole('heading', { name: 'Tenant t1' }).waitFor();
  const field = page.locator('#setting-MaxTopicAlias');
  await expect(field.inputValue()).resolves.toBe('64');

  await field.fill('70000');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#err-MaxTopicAlias').filter({ hasText: 'maximum 65535' }).waitFor();
  await expect(field.getAttribute('aria-invalid')).resolves.toBe('true');
  // Nothing was written: a new connection still gets the default.
  expect((await mqtt('t1/before')).connack.properties?.topicAliasMaximum).toBe(64);

  await field.fill('7');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Saved: MaxTopicAlias.').waitFor();
  await expect(page.locator('#setting-MaxTopicAlias').inputValue()).resolves.toBe('7');
  // The next CONNECT of the tenant gets it; another tenant does not.
  expect((await mqtt('t1/after')).connack.properties?.topicAliasMaximum).toBe(7);
  expect((await mqtt('t2/other')).connack.properties?.topicAliasMaximum).toBe(64);
  // The quotas table shows the connection limit with its usage.
  await page.locator('tr', { hasText: 'TotalConnections' }).locator('.bar').waitFor();
  await shot('tenant');
}, 60_000);

it('an admin finds a session by client id prefix and kicks it with a redirect: the MQTT client gets DISCONNECT 0x9C', async () => {
  const clientId = uniqueName('kick-me');
  const victim = await mqtt('t1/dora', clientId);
  await new Promise<void>((resolve, reject) => victim.client.subscribe('alerts/#', { qos: 1 }, (err) => (err ? reject(err) : resolve())));
  await mqtt('t1/dora', uniqueName('bystander'));
  await login(API_TOKENS.admin);
  await page.getByRole('link', { name: 'Sessions' }).click();
  // Opened without a tenant, the page shows the busiest one's sessions; the picker offers the others.
  const table = page.locator('#sessions-table');
  await table.waitFor();
  await expect(page.getByLabel('Tenant').inputValue()).resolves.toBe('t1');
  await expect(page.locator('#tenant-picker option').allTextContents()).resolves.toEqual(expect.arrayContaining(['t1', 't2']));
  await page.getByLabel('Tenant').selectOption('t2');
  await table.getByText('in tenant t2').waitFor();
  await page.getByLabel('Tenant').selectOption('t1');
  await table.getByText('in tenant t1').waitFor();
  await page.getByLabel('Client id starts with').fill('kick-me');
  await page.getByRole('button', { name: 'Search' }).click();
  await table.getByRole('link', { name: clientId }).click();
  const details = page.locator('#session-details');
  await details.getByRole('heading', { name: clientId }).waitFor();
  await details.getByText('alerts/#').waitFor();
  // The prefix search lists only matching client ids.
  await expect(table.locator('tbody tr').count()).resolves.toBe(1);
  // The MQTT version is said one way: 5.0 in the table and in the details (the details said 5, and 4 for 3.1.1).
  await expect(table.locator('tbody td').nth(3).textContent()).resolves.toBe('5.0');
  await expect(
    details
      .locator('dt', { hasText: /^MQTT$/ })
      .locator('xpath=following-sibling::dd[1]')
      .textContent(),
  ).resolves.toBe('5.0');
  await shot('sessions');
  // By user: both of dora's sessions, whatever their client ids.
  await page.getByLabel('Client id starts with').fill('');
  await page.getByLabel('User').fill('dora');
  await page.getByRole('button', { name: 'Search' }).click();
  await table.getByText('user “dora”', { exact: false }).waitFor();
  await expect(table.locator('tbody tr').count()).resolves.toBe(2);
  await table.getByRole('link', { name: clientId }).click();
  await details.getByRole('heading', { name: clientId }).waitFor();

  const disconnected = disconnectOf(victim.client);
  await details.getByLabel('Redirect (MQTT 5)').selectOption('temporary');
  await details.getByLabel('Server reference').fill('mqtt2.example.com:1883');
  await details.getByRole('button', { name: 'Kick' }).click();
  await details.getByText(`Kicked ${clientId}.`).waitFor();
  const packet = await disconnected;
  expect(packet?.reasonCode).toBe(0x9c);
  expect(packet?.properties?.serverReference).toBe('mqtt2.example.com:1883');

  // Ban it: its next CONNECT is refused with 0x8A.
  await details.getByLabel('Reason').fill('dashboard test');
  await details.getByRole('button', { name: 'Ban client id' }).click();
  await details.getByText(`Banned ${clientId}`).waitFor();
  await expect(connectAsync(b.port, { protocolVersion: 5, clientId, username: 't1/dora', reconnectPeriod: 0 })).rejects.toThrow(
    /Banned|0x8a|138/i,
  );
}, 60_000);

it('an admin browses retained messages by filter and clears one', async () => {
  const pub = await mqtt('t1/keeper');
  await publish(pub.client, 'dash/room/1', 'warm', { qos: 1, retain: true });
  await publish(pub.client, 'dash/room/2', 'cold', { qos: 1, retain: true });
  await login(API_TOKENS.admin);
  // Opened without a tenant, the page browses the busiest one, picked in a list of the tenants.
  await page.getByRole('link', { name: 'Retained' }).click();
  const table = page.locator('#retained-table');
  await table.getByText('dash/room/1').waitFor();
  await expect(page.getByLabel('Tenant').inputValue()).resolves.toBe('t1');
  await page.getByLabel('Tenant').selectOption('t2');
  await table.getByText('No retained message matches #.').waitFor();
  await page.goto(`${b.api.url}/dashboard/#/retained?tenant=t1&filter=${encodeURIComponent('dash/#')}`);
  await table.getByText('dash/room/2').waitFor();
  await expect(table.locator('tbody tr').count()).resolves.toBe(2);
  await shot('retained');
  await table.getByRole('button', { name: 'Clear dash/room/1' }).click();
  await page.getByText('Cleared dash/room/1.').waitFor();
  const left = await b.http('GET', `/api/v1/tenants/t1/retained?filter=${encodeURIComponent('dash/#')}`);
  expect((left.body as { items: { topic: string }[] }).items.map((m) => m.topic)).toEqual(['dash/room/2']);
}, 60_000);

it('the plugins page lists versions, kinds, SPI ranges, health and call latency percentiles', async () => {
  await login(API_TOKENS.admin);
  await page.getByRole('link', { name: 'Plugins' }).click();
  const row = page.locator('#plugins-table tr', { hasText: '@bifro/plugin-settings-file' });
  await row.first().waitFor();
  await expect(row.first().textContent()).resolves.toMatch(/settings.*\^1\.\d+\.\d+.*ok/);
  await page
    .locator('#plugins-table td', { hasText: /^settings: \d+/ })
    .first()
    .waitFor();
  await shot('plugins');
}, 60_000);

it('a tenant token sees only its own tenant: no plugins page, one tenant row, 403 on another tenant', async () => {
  await mqtt('t2/someone');
  await login(API_TOKENS.t1);
  await expect(page.locator('#who').textContent()).resolves.toContain('tenant t1');
  await expect(page.getByRole('link', { name: 'Plugins' }).count()).resolves.toBe(0);
  await page.locator('#chart-messages[data-points]').waitFor();
  await page.getByRole('link', { name: 'Tenants', exact: true }).click();
  await page.getByRole('link', { name: 't1', exact: true }).waitFor();
  await expect(page.locator('tbody tr').count()).resolves.toBe(1);
  await expect(page.getByText('t2', { exact: true }).count()).resolves.toBe(0);
  await page.goto(`${b.api.url}/dashboard/#/tenants/t2`);
  await page.getByRole('alert').filter({ hasText: 'scoped to tenant "t1"' }).first().waitFor();
  await page.goto(`${b.api.url}/dashboard/#/plugins`);
  await page.getByText('This page needs an admin token.').waitFor();
  // The sessions page works on its own tenant without asking for one.
  await page.goto(`${b.api.url}/dashboard/#/sessions`);
  await expect(page.getByLabel('Tenant').count()).resolves.toBe(0);
  await page.locator('#sessions-table').waitFor();
  await shot('tenant-token');
}, 60_000);

it('fits a phone, works from the keyboard and follows a dark system theme', async () => {
  await context.close();
  context = await browser.newContext({ viewport: { width: 390, height: 844 }, colorScheme: 'dark', isMobile: true });
  page = await context.newPage();
  page.setDefaultTimeout(UI_MS);
  watch(page);
  await login(API_TOKENS.admin);
  await page.locator('#chart-messages[data-points]').waitFor();
  const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
  expect(overflow).toBeLessThanOrEqual(1);
  const background = await page.evaluate<string>('getComputedStyle(document.body).backgroundColor');
  expect(background).toBe('rgb(17, 20, 24)');
  await shot('overview-phone-dark');

  // Keyboard: on a freshly loaded page the first Tab reaches the skip link, which moves focus to the content.
  await page.goto(`${b.api.url}/dashboard/#/tenants`);
  await page.reload();
  await page.locator('tbody tr').first().waitFor();
  await page.keyboard.press('Tab');
  await expect(page.evaluate<string | undefined>('document.activeElement?.textContent')).resolves.toBe('Skip to content');
  await page.keyboard.press('Enter');
  await expect(page.evaluate<string | undefined>('document.activeElement?.id')).resolves.toBe('main');
  // A sortable column header is a button: Enter sorts by it.
  const header = page.locator('th', { hasText: 'Tenant' }).first();
  await header.locator('button').focus();
  await page.keyboard.press('Enter');
  await expect(header.getAttribute('aria-sort')).resolves.toBe('ascending');
  await page.keyboard.press('Enter');
  await expect(header.getAttribute('aria-sort')).resolves.toBe('descending');
}, 60_000);

describe('what the dashboard is served from', () => {
  it('serves the page without a token, with headers that keep other origins and inline scripts out', async () => {
    const redirect = await b.inject({ method: 'GET', url: '/dashboard', token: null });
    expect(redirect.statusCode).toBe(301);
    expect(redirect.headers.location).toBe('/dashboard/');
    const index = await b.inject({ method: 'GET', url: '/dashboard/', token: null });
    expect(index.statusCode).toBe(200);
    expect(index.headers['content-type']).toMatch(/^text\/html/);
    expect(index.headers['content-security-policy']).toContain("script-src 'self'");
    expect(index.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(index.headers['x-content-type-options']).toBe('nosniff');
    expect(index.body).not.toMatch(/<script>(?!<)/);
    for (const file of ['app.js', 'pages/overview.js', 'style.css', 'vendor/uPlot.esm.js', 'vendor/uPlot.min.css']) {
      const res = await b.inject({ method: 'GET', url: `/dashboard/${file}`, token: null });
      expect({ file, status: res.statusCode }).toEqual({ file, status: 200 });
    }
  });

  it('serves an icon at /favicon.ico without a token: browsers asking for it use up no failed-login allowance', async () => {
    for (let i = 0; i < 40; i++) {
      const icon = await b.http('GET', '/favicon.ico', { token: null });
      expect(icon.status).toBe(200);
      expect(icon.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    }
    // 40 is above api.authFailuresPerMinute (30): a wrong token is still answered 401, not 429.
    expect((await b.http('GET', '/api/v1/whoami', { token: 'wrong' })).status).toBe(401);
    expect((await b.inject({ method: 'GET', url: '/dashboard/favicon.svg', token: null })).statusCode).toBe(200);
  });

  it('logs served requests at debug (a dashboard polls every 2 s), refusals at info, refused tokens at warn', async () => {
    const levelOf = async (url: string, token?: string | null): Promise<unknown> => {
      const before = b.logs.length;
      await b.inject({ method: 'GET', url, token });
      const line = b.logs.slice(before).find((l) => l.msg === 'api request' && l.url === url);
      return line?.level;
    };
    expect(await levelOf('/api/v1/history?since=0')).toBe(20);
    expect(await levelOf('/api/v1/whoami')).toBe(20);
    expect(await levelOf('/api/v1/no-such-route')).toBe(30);
    expect(await levelOf('/api/v1/tenants/t2', API_TOKENS.t1)).toBe(40);
    expect(await levelOf('/api/v1/whoami', null)).toBe(40);
  });

  it('serves nothing else: not the type shims, not the chart package beyond its two files, no path out of the folder', async () => {
    for (const url of [
      '/dashboard/tsconfig.json',
      '/dashboard/vendor/uPlot.esm.d.ts',
      '/dashboard/vendor/uPlot.cjs.js',
      '/dashboard/vendor/../package.json',
      '/dashboard/%2e%2e/package.json',
      '/dashboard/../../package.json',
    ]) {
      const res = await b.inject({ method: 'GET', url, token: null });
      expect({ url, status: res.statusCode }).toEqual({ url, status: expect.any(Number) });
      expect({ url, ok: res.statusCode < 300 }).toEqual({ url, ok: false });
    }
  });

  it('whoami names the token and its scope; the broker history needs an admin token, a tenant history its tenant', async () => {
    expect((await b.inject({ method: 'GET', url: '/api/v1/whoami' })).json()).toEqual({ name: 'admin', admin: true });
    expect((await b.inject({ method: 'GET', url: '/api/v1/whoami', token: API_TOKENS.t1 })).json()).toEqual({
      name: 't1-ops',
      admin: false,
      tenant: 't1',
    });
    expect((await b.inject({ method: 'GET', url: '/api/v1/whoami', token: null })).statusCode).toBe(401);

    const broker = await b.inject({ method: 'GET', url: '/api/v1/history' });
    expect(broker.statusCode).toBe(200);
    const points = broker.json() as { sampleMs: number; t: number[]; series: Record<string, number[]> };
    expect(points.sampleMs).toBe(2000);
    expect(Object.keys(points.series).sort()).toEqual(['connections', 'dropped', 'eventLoopLagMs', 'messagesIn', 'messagesOut']);
    for (const s of Object.values(points.series)) expect(s).toHaveLength(points.t.length);
    const last = points.t[points.t.length - 1] ?? 0;
    expect((await b.inject({ method: 'GET', url: `/api/v1/history?since=${last}` })).json().t).toEqual([]);

    expect((await b.inject({ method: 'GET', url: '/api/v1/history', token: API_TOKENS.t1 })).statusCode).toBe(403);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t1/history', token: API_TOKENS.t1 })).statusCode).toBe(200);
    expect((await b.inject({ method: 'GET', url: '/api/v1/tenants/t2/history', token: API_TOKENS.t1 })).statusCode).toBe(403);
    expect((await b.inject({ method: 'GET', url: '/api/v1/history?since=-1' })).statusCode).toBe(400);
    expect((await b.inject({ method: 'GET', url: '/api/v1/history?from=1' })).statusCode).toBe(400);
  });
});

it("plots the event-loop delay without the monitor's 10 ms resolution", async () => {
  // Read as it was, every point was a window's raw p99, never below the monitor's 10 ms timer
  // (an idle broker showed 11.6 ms for a real 1.6 ms). The broker runs in this process: a monitor
  // of the test's own, over the same windows, reads the raw figures. The lowest window p99 is at
  // most the p99 of all their samples, so with the resolution taken off the lowest point is at
  // least 10 ms below it whatever the load; read raw, it would be above it minus 5.
  const own = monitorEventLoopDelay({ resolution: 10 });
  own.enable();
  const from = Date.now();
  let lag: number[] = [];
  try {
    for (const deadline = Date.now() + 20_000; lag.length < 3 && Date.now() < deadline; await sleep(500)) {
      const h = (await b.inject({ method: 'GET', url: '/api/v1/history' })).json() as { t: number[]; series: { eventLoopLagMs: number[] } };
      // Only windows wholly inside the own monitor's time (a point's t is its window's end).
      lag = h.series.eventLoopLagMs.filter((_, i) => h.t[i]! >= from + 2000 + 100);
    }
  } finally {
    own.disable();
  }
  const rawP99 = own.percentile(99) / 1e6;
  expect(lag.length).toBeGreaterThanOrEqual(3);
  expect(lag.every((v) => v >= 0)).toBe(true);
  expect({ lag, rawP99, belowRaw: Math.min(...lag) < rawP99 - 5 }).toEqual({ lag, rawP99, belowRaw: true });
}, 30_000);

it('with api.dashboard false, there is no page', async () => {
  const off = await startApiBroker('', { apiExtra: '  dashboard: false' });
  try {
    expect((await off.inject({ method: 'GET', url: '/dashboard/' })).statusCode).toBe(404);
    expect((await off.inject({ method: 'GET', url: '/dashboard/', token: null })).statusCode).toBe(401);
    expect((await off.inject({ method: 'GET', url: '/api/v1/history' })).statusCode).toBe(200);
  } finally {
    await off.stop();
  }
});

it('names every listener, the admin API and the dashboard in the `bifro started` line', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-e2e-47-start-'));
  const config = path.join(dir, 'bifro.yml');
  writeFileSync(
    config,
    [
      `dataDir: ${JSON.stringify(path.join(dir, 'data'))}`,
      `pluginsDir: ${JSON.stringify(path.join(REPO, 'plugins'))}`,
      'listeners:',
      '  - { name: default, host: 127.0.0.1, port: 0 }',
      '  - { name: web, type: ws, host: 127.0.0.1, port: 0, path: /mqtt }',
      'log: { level: info }',
      apiYaml(),
    ].join('\n'),
  );
  const broker = await startBrokerProcess(config);
  try {
    const line = broker
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; listeners?: { port: number; url: string }[]; api?: string; dashboard?: string })
      .find((l) => l.msg.startsWith('bifro started'))!;
    const [tcp, ws] = line.listeners!;
    expect(tcp!.port).toBe(broker.port);
    expect(tcp!.url).toBe(`mqtt://127.0.0.1:${tcp!.port}`);
    expect(ws!.url).toBe(`ws://127.0.0.1:${ws!.port}/mqtt`);
    expect(line.api).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(line.dashboard).toBe(`${line.api}/dashboard/`);
    expect(line.msg).toContain(`${tcp!.url} (default), ${ws!.url} (web); admin API ${line.api}; dashboard ${line.dashboard}; plugins:`);
    // The URL answers: the page, without a token.
    expect((await fetch(line.dashboard!)).status).toBe(200);
  } finally {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
