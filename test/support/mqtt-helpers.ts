import { spawn, type ChildProcess } from 'node:child_process';
import mqtt, {
  type IClientOptions,
  type IClientPublishOptions,
  type IClientSubscribeOptions,
  type ISubscriptionGrant,
  type ISubscriptionMap,
  type MqttClient,
} from 'mqtt';
import type { IConnackPacket, IConnectPacket, IDisconnectPacket, IPublishPacket, Packet } from 'mqtt-packet';
import { RawClient } from './raw-client';

/**
 * Shared helpers for the protocol e2e suite (test/e2e/02..12): connect MQTT.js / raw clients,
 * collect deliveries with bounded waits, drive mosquitto_pub / mosquitto_sub, and clean up every
 * client a test opened. Every wait here has a timeout; nothing hangs a test.
 */

export const HOST = '127.0.0.1';
export type ProtocolVersion = 3 | 4 | 5;
/** Default bound for a wait that is expected to succeed. */
export const WAIT_MS = 3000;
/** How long to watch for something that must NOT happen (a delivery, a close). */
export const QUIET_MS = 300;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

let seq = 0;
/**
 * A name unique to this process and call, starting with `prefix` (sanitised to topic- and
 * client-id-safe characters). Use it for client ids and topic roots.
 */
export function uniqueName(prefix: string): string {
  seq += 1;
  const clean = prefix.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40);
  return `${clean}-${process.pid.toString(36)}${seq.toString(36)}`;
}

/** Polls `predicate` every `intervalMs` until it holds or the time runs out; resolves whether it held. */
export async function waitUntil(predicate: () => boolean, timeoutMs = WAIT_MS, intervalMs = 10): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (predicate()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(intervalMs, Math.max(1, deadline - Date.now())));
  }
}

// ---------------------------------------------------------------------------------------------
// MQTT.js clients

export interface ConnectResult {
  client: MqttClient;
  connack?: IConnackPacket;
  error?: Error & { code?: number };
}

/** MQTT.js options every test client gets: loopback, no automatic reconnect, bounded connect. */
export function clientOptions(port: number, opts: IClientOptions = {}): IClientOptions {
  return { host: HOST, port, reconnectPeriod: 0, connectTimeout: 5000, ...opts };
}

/**
 * Connect with MQTT.js; never rejects: resolves with the CONNACK or the error (refusal, timeout, close).
 * `onClient` runs before any packet is read (attach listeners there to see packets sent right after CONNACK).
 */
export function tryConnect(port: number, opts: IClientOptions = {}, onClient?: (client: MqttClient) => void): Promise<ConnectResult> {
  return new Promise((resolve) => {
    const client = mqtt.connect(clientOptions(port, opts));
    onClient?.(client);
    let done = false;
    const finish = (r: ConnectResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const timer = setTimeout(() => finish({ client, error: new Error('connect timed out') }), (opts.connectTimeout ?? 5000) + 500);
    client.once('connect', (connack) => finish({ client, connack }));
    client.once('error', (error) => finish({ client, error }));
    client.once('close', () => finish({ client, error: new Error('connection closed before CONNACK') }));
  });
}

/** Connect with MQTT.js; resolves with client and CONNACK, rejects (after closing the client) on any failure. */
export async function connectAsync(port: number, opts: IClientOptions = {}): Promise<{ client: MqttClient; connack: IConnackPacket }> {
  const r = await tryConnect(port, opts);
  if (r.connack === undefined) {
    r.client.end(true);
    throw r.error ?? new Error('no CONNACK');
  }
  return { client: r.client, connack: r.connack };
}

/**
 * Connect with a MessageCollector attached before the CONNACK is read, so messages a broker sends
 * right after it (queued messages of a persistent session) are not missed. Rejects like connectAsync.
 */
export async function connectCollecting(
  port: number,
  opts: IClientOptions = {},
): Promise<{ client: MqttClient; connack: IConnackPacket; messages: MessageCollector }> {
  let messages: MessageCollector | undefined;
  const r = await tryConnect(port, opts, (client) => {
    messages = new MessageCollector(client);
  });
  if (r.connack === undefined) {
    r.client.end(true);
    throw r.error ?? new Error('no CONNACK');
  }
  return { client: r.client, connack: r.connack, messages: messages! };
}

/** Subscribe and wait for the SUBACK; rejects when the broker refused a filter (MQTT.js behaviour) or on timeout. */
export function subscribe(
  client: MqttClient,
  filter: string | string[] | ISubscriptionMap,
  opts: IClientSubscribeOptions = { qos: 0 },
  timeoutMs = WAIT_MS,
): Promise<ISubscriptionGrant[]> {
  return withTimeout(client.subscribeAsync(filter, opts), timeoutMs, `SUBACK for ${JSON.stringify(filter)}`);
}

/** Unsubscribe and wait for the UNSUBACK (bounded). */
export function unsubscribe(client: MqttClient, filter: string | string[], timeoutMs = WAIT_MS): Promise<Packet | undefined> {
  return withTimeout(client.unsubscribeAsync(filter), timeoutMs, `UNSUBACK for ${JSON.stringify(filter)}`);
}

/** Publish and wait until MQTT.js considers it done (written for QoS 0, PUBACK / PUBCOMP otherwise). */
export function publish(
  client: MqttClient,
  topic: string,
  payload: string | Buffer,
  opts: IClientPublishOptions = { qos: 0 },
  timeoutMs = WAIT_MS,
): Promise<Packet | undefined> {
  return withTimeout(client.publishAsync(topic, payload, opts), timeoutMs, `publish to ${topic}`);
}

export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export interface ReceivedMessage {
  topic: string;
  payload: Buffer;
  packet: IPublishPacket;
}

/** Records every PUBLISH an MQTT.js client receives from the moment it is created. */
export class MessageCollector {
  readonly messages: ReceivedMessage[] = [];
  private readonly onMessage = (topic: string, payload: Buffer, packet: IPublishPacket): void => {
    this.messages.push({ topic, payload, packet });
  };

  constructor(readonly client: MqttClient) {
    client.on('message', this.onMessage);
  }

  /** Waits until at least `n` messages arrived (or the time ran out) and returns all collected so far. */
  async waitFor(n: number, timeoutMs = WAIT_MS): Promise<ReceivedMessage[]> {
    await waitUntil(() => this.messages.length >= n, timeoutMs);
    return [...this.messages];
  }

  /** Waits `ms` (for late or unwanted deliveries) and returns everything collected. */
  async settle(ms = QUIET_MS): Promise<ReceivedMessage[]> {
    await sleep(ms);
    return [...this.messages];
  }

  payloads(): string[] {
    return this.messages.map((m) => m.payload.toString());
  }

  clear(): void {
    this.messages.length = 0;
  }

  stop(): void {
    this.client.off('message', this.onMessage);
  }
}

export function collect(client: MqttClient): MessageCollector {
  return new MessageCollector(client);
}

/** Starts collecting now and waits for `n` messages; returns what arrived (fewer on timeout). */
export function waitForMessages(client: MqttClient, n: number, timeoutMs = WAIT_MS): Promise<ReceivedMessage[]> {
  const c = new MessageCollector(client);
  return c.waitFor(n, timeoutMs).finally(() => c.stop());
}

// ---------------------------------------------------------------------------------------------
// Raw clients

export interface RawConnectOptions {
  protocolVersion?: ProtocolVersion;
  clientId: string;
  clean?: boolean;
  keepalive?: number;
  username?: string;
  password?: Buffer;
  will?: IConnectPacket['will'];
  properties?: IConnectPacket['properties'];
}

/** A raw client after CONNECT / CONNACK, with `send` bound to its protocol version. */
export interface RawSession {
  raw: RawClient;
  connack: IConnackPacket;
  protocolVersion: ProtocolVersion;
  send(packet: Packet): void;
}

export function connectPacket(opts: RawConnectOptions): IConnectPacket {
  const protocolVersion = opts.protocolVersion ?? 4;
  const packet: IConnectPacket = {
    cmd: 'connect',
    protocolId: protocolVersion === 3 ? 'MQIsdp' : 'MQTT',
    protocolVersion,
    clientId: opts.clientId,
    clean: opts.clean ?? true,
    keepalive: opts.keepalive ?? 30,
  };
  if (opts.username !== undefined) packet.username = opts.username;
  if (opts.password !== undefined) packet.password = opts.password;
  if (opts.will !== undefined) packet.will = opts.will;
  if (opts.properties !== undefined) packet.properties = opts.properties;
  return packet;
}

/** Open a raw socket, send CONNECT and wait for the CONNACK; throws when none came. */
export async function rawConnect(port: number, opts: RawConnectOptions, timeoutMs = WAIT_MS): Promise<RawSession> {
  const protocolVersion = opts.protocolVersion ?? 4;
  const raw = await RawClient.connect(port, protocolVersion);
  raw.send(connectPacket(opts), protocolVersion);
  const p = await raw.next(timeoutMs);
  if (p?.cmd !== 'connack') {
    raw.destroy();
    throw new Error(`expected CONNACK, got ${p ? p.cmd : raw.closed ? 'a closed connection' : 'nothing'}`);
  }
  return { raw, connack: p, protocolVersion, send: (packet: Packet) => raw.send(packet, protocolVersion) };
}

type PacketOf<C extends Packet['cmd']> = Extract<Packet, { cmd: C }>;

/** The next packet; throws unless it arrives in time and is a `cmd`. */
export async function expectPacket<C extends Packet['cmd']>(raw: RawClient, cmd: C, timeoutMs = WAIT_MS): Promise<PacketOf<C>> {
  const p = await raw.next(timeoutMs);
  if (p === undefined) throw new Error(`expected ${cmd}, got ${raw.closed ? 'a closed connection' : 'nothing in time'}`);
  if (p.cmd !== cmd) throw new Error(`expected ${cmd}, got ${p.cmd}: ${JSON.stringify(p)}`);
  return p as PacketOf<C>;
}

/** Collects the next packets until `n` of command `cmd` arrived (other packets are returned too, in order). */
export async function collectPackets(raw: RawClient, cmd: Packet['cmd'], n: number, timeoutMs = WAIT_MS): Promise<Packet[]> {
  const deadline = Date.now() + timeoutMs;
  const out: Packet[] = [];
  let count = 0;
  while (count < n) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const p = await raw.next(left);
    if (p === undefined) break;
    out.push(p);
    if (p.cmd === cmd) count += 1;
  }
  return out;
}

/** Resolves the packets received within `ms` (expected to be none in "must not deliver" checks). */
export async function drainPackets(raw: RawClient, ms = QUIET_MS): Promise<Packet[]> {
  await sleep(ms);
  return raw.packets.splice(0);
}

// ---------------------------------------------------------------------------------------------
// mosquitto command line clients

export interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `mosquitto_pub -h 127.0.0.1 -p port ...args`; killed after `timeoutMs`. */
export function mosquittoPub(port: number, args: string[], timeoutMs = WAIT_MS): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const child = spawn('mosquitto_pub', ['-h', HOST, '-p', String(port), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Prefix of the lines mosquittoSub prints per message; debug lines never start with it. */
const SUB_LINE = '~MSG~ ';

export interface MosquittoSub {
  readonly child: ChildProcess;
  /** Resolves once the broker sent the SUBACK (false when the process ended or time ran out first). */
  readonly subscribed: Promise<boolean>;
  /** Resolves when the process exits: messages as `topic payload` strings (mosquitto_sub -F `%t %p`). */
  readonly done: Promise<{ code: number | null; messages: string[]; output: string }>;
  kill(): void;
}

/**
 * Starts `mosquitto_sub -d -F '%t %p' ...args` (add `-t`, `-C n`, `-W seconds`, `-V mqttv5`, `-q`
 * yourself). `subscribed` tells when publishing is safe; `done` gives the messages.
 */
export function mosquittoSub(port: number, args: string[], hardTimeoutMs = 10000): MosquittoSub {
  // stdbuf: mosquitto_sub's stdout is block-buffered on a pipe; line buffering lets us see the SUBACK as it happens.
  const child = spawn('stdbuf', ['-oL', 'mosquitto_sub', '-h', HOST, '-p', String(port), '-d', '-F', `${SUB_LINE}%t %p`, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let onOutput: () => void = () => undefined;
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const subscribed = new Promise<boolean>((resolve) => {
    onOutput = () => {
      if (/received SUBACK/i.test(output)) resolve(true);
    };
    void exited.then(() => resolve(false));
  });
  child.stdout!.on('data', (d: Buffer) => {
    output += d.toString();
    onOutput();
  });
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), hardTimeoutMs);
  const done = exited.then((code) => {
    clearTimeout(timer);
    const messages = output
      .split('\n')
      .filter((l) => l.startsWith(SUB_LINE))
      .map((l) => l.slice(SUB_LINE.length));
    return { code, messages, output };
  });
  return {
    child,
    subscribed: withTimeout(subscribed, hardTimeoutMs, 'mosquitto_sub SUBACK').catch(() => false),
    done,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Cleanup registry

type Closable = MqttClient | RawClient | RawSession | MosquittoSub;

/** Tracks what a test opens; `cleanup()` force-closes all of it. */
export class ClientRegistry {
  private readonly items: Closable[] = [];

  constructor(private readonly port: () => number) {}

  track<T extends Closable>(item: T): T {
    this.items.push(item);
    return item;
  }

  /** connectAsync on the registry's broker, tracked. */
  async mqtt(opts: IClientOptions = {}): Promise<{ client: MqttClient; connack: IConnackPacket }> {
    const r = await connectAsync(this.port(), opts);
    this.track(r.client);
    return r;
  }

  /** connectCollecting on the registry's broker, tracked. */
  async mqttCollecting(opts: IClientOptions = {}): Promise<{ client: MqttClient; connack: IConnackPacket; messages: MessageCollector }> {
    const r = await connectCollecting(this.port(), opts);
    this.track(r.client);
    return r;
  }

  /** tryConnect on the registry's broker, tracked. */
  async tryMqtt(opts: IClientOptions = {}): Promise<ConnectResult> {
    const r = await tryConnect(this.port(), opts);
    this.track(r.client);
    return r;
  }

  /** A connected MQTT.js client with a collector attached before it subscribes to `filter`. */
  async subscriber(
    filter: string | string[] | ISubscriptionMap,
    subOpts: IClientSubscribeOptions = { qos: 0 },
    opts: IClientOptions = {},
  ): Promise<{ client: MqttClient; connack: IConnackPacket; messages: MessageCollector; granted: ISubscriptionGrant[] }> {
    const { client, connack } = await this.mqtt(opts);
    const messages = collect(client);
    const granted = await subscribe(client, filter, subOpts);
    return { client, connack, messages, granted };
  }

  /** rawConnect on the registry's broker, tracked. */
  async raw(opts: RawConnectOptions): Promise<RawSession> {
    return this.track(await rawConnect(this.port(), opts));
  }

  /** A raw socket without CONNECT, tracked. */
  async rawSocket(protocolVersion: ProtocolVersion = 4): Promise<RawClient> {
    return this.track(await RawClient.connect(this.port(), protocolVersion));
  }

  cleanup(): void {
    for (const item of this.items.splice(0)) {
      if (item instanceof RawClient) item.destroy();
      else if (item instanceof mqtt.MqttClient) item.end(true);
      else if ('raw' in item) item.raw.destroy();
      else item.kill();
    }
  }
}

/**
 * Call inside a `describe`: returns a registry whose clients are force-closed after each test.
 * `port` is read lazily (the broker starts in beforeAll).
 */
export function withClients(port: () => number): ClientRegistry {
  const registry = new ClientRegistry(port);
  afterEach(() => registry.cleanup());
  return registry;
}

/** The DISCONNECT the broker sends (undefined: the connection closed without one). */
export function disconnectOf(m: MqttClient, timeoutMs = 10_000): Promise<IDisconnectPacket | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the client was not disconnected')), timeoutMs);
    m.once('disconnect', (p: IDisconnectPacket) => {
      clearTimeout(timer);
      resolve(p);
    });
    m.once('close', () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
}

/**
 * A QoS 1 publish sent again until it is acknowledged, as a device would: while a session moves
 * between nodes, the broker refuses (0x80) what it cannot yet take responsibility for.
 */
export async function publishAcked(m: MqttClient, topic: string, payload: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await publish(m, topic, payload, { qos: 1 });
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(200);
    }
  }
}
