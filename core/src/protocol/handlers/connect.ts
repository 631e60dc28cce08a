import { randomBytes } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import mqttPacket, { type IConnackPacket } from 'mqtt-packet';
import type { DecodedConnect } from '../../codec/packet-decoder';
import {
  sessionListKey,
  type AuthRequest,
  type ClientInfo,
  type ProtocolVersion,
  type QoS,
  type RedirectDecision,
  type UserProperties,
} from '@bifro/spi';
import type { ConnectionPort } from '../connection-port';
import type { Identity } from '../identity';
import { connackCodeForAuthReject, RC, RC3 } from '../../codec/reason-codes';
import { PACKET } from '../../codec/packet-types';
import { validateTopicName } from '../../routing/topic';
import { Message } from '../../session/message';
import type { Session } from '../../session/session';
import type { PublishProperties } from '../../codec/publish-codec';

/** Shared by every client whose auth answer carries no attributes (one object less per connection). */
const NO_ATTRS: Readonly<Record<string, string>> = Object.freeze({});

/** Largest packet size MQTT can express (remaining length 268435455 + 5 header bytes). */
const MQTT_MAX_PACKET = 268435460;

/** A client identifier the broker assigns: unique, valid for every protocol version (≤ 23 chars of [0-9a-zA-Z]) [MQTT-3.1.3-5]. */
function assignClientId(): string {
  return 'bifro' + randomBytes(9).toString('hex');
}

function pairsToObject(pairs: UserProperties): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of pairs) (out[k] ??= []).push(v);
  return out;
}

/** Refuse a CONNECT with CONNACK and close (§3.2.2): v5 code, or the v3 return code. */
export function refuse(conn: ConnectionPort, codeV5: number, codeV3: number, reasonString?: string, serverReference?: string): void {
  if (conn.state === 'closed') return;
  const packet: IConnackPacket = { cmd: 'connack', sessionPresent: false };
  if (conn.v5) {
    packet.reasonCode = codeV5;
    const properties: IConnackPacket['properties'] = {};
    if (reasonString !== undefined && conn.requestProblemInfo) properties.reasonString = reasonString;
    if (serverReference !== undefined) properties.serverReference = serverReference;
    if (Object.keys(properties).length > 0) packet.properties = properties;
  } else {
    packet.returnCode = codeV3;
  }
  const bytes = connackBytes(conn, packet);
  if (bytes !== undefined) conn.write(bytes);
  conn.end();
}

/**
 * The 3.1/3.1.1 CONNACK accepting a connection, without and with Session Present: fixed bytes,
 * only ever read (socket writes do not change them), so every connection may send the same ones.
 */
const CONNACK_V3_ACCEPTED = [Buffer.from([0x20, 0x02, 0x00, RC3.Accepted]), Buffer.from([0x20, 0x02, 0x01, RC3.Accepted])] as const;

/**
 * A CONNACK encoded within the client's Maximum Packet Size [MQTT-3.1.2-24]: the Reason String and
 * User Properties are left out when they would make it larger [MQTT-3.2.2-19], [MQTT-3.2.2-20];
 * undefined when it is too large even without them.
 */
function connackBytes(conn: ConnectionPort, packet: IConnackPacket): Buffer | undefined {
  let bytes = mqttPacket.generate(packet, { protocolVersion: conn.protocolVersion });
  const props = packet.properties;
  if (bytes.length > conn.maxPacketSizeOut && props !== undefined) {
    delete props.reasonString;
    delete props.userProperties;
    bytes = mqttPacket.generate(packet, { protocolVersion: conn.protocolVersion });
  }
  return bytes.length > conn.maxPacketSizeOut ? undefined : bytes;
}

/**
 * Look at the protocol name and level before mqtt-packet does: a level we do not speak gets
 * CONNACK 0x01 (v3 form) and a close [MQTT-3.1.2-2]; a wrong protocol name a plain close
 * [MQTT-3.1.2-1]; the reserved flag set a close [MQTT-3.1.2-3]. Returns true when it handled the packet.
 */
export function handleUnsupportedConnect(conn: ConnectionPort, body: Buffer): boolean {
  if (body.length < 2) {
    conn.destroy();
    return true;
  }
  const nameLen = body.readUInt16BE(0);
  if (body.length < 2 + nameLen + 2) {
    conn.destroy();
    return true;
  }
  const name = body.toString('latin1', 2, 2 + nameLen);
  const level = body[2 + nameLen]!;
  const flags = body[3 + nameLen]!;
  if (name !== 'MQTT' && name !== 'MQIsdp') {
    conn.engine.emit('protocolError', undefined, { remoteAddress: conn.origin.remoteAddress, reason: 'protocol name' });
    conn.destroy();
    return true;
  }
  if ((name === 'MQTT' && level !== 4 && level !== 5) || (name === 'MQIsdp' && level !== 3)) {
    conn.engine.emit('unacceptedProtocolVersion', undefined, { remoteAddress: conn.origin.remoteAddress, level });
    conn.write(Buffer.from([PACKET.CONNACK << 4, 0x02, 0x00, RC3.UnacceptableProtocolVersion]));
    conn.end();
    return true;
  }
  if ((flags & 0x01) !== 0) {
    conn.engine.emit('protocolError', undefined, { remoteAddress: conn.origin.remoteAddress, reason: 'reserved connect flag' });
    conn.destroy();
    return true;
  }
  return false;
}

/** CONNECT: client id, enhanced or plain auth, then {@link finishConnect}. Frames that follow wait. */
export function handleConnect(conn: ConnectionPort, packet: DecodedConnect): void {
  const version = (packet.protocolVersion ?? 4) as ProtocolVersion;
  conn.protocolVersion = version;
  conn.v5 = version === 5;
  const props = packet.properties;
  const engine = conn.engine;
  if (conn.v5 && props !== undefined) {
    // Receive Maximum and Maximum Packet Size of 0 are protocol errors (§3.1.2).
    if (props.receiveMaximum === 0 || props.maximumPacketSize === 0) {
      engine.emit('protocolError', undefined, { remoteAddress: conn.origin.remoteAddress, reason: 'zero receive maximum or packet size' });
      refuse(conn, RC.ProtocolError, RC3.ServerUnavailable);
      return;
    }
    conn.receiveMaximum = props.receiveMaximum ?? 65535;
    conn.maxPacketSizeOut = props.maximumPacketSize ?? Number.MAX_SAFE_INTEGER;
    conn.topicAliasMaximumOut = props.topicAliasMaximum ?? 0;
    conn.requestProblemInfo = props.requestProblemInformation ?? true;
  }
  let clientId = packet.clientId;
  let assigned = false;
  if (clientId.length === 0) {
    // An empty id needs a clean session in 3.1.1 [MQTT-3.1.3-7], [MQTT-3.1.3-8]; 3.1 does not allow it.
    if (version === 3 || (version === 4 && packet.clean === false)) {
      engine.emit('identifierRejected', undefined, { remoteAddress: conn.origin.remoteAddress, reason: 'empty client identifier' });
      refuse(conn, RC.ClientIdentifierNotValid, RC3.IdentifierRejected);
      return;
    }
    clientId = assignClientId();
    assigned = true;
  } else if (Buffer.byteLength(clientId) > engine.config.mqtt.maxClientIdLength) {
    engine.emit('malformedClientIdentifier', undefined, { remoteAddress: conn.origin.remoteAddress, reason: 'client identifier too long' });
    refuse(conn, RC.ClientIdentifierNotValid, RC3.IdentifierRejected);
    return;
  }

  const adopted = conn.handover?.takeAdoptedAuth();
  if (adopted !== undefined) {
    // Worker mode: the enhanced authentication ran in the worker that accepted the connection (docs/multicore.md).
    conn.authMethod = adopted.method;
    const auth = { method: adopted.method, data: adopted.data };
    runConnectStep(conn, adopted.clientId, () => finishConnect(conn, packet, adopted.clientId, adopted.assigned, adopted.identity, auth));
    return;
  }
  const request: AuthRequest = {
    protocolVersion: version,
    clientId,
    username: packet.username,
    password: packet.password,
    remoteAddress: conn.origin.remoteAddress,
    remotePort: conn.origin.remotePort,
    listener: conn.origin.listener,
    clientCertificate: conn.origin.clientCertificate,
    userProperties: props?.userProperties,
  };
  const method = conn.v5 ? props?.authenticationMethod : undefined;
  if (method !== undefined) {
    if (!engine.auth.supportsMethod(method)) {
      engine.emit('authError', undefined, { remoteAddress: conn.origin.remoteAddress, clientId, reason: 'unsupported method', method });
      refuse(conn, RC.BadAuthenticationMethod, RC3.NotAuthorized, `authentication method ${method} not supported`);
      return;
    }
    const state = new Map<string, unknown>();
    conn.pendingConnect = { packet, clientId, assigned, request };
    conn.hold(
      Promise.resolve(engine.auth.extendedAuth({ ...request, phase: 'start', method, data: props?.authenticationData, state })).then(
        (result) => continueExtendedAuth(conn, method, state, result),
        () => refuse(conn, RC.UnspecifiedError, RC3.ServerUnavailable),
      ),
    );
    return;
  }
  const outcome = engine.auth.authenticate(request);
  const afterAuth = (result: Awaited<typeof outcome>): Promise<void> | void => {
    if (result.type === 'reject') {
      engine.logger.info({ clientId, reason: result.reason, text: result.text }, 'connection refused by auth');
      engine.emit(result.reason === 'error' ? 'authError' : 'unauthenticated', undefined, {
        remoteAddress: conn.origin.remoteAddress,
        clientId,
        reason: result.reason,
      });
      refuse(conn, connackCodeForAuthReject(result.reason, 5), connackCodeForAuthReject(result.reason, version), result.text);
      return;
    }
    return finishConnect(conn, packet, clientId, assigned, result, undefined);
  };
  runConnectStep(conn, clientId, () => (outcome instanceof Promise ? outcome.then(afterAuth) : afterAuth(outcome)));
}

/**
 * Run a step of CONNECT handling that may finish at once or return a promise: further frames are
 * held only while a promise is pending, and a failure either way refuses the connection.
 */
function runConnectStep(conn: ConnectionPort, clientId: string, step: () => void | Promise<void>): void {
  const fail = (err: unknown): void => {
    conn.engine.logger.error({ clientId, err: String(err) }, 'connect failed');
    refuse(conn, RC.UnspecifiedError, RC3.ServerUnavailable);
  };
  let pending: void | Promise<void>;
  try {
    pending = step();
  } catch (err) {
    fail(err);
    return;
  }
  if (pending instanceof Promise) conn.hold(pending.catch(fail));
}

/** The outcome of one step of enhanced auth at CONNECT. */
export function continueExtendedAuth(
  conn: ConnectionPort,
  method: string,
  state: Map<string, unknown>,
  result: Awaited<ReturnType<ConnectionPort['engine']['auth']['extendedAuth']>>,
): Promise<void> | void {
  const pending = conn.pendingConnect;
  if (pending === undefined || conn.state === 'closed') return;
  if (result.type === 'continue') {
    conn.authExchange = { method, state, reauth: false };
    conn.send({
      cmd: 'auth',
      reasonCode: RC.ContinueAuthentication,
      properties: { authenticationMethod: method, authenticationData: result.data === undefined ? undefined : Buffer.from(result.data) },
    });
    return;
  }
  conn.authExchange = undefined;
  conn.pendingConnect = undefined;
  if (result.type === 'failed') {
    conn.engine.emit('unauthenticated', undefined, {
      remoteAddress: conn.origin.remoteAddress,
      clientId: pending.clientId,
      reason: result.reason,
      method,
    });
    refuse(conn, connackCodeForAuthReject(result.reason, 5), connackCodeForAuthReject(result.reason, conn.protocolVersion), result.text);
    return;
  }
  conn.authMethod = method;
  return finishConnect(conn, pending.packet, pending.clientId, pending.assigned, result, { method, data: result.data });
}

/**
 * After auth: tenant protocol switches, the will, redirect, connect permission and quotas; then
 * the session (takeover, clean start, expiry) and CONNACK with what the tenant's settings allow.
 */
function finishConnect(
  conn: ConnectionPort,
  packet: DecodedConnect,
  clientId: string,
  assigned: boolean,
  identity: Identity,
  auth: { method: string; data: Uint8Array | undefined } | undefined,
): void | Promise<void> {
  // Synchronous all the way when the plugins answer synchronously and the session is transient:
  // no promise, no paused socket. A promise answer continues the same steps when it settles.
  // Worker mode: a tenant another worker owns is served there (docs/multicore.md).
  if (conn.handover?.handOver(conn, identity, clientId, assigned, auth) === true) return;
  const engine = conn.engine;
  const version = conn.protocolVersion;
  const tenantId = identity.tenantId;
  // A client id banned for flapping (security.flapping): CONNACK 0x8A / v3 0x05, before any session work.
  const banned = engine.gate.bannedSeconds({ tenantId, clientId, userId: identity.userId, remoteAddress: conn.origin.remoteAddress });
  if (banned > 0) {
    refuse(conn, RC.Banned, RC3.NotAuthorized, `client identifier banned for ${banned} s: too many disconnects (flapping)`);
    return;
  }
  // An operator's ban (client id, user, tenant or address; docs/api.md § Bans): v5 CONNACK 0x8A
  // Banned, v3 0x05 Not authorized, then the close [MQTT-3.2.2-7] / [MQTT-3.2.2-5].
  if (engine.bans.refusing({ tenantId, clientId, userId: identity.userId, remoteAddress: conn.origin.remoteAddress }) !== undefined) {
    refuse(conn, RC.Banned, RC3.NotAuthorized, 'banned');
    return;
  }
  const enabled = version === 3 ? 'MQTT3Enabled' : version === 4 ? 'MQTT4Enabled' : 'MQTT5Enabled';
  if (!engine.setting(tenantId, enabled)) {
    engine.emit(
      'unacceptedProtocolVersion',
      { tenantId, clientId, userId: identity.userId },
      { remoteAddress: conn.origin.remoteAddress, level: version },
    );
    refuse(conn, RC.UnsupportedProtocolVersion, RC3.UnacceptableProtocolVersion, `MQTT level ${version} is disabled for this tenant`);
    return;
  }
  const client: ClientInfo = {
    tenantId,
    userId: identity.userId,
    clientId,
    protocolVersion: version,
    remoteAddress: conn.origin.remoteAddress,
    remotePort: conn.origin.remotePort,
    listener: conn.origin.listener,
    attrs: identity.attrs ?? NO_ATTRS,
  };

  const built = buildWill(conn, packet, client);
  if (built === null) return;
  const will = built;

  const decision = engine.balancer.needRedirect(client);
  return decision instanceof Promise ? decision.then(afterRedirect) : afterRedirect(decision);

  function afterRedirect(redirect: RedirectDecision): void | Promise<void> {
    if (conn.isClosed()) return;
    if (redirect.type === 'redirect') {
      engine.emit('redirected', client, {
        remoteAddress: client.remoteAddress,
        serverReference: redirect.serverReference,
        permanent: redirect.permanent,
      });
      refuse(conn, redirect.permanent ? RC.ServerMoved : RC.UseAnotherServer, RC3.ServerUnavailable, undefined, redirect.serverReference);
      return;
    }
    const permission = engine.acl.check(client, { type: 'connect' });
    return permission instanceof Promise ? permission.then(afterPermission) : afterPermission(permission);
  }

  function afterPermission(allowed: boolean): void | Promise<void> {
    if (conn.isClosed()) return;
    if (!allowed) {
      engine.emit('notAuthorizedClient', client, { remoteAddress: conn.origin.remoteAddress });
      // Said where an operator looks first: an ACL chain whose plugins all defer denies (docs/spi/acl.md).
      engine.logger.info(
        { tenantId, userId: client.userId, clientId: client.clientId, remoteAddress: conn.origin.remoteAddress },
        'connect denied by access control (a plugin denied it, or every ACL plugin deferred: an all-defer chain denies)',
      );
      refuse(conn, RC.NotAuthorized, RC3.NotAuthorized, 'not authorized to connect');
      return;
    }
    const exhausted = !engine.throttler.hasResource(tenantId, 'TotalConnections')
      ? 'TotalConnections'
      : !engine.throttler.hasResource(tenantId, 'TotalConnectPerSecond')
        ? 'TotalConnectPerSecond'
        : undefined;
    if (exhausted !== undefined) {
      engine.emit('resourceExhausted', client, { resource: exhausted });
      refuse(conn, RC.QuotaExceeded, RC3.ServerUnavailable, 'tenant connection quota exhausted');
      return;
    }
    // The session is claimed where another owner may hold it (a cluster node: an owner on another node hands it over).
    const forceTransient = engine.setting(tenantId, 'ForceTransient');
    const clean = packet.clean !== false || forceTransient;
    const persistent = !forceTransient && (conn.v5 ? (packet.properties?.sessionExpiryInterval ?? 0) > 0 : packet.clean === false);
    const claim = engine.topology.claim(client, clean, persistent, will);
    if (claim === true) return openSession();
    return claim.then((claimed) => {
      if (conn.isClosed()) {
        engine.topology.abandoned(client);
        return;
      }
      if (!claimed) {
        refuse(conn, RC.ServerUnavailable, RC3.ServerUnavailable, 'the session registry is unavailable');
        return;
      }
      return openSession();
    });
  }

  /**
   * A stored session of another user of the tenant under this client id: whether `client` may
   * resume it (ResumeSessionsOfOtherUsers, and access control allowing every stored subscription
   * to the new user). Otherwise the registry starts a fresh session (docs/security.md § Sessions
   * belong to their user).
   */
  function resumable(): string | undefined | Promise<string | undefined> {
    const stored = packet.clean !== false ? undefined : engine.sessions.get(sessionListKey(tenantId, clientId));
    if (stored === undefined || stored.client.userId === client.userId) return undefined;
    const previous = stored.client.userId;
    const log = (resumed: boolean, why: string): undefined | string => {
      engine.logger.info(
        { tenantId, clientId, userId: client.userId, previousUserId: previous, remoteAddress: conn.origin.remoteAddress },
        resumed
          ? `session of user ${previous} resumed by user ${client.userId} (${why})`
          : `session of user ${previous} not resumed by user ${client.userId}: ${why}; a fresh session starts`,
      );
      return resumed ? previous : undefined;
    };
    if (!engine.setting(tenantId, 'ResumeSessionsOfOtherUsers')) return log(false, 'ResumeSessionsOfOtherUsers is false');
    const checks = [...stored.subscriptions.values()].map((sub) =>
      engine.acl.check(client, { type: 'subscribe', filter: sub.filter, qos: sub.qos }),
    );
    const judge = (allowed: readonly boolean[]): string | undefined =>
      allowed.every(Boolean)
        ? log(true, 'every stored subscription allowed')
        : log(false, 'access control denies it a stored subscription');
    return checks.some((c) => c instanceof Promise) ? Promise.all(checks).then(judge) : judge(checks as boolean[]);
  }

  function openSession(): void | Promise<void> {
    const from = resumable();
    return from instanceof Promise
      ? from.then((f) => (conn.isClosed() ? engine.topology.abandoned(client) : startSession(f)))
      : startSession(from);
  }

  function startSession(resumableFrom: string | undefined): void | Promise<void> {
    engine.usage.add(tenantId, 'TotalConnections', 1);
    engine.usage.count(tenantId, 'TotalConnectPerSecond', 1, engine.wheel.now);
    // Session: takeover, clean start or resume, expiry (session/session-registry.ts).
    const v5Expiry = conn.v5 ? (packet.properties?.sessionExpiryInterval ?? 0) : undefined;
    const { session, existing, requested, expiry } = engine.sessions.open(
      conn,
      client,
      packet.clean !== false,
      v5Expiry,
      will,
      resumableFrom,
    );
    conn.session = session;
    if (expiry > 0 && !session.stored && !engine.limits.hasResource(client, 'TotalPersistentSessions')) {
      // No room for another persistent session in this tenant: CONNACK 0x97 / v3 0x03.
      engine.usage.add(tenantId, 'TotalConnections', -1);
      conn.session = undefined;
      if (existing === undefined) engine.sessions.end(session);
      refuse(conn, RC.QuotaExceeded, RC3.ServerUnavailable, 'tenant persistent session quota exhausted');
      return;
    }
    if (expiry > 0 || session.stored) {
      // A persistent session is written through storage from now until it ends, and its record
      // (will, expiry) is on disk before CONNACK says the session exists.
      return engine.sessions.store(session, existing).then(
        () => {
          if (conn.isClosed()) {
            // Gone while its session was written: as if it had connected and dropped at once.
            engine.usage.add(tenantId, 'TotalConnections', -1);
            engine.sessions.disconnected(session, true);
            return;
          }
          acknowledge(session, existing, requested, expiry);
        },
        () => {
          engine.usage.add(tenantId, 'TotalConnections', -1);
          conn.session = undefined;
          engine.sessions.refused(session, existing);
          refuse(conn, RC.UnspecifiedError, RC3.ServerUnavailable, 'session could not be read from or written to storage');
        },
      );
    }
    acknowledge(session, existing, requested, expiry);
  }

  /** Keep alive, the settings CONNACK announces, CONNACK, then the session attached. */
  function acknowledge(session: Session, existing: Session | undefined, requested: number, expiry: number): void {
    // Keep alive: a non-zero value below the tenant's MinKeepAliveSeconds is raised to it; then 0
    // (none) or more than mqtt.maxKeepAliveSeconds becomes that ceiling, so every connection has an
    // idle limit. v5 is told with Server Keep Alive [MQTT-3.2.2-21]; a v3 client cannot be, the
    // broker holds it to 1.5 × the value all the same (docs/security.md § Time limits).
    const requestedKeepAlive = packet.keepalive ?? 0;
    const minKeepAlive = engine.setting(tenantId, 'MinKeepAliveSeconds');
    const maxKeepAlive = engine.config.mqtt.maxKeepAliveSeconds;
    let keepAlive = requestedKeepAlive > 0 && requestedKeepAlive < minKeepAlive ? minKeepAlive : requestedKeepAlive;
    if (keepAlive === 0 || keepAlive > maxKeepAlive) keepAlive = maxKeepAlive;

    // What CONNACK announces holds for the whole connection (D21).
    const limits = engine.limits.connectLimits(tenantId);
    conn.limits = limits;
    const maxPacket = Math.min(MQTT_MAX_PACKET, limits.maxUserPayloadBytes + 65536 + 4096);
    conn.setMaxInboundPacket(maxPacket);
    // MQTT 3.1 has no Session Present flag: the byte is reserved (0).
    const connack: IConnackPacket = { cmd: 'connack', sessionPresent: version !== 3 && existing !== undefined };
    if (conn.v5) {
      connack.reasonCode = RC.Success;
      const p: NonNullable<IConnackPacket['properties']> = {
        receiveMaximum: limits.receivingMaximum,
        maximumPacketSize: maxPacket,
      };
      conn.topicAliasMaximumIn = limits.maxTopicAlias;
      if (conn.topicAliasMaximumIn > 0) p.topicAliasMaximum = conn.topicAliasMaximumIn;
      if (requested !== expiry) p.sessionExpiryInterval = expiry;
      if (limits.maximumQoS < 2) p.maximumQoS = limits.maximumQoS as 0 | 1;
      if (!limits.retainEnabled) p.retainAvailable = false;
      if (!limits.wildcardSubscriptionEnabled) p.wildcardSubscriptionAvailable = false;
      if (!limits.subscriptionIdentifierEnabled) p.subscriptionIdentifiersAvailable = false;
      if (!limits.sharedSubscriptionEnabled) p.sharedSubscriptionAvailable = false;
      if (assigned) p.assignedClientIdentifier = clientId;
      // Sent only when it differs: without it the client's own value holds [MQTT-3.2.2-22].
      if (keepAlive !== requestedKeepAlive) p.serverKeepAlive = keepAlive;
      if (packet.properties?.requestResponseInformation === true && identity.responseInfo !== undefined)
        p.responseInformation = identity.responseInfo;
      if (identity.userProperties !== undefined && identity.userProperties.length > 0)
        p.userProperties = pairsToObject(identity.userProperties);
      if (auth !== undefined) {
        p.authenticationMethod = auth.method;
        if (auth.data !== undefined) p.authenticationData = Buffer.from(auth.data);
      }
      connack.properties = p;
    } else {
      connack.returnCode = RC3.Accepted;
    }
    const bytes = conn.v5 ? connackBytes(conn, connack) : CONNACK_V3_ACCEPTED[connack.sessionPresent ? 1 : 0];
    conn.accept(client, keepAlive, identity.expiresAt ?? 0);
    if (bytes === undefined) {
      // Even without its optional parts the CONNACK exceeds the client's Maximum Packet Size: nothing can be sent [MQTT-3.1.2-24].
      session.attach(conn);
      conn.destroy();
      return;
    }
    conn.write(bytes);
    session.attach(conn);
    engine.emit('clientConnected', client, () => ({
      remoteAddress: client.remoteAddress,
      listener: client.listener,
      sessionPresent: existing !== undefined,
      protocolVersion: version,
    }));
    engine.logger.debug({ tenantId, clientId }, 'client connected');
    conn.replayEarlyFrames();
  }
}

/** The will from CONNECT, checked against the tenant's settings; null when the connection was refused. */
function buildWill(
  conn: ConnectionPort,
  packet: DecodedConnect,
  client: ClientInfo,
): { message: Message; delaySeconds: number } | undefined | null {
  const w = packet.will;
  if (w === undefined || w === null) return undefined;
  const engine = conn.engine;
  const tenantId = client.tenantId;
  const payload = w.payload;
  if (!validateTopicName(w.topic, engine.limits.topicLimits(tenantId)).ok) {
    engine.emit('malformedWillTopic', client, { remoteAddress: client.remoteAddress, reason: 'invalid will topic', topic: w.topic });
    // v5: CONNACK 0x90; 3.1/3.1.1 have no code for it: a protocol violation closes the connection (3.1.1 §4.8).
    if (conn.v5) refuse(conn, RC.TopicNameInvalid, RC3.ServerUnavailable, 'invalid will topic');
    else conn.destroy();
    return null;
  }
  const qos = (w.qos ?? 0) as QoS;
  if (qos > engine.setting(tenantId, 'MaximumQoS')) {
    refuse(conn, RC.QoSNotSupported, RC3.ServerUnavailable, 'will QoS not supported');
    return null;
  }
  if (w.retain === true && !engine.setting(tenantId, 'RetainEnabled')) {
    refuse(conn, RC.RetainNotSupported, RC3.ServerUnavailable, 'retained will not supported');
    return null;
  }
  if (payload.length > engine.setting(tenantId, 'MaxLastWillBytes')) {
    refuse(conn, RC.PacketTooLarge, RC3.ServerUnavailable, 'will payload above MaxLastWillBytes');
    return null;
  }
  const wp = w.properties;
  let properties: PublishProperties | undefined;
  if (conn.v5 && wp !== undefined) {
    properties = {};
    if (wp.payloadFormatIndicator !== undefined) properties.payloadFormatIndicator = wp.payloadFormatIndicator;
    if (wp.contentType !== undefined) properties.contentType = wp.contentType;
    if (wp.responseTopic !== undefined) properties.responseTopic = wp.responseTopic;
    if (wp.correlationData !== undefined) properties.correlationData = wp.correlationData;
    if (wp.userProperties !== undefined) properties.userProperties = wp.userProperties;
    if (wp.messageExpiryInterval !== undefined) properties.messageExpiryInterval = wp.messageExpiryInterval;
    if (wp.payloadFormatIndicator === true && engine.setting(tenantId, 'PayloadFormatValidationEnabled') && !isUtf8(payload)) {
      refuse(conn, RC.PayloadFormatInvalid, RC3.ServerUnavailable, 'will payload is not UTF-8');
      return null;
    }
  }
  // The will's expiry counts from when it is published; kept as an interval until then.
  const message = new Message(w.topic, payload, qos, w.retain === true, properties, conn.engine.wheel.clock(), 0, client.clientId);
  return { message, delaySeconds: conn.v5 ? (wp?.willDelayInterval ?? 0) : 0 };
}
