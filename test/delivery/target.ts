import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, type WriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sleep, within } from './clock';
import type { BrokerEvent, StorageKind } from './model';

/** What the faulty storage does to writes (see test/fixtures/plugins/faulty-storage). */
export type StorageFault = 'fail' | 'lose';

/**
 * What the checker runs against. A target has nodes (broker processes); a client connects to the
 * node its spec names, and node faults name a node. The single-node target is one broker process;
 * a cluster target would start N nodes with a cluster config and a shared storage, and answer the
 * same calls per node.
 */
export interface Target {
  readonly description: string;
  readonly nodeCount: number;
  /** Whether a node may be killed: its storage keeps what it acknowledged across a restart. */
  readonly durable: boolean;
  start(): Promise<void>;
  /** Stops every node; `keep` leaves the directories (logs, data) for a look. */
  stop(keep?: boolean): Promise<void>;
  /** The port of a node's MQTT listener; undefined while it is down. */
  port(node: number): number | undefined;
  /** SIGKILL; resolves when the process is gone. */
  kill(node: number): Promise<void>;
  /** Starts a killed node again on the same data directory; resolves when it listens. */
  restart(node: number): Promise<void>;
  /**
   * The node's storage writes fail (`fail`), or its inbox appends are acknowledged and dropped
   * (`lose`: a broken broker, for the checker's self-test), or work (`undefined`); resolves once the
   * node has seen it.
   */
  setStorageFault(node: number, fault: StorageFault | undefined): Promise<void>;
  /** Per-tenant settings (settings-file plugin); resolves once every node has loaded them. */
  setTenantSettings(tenant: string, settings: Readonly<Record<string, number | boolean>>): Promise<void>;
  /** The events-log lines of a tenant, from every node, since the start. */
  brokerEvents(tenant: string): BrokerEvent[];
  /** Unexpected exits and other trouble of the nodes since `since` (ms since the epoch). */
  trouble(since: number): string[];
  /** Where the nodes' logs are. */
  readonly dir: string;
  /** The nodes' log files (for a report). */
  readonly logFile: string;
  /** Forgets the events of a tenant (a finished schedule). */
  forget(tenant: string): void;
  /** The faults only a cluster has; absent on the single-node target. */
  readonly cluster?: ClusterControl;
  /** Clears the cluster's faults (resumes, heals, restarts NATS); absent on the single-node target. */
  clearFaults?(): Promise<void>;
}

/** The faults of a cluster target (test/delivery/cluster-target.ts). */
export interface ClusterControl {
  readonly natsServers: number;
  /** SIGSTOP of a node. */
  pause(node: number): void;
  /** SIGCONT of a paused node. */
  resume(node: number): void;
  /** `kill -9` of NATS server `i`; resolves once it exited. */
  killNats(i: number): Promise<void>;
  /** Starts a killed NATS server again (same ports and store); resolves once it is healthy. */
  restartNats(i: number): Promise<void>;
  /** Cuts a node off from every NATS server (`true`) or heals it. */
  partition(node: number, on: boolean): void;
}

const REPO = path.resolve(__dirname, '..', '..');
const CLI = path.join(REPO, 'core', 'dist', 'cli', 'main.js');
const FAULTY_STORAGE = path.join(REPO, 'test', 'fixtures', 'plugins', 'faulty-storage');

/** The broker event types the checker reads: drops (invariant 4) and what helps a report. */
export const LOGGED_EVENTS = [
  'qos0Dropped',
  'qos1Dropped',
  'qos2Dropped',
  'inboxOverflowed',
  'pubDropped',
  'sessionStarted',
  'sessionStopped',
  'distError',
  'flappingDetected',
  'storageFailed',
  'storageRecovered',
];

/**
 * A cluster node's lease: it serves until this long after it sent the last heartbeat NATS
 * accepted (docs/cluster.md § Leases). Its log line on losing it says how long ago that was.
 */
export const LEASE_MS = 7000;
/** The node-level events read from a cluster node's log (no tenant): `leaseLost` at the lease's end, `leaseHeld`. */
export const LEASE_EVENTS = new Set(['leaseLost', 'leaseHeld']);

/** The settings file polling interval (the plugin also watches the file). */
const SETTINGS_POLL_MS = 100;
/** How often the faulty storage reads its control file. */
const CONTROL_POLL_MS = 25;

/** The environment without the caller's BIFRO_* variables. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BIFRO_')) env[k] = v;
  return { ...env, BIFRO_LOG_PRETTY: 'false' };
}

/**
 * One broker process (`bifro start`) with the faulty storage wrapping the level or memory storage,
 * the settings-file plugin and the events-log plugin, in its own directory.
 */
export class BrokerNode {
  readonly configFile: string;
  readonly controlFile: string;
  readonly settingsFile: string;
  readonly logFile: string;
  private child: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private currentPort: number | undefined;
  private log: WriteStream | undefined;
  private expectExit = false;
  private readonly events: BrokerEvent[] = [];
  private readonly problems: { t: number; text: string }[] = [];
  private settingsWaiters: { tenant: string; resolve: () => void }[] = [];
  private readonly tenantSettings = new Map<string, string>();

  constructor(
    readonly index: number,
    readonly dir: string,
    readonly storage: StorageKind,
    pluginsDir: string,
    /** What replaces the storage plugin lines: a cluster node's `cluster:` section (and no storage plugin). */
    cluster?: { readonly yaml: readonly string[]; readonly events: readonly string[]; readonly groups: readonly string[] },
  ) {
    mkdirSync(dir, { recursive: true });
    this.configFile = path.join(dir, 'bifro.yml');
    this.controlFile = path.join(dir, 'storage-control');
    this.settingsFile = path.join(dir, 'settings.yml');
    this.logFile = path.join(dir, 'broker.log');
    writeFileSync(this.controlFile, 'ok\n');
    this.writeSettings();
    const storageLines =
      cluster === undefined
        ? [
            '  storage:',
            '    use: "@fixtures/faulty-storage"',
            `    options: { inner: ${storage}, innerOptions: {}, controlFile: ${JSON.stringify(this.controlFile)}, pollMs: ${CONTROL_POLL_MS} }`,
          ]
        : [];
    writeFileSync(
      this.configFile,
      [
        `nodeId: delivery-${index}`,
        `dataDir: ${JSON.stringify(path.join(dir, 'data'))}`,
        `pluginsDir: ${JSON.stringify(pluginsDir)}`,
        'listeners:',
        '  - { name: tcp, type: tcp, host: 127.0.0.1, port: 0 }',
        `log: { level: ${process.env.BIFRO_CHECK_LOG_LEVEL ?? 'info'} }`,
        // Clients reconnect often here on purpose: no flapping bans.
        'security:',
        '  flapping: { maxDisconnects: 0 }',
        ...(cluster?.yaml ?? []),
        'plugins:',
        ...storageLines,
        '  settings:',
        '    use: "@bifro/plugin-settings-file"',
        `    options: { file: ${JSON.stringify(this.settingsFile)}, pollMs: ${SETTINGS_POLL_MS} }`,
        '  events:',
        '    - use: "@bifro/plugin-events-log"',
        cluster === undefined
          ? `      options: { types: [${LOGGED_EVENTS.join(', ')}] }`
          : `      options: { types: [${[...LOGGED_EVENTS, ...cluster.events].join(', ')}], groups: [${cluster.groups.join(', ')}] }`,
        '',
      ].join('\n'),
    );
  }

  get port(): number | undefined {
    return this.currentPort;
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** The process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** SIGSTOP (a long GC pause, a stalled VM): the process keeps its sockets and answers nothing. */
  pause(): void {
    if (this.child?.pid !== undefined) process.kill(this.child.pid, 'SIGSTOP');
  }

  /** SIGCONT after {@link pause}. */
  resume(): void {
    if (this.child?.pid !== undefined) process.kill(this.child.pid, 'SIGCONT');
  }

  /** Starts the process; resolves once it logged "bifro started" (15 s at most). */
  async start(): Promise<void> {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: build first (npm run build)`);
    this.log ??= createWriteStream(this.logFile, { flags: 'a' });
    this.expectExit = false;
    const child = spawn(process.execPath, [CLI, 'start', '--config', this.configFile, '--port', '0'], {
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        if (!this.expectExit)
          this.problems.push({ t: Date.now(), text: `node ${this.index} exited unexpectedly (code ${code}, signal ${signal})` });
        if (this.child === child) {
          this.child = undefined;
          this.currentPort = undefined;
        }
        resolve();
      }),
    );
    let ready: (port: number) => void = () => undefined;
    let failed: (err: Error) => void = () => undefined;
    const started = new Promise<number>((resolve, reject) => {
      ready = resolve;
      failed = reject;
    });
    const timer = setTimeout(() => failed(new Error(`node ${this.index} not ready in 15 s (see ${this.logFile})`)), 15_000);
    void this.exited.then(() => failed(new Error(`node ${this.index} exited before it was ready (see ${this.logFile})`)));
    let rest = '';
    child.stdout!.on('data', (d: Buffer) => {
      this.log?.write(d);
      rest += d.toString();
      const lines = rest.split('\n');
      rest = lines.pop()!;
      for (const line of lines) this.onLine(line, ready);
    });
    child.stderr!.on('data', (d: Buffer) => this.log?.write(d));
    try {
      this.currentPort = await started;
    } finally {
      clearTimeout(timer);
    }
  }

  private onLine(line: string, ready: (port: number) => void): void {
    if (!line.startsWith('{')) return;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const msg = typeof entry.msg === 'string' ? entry.msg : '';
    if (msg.startsWith('bifro started')) {
      const listeners = entry.listeners as { port: number }[] | undefined;
      if (listeners?.[0] !== undefined) ready(listeners[0].port);
      return;
    }
    if (msg.startsWith('event ') && entry.plugin === '@bifro/plugin-events-log') {
      this.events.push({
        node: this.index,
        type: msg.slice('event '.length),
        ...(typeof entry.tenantId === 'string' ? { tenantId: entry.tenantId } : {}),
        ...(typeof entry.clientId === 'string' ? { clientId: entry.clientId } : {}),
        eventTime: typeof entry.eventTime === 'number' ? entry.eventTime : Number(entry.time),
        ...(typeof entry.topic === 'string' ? { topic: entry.topic } : {}),
        ...(typeof entry.reason === 'string' ? { reason: entry.reason } : {}),
        ...(typeof entry.group === 'string' ? { group: entry.group } : {}),
      });
      return;
    }
    // The lease (cluster nodes): when it ran out by the node's own account, and when it held it again.
    const lapsed = /^this node's lease ran out: NATS accepted no heartbeat of it for (\d+) ms/.exec(msg);
    if (lapsed !== null || msg.startsWith('this node holds its lease again')) {
      const at = Number(entry.time);
      this.events.push({
        node: this.index,
        type: lapsed !== null ? 'leaseLost' : 'leaseHeld',
        eventTime: lapsed !== null ? at - Number(lapsed[1]) + LEASE_MS : at,
      });
      return;
    }
    const updated = /^settings file .* (?:updated for tenant (\S+):|loaded:)/.exec(msg);
    if (updated !== null) {
      const tenant = updated[1];
      const waiting = this.settingsWaiters;
      this.settingsWaiters = [];
      for (const w of waiting) {
        if (tenant === undefined || w.tenant === tenant) w.resolve();
        else this.settingsWaiters.push(w);
      }
      return;
    }
    if (typeof entry.level === 'number' && entry.level >= 60)
      this.problems.push({ t: Date.now(), text: `node ${this.index} logged fatal: ${msg}` });
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined) return;
    this.expectExit = true;
    this.currentPort = undefined;
    child.kill('SIGKILL');
    // A paused process dies of SIGKILL too; SIGCONT for the record.
    if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
    await this.exited;
  }

  /** SIGTERM, then SIGKILL after 10 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (child !== undefined) {
      this.expectExit = true;
      this.currentPort = undefined;
      if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
      child.kill('SIGTERM');
      const done = await within(this.exited!, 10_000);
      if (!done) {
        child.kill('SIGKILL');
        await this.exited;
      }
    }
    await new Promise<void>((r) => (this.log ? this.log.end(r) : r()));
    this.log = undefined;
  }

  async setStorageFault(fault: StorageFault | undefined): Promise<void> {
    writeFileSync(this.controlFile, `${fault ?? 'ok'}\n`);
    // The storage polls the file: after two periods it has seen it.
    await sleep(CONTROL_POLL_MS * 2 + 5);
  }

  async setTenantSettings(tenant: string, settings: Readonly<Record<string, number | boolean>>): Promise<void> {
    const lines = Object.entries(settings).map(([k, v]) => `    ${k}: ${String(v)}`);
    this.tenantSettings.set(tenant, lines.join('\n'));
    const seen = new Promise<void>((resolve) => this.settingsWaiters.push({ tenant, resolve }));
    this.writeSettings();
    // Loaded within ~0.2 s (file watch, or the 100 ms poll and its debounce); 3 s at most.
    await within(seen, 3000);
  }

  private writeSettings(): void {
    const tenants = [...this.tenantSettings].map(([t, body]) => `  ${t}:\n${body}`);
    // Sessions of finished schedules end after 10 minutes (v3.1.1 ones too).
    writeFileSync(
      this.settingsFile,
      ['defaults:', '  MaxSessionExpirySeconds: 600', tenants.length > 0 ? 'tenants:' : '', ...tenants, ''].join('\n'),
    );
  }

  /** A tenant's events, and the node's lease events (no tenant). */
  brokerEvents(tenant: string): BrokerEvent[] {
    return this.events.filter((e) => e.tenantId === tenant || LEASE_EVENTS.has(e.type));
  }

  /** Forgets the events of a tenant (a finished schedule). */
  forget(tenant: string): void {
    for (let i = this.events.length - 1; i >= 0; i--) if (this.events[i]!.tenantId === tenant) this.events.splice(i, 1);
  }

  trouble(since: number): string[] {
    return this.problems.filter((p) => p.t >= since).map((p) => p.text);
  }
}

/** A plugins folder holding links to the three plugins a node loads. */
export function pluginsDirIn(dir: string): string {
  const plugins = path.join(dir, 'plugins');
  mkdirSync(plugins, { recursive: true });
  symlinkSync(FAULTY_STORAGE, path.join(plugins, 'faulty-storage'));
  symlinkSync(path.join(REPO, 'plugins', 'settings-file'), path.join(plugins, 'settings-file'));
  symlinkSync(path.join(REPO, 'plugins', 'events-log'), path.join(plugins, 'events-log'));
  return plugins;
}

/** One broker process: the single-node target. */
export class SingleNodeTarget implements Target {
  readonly nodeCount = 1;
  readonly dir: string;
  readonly durable: boolean;
  private readonly node: BrokerNode;

  constructor(readonly storage: StorageKind) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), `bifro-delivery-${storage}-`));
    this.node = new BrokerNode(0, path.join(this.dir, 'node0'), storage, pluginsDirIn(this.dir));
    this.durable = storage === 'level';
  }

  get description(): string {
    return `one broker process, ${this.storage} storage (${this.dir})`;
  }

  start(): Promise<void> {
    return this.node.start();
  }

  async stop(keep = false): Promise<void> {
    await this.node.stop();
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }

  port(node: number): number | undefined {
    return this.nodeAt(node).port;
  }

  kill(node: number): Promise<void> {
    if (!this.durable) throw new Error('a node with non-durable storage is not killed');
    return this.nodeAt(node).kill();
  }

  restart(node: number): Promise<void> {
    return this.nodeAt(node).start();
  }

  setStorageFault(node: number, fault: StorageFault | undefined): Promise<void> {
    return this.nodeAt(node).setStorageFault(fault);
  }

  setTenantSettings(tenant: string, settings: Readonly<Record<string, number | boolean>>): Promise<void> {
    return this.node.setTenantSettings(tenant, settings);
  }

  brokerEvents(tenant: string): BrokerEvent[] {
    return this.node.brokerEvents(tenant);
  }

  forget(tenant: string): void {
    this.node.forget(tenant);
  }

  trouble(since: number): string[] {
    return this.node.trouble(since);
  }

  get logFile(): string {
    return this.node.logFile;
  }

  private nodeAt(node: number): BrokerNode {
    if (node !== 0) throw new Error(`the single-node target has no node ${node}`);
    return this.node;
  }
}
