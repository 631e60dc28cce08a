import type { ClientInfo, Lifecycle, MaybePromise, ProtocolVersion, UserProperties } from './common';

/** The TLS client certificate presented on a TLS/WSS listener that requests one. */
export interface ClientCertificate {
  /** Subject distinguished name fields, e.g. `{ CN: 'device-17', O: 'acme' }`. */
  readonly subject: Readonly<Record<string, string>>;
  /** Issuer distinguished name fields. */
  readonly issuer: Readonly<Record<string, string>>;
  /** SHA-256 fingerprint, colon-separated upper-case hex. */
  readonly fingerprint256: string;
  /** Serial number, hex. */
  readonly serialNumber: string;
  /** Whether the certificate chained to a configured CA (false when the listener allows unverified certs). */
  readonly authorized: boolean;
  /** The DER encoded certificate. */
  readonly raw: Uint8Array;
}

/** Everything known about a client when its CONNECT arrives. */
export interface AuthRequest {
  readonly protocolVersion: ProtocolVersion;
  /** Client identifier as sent (may be empty: the broker assigns one after a successful auth). */
  readonly clientId: string;
  readonly username?: string;
  readonly password?: Uint8Array;
  /** Present on TLS listeners when the client presented a certificate. */
  readonly clientCertificate?: ClientCertificate;
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** Name of the listener the client connected through. */
  readonly listener: string;
  /** MQTT 5 CONNECT user properties. */
  readonly userProperties?: UserProperties;
}

/** Why an auth provider rejected a client. Mapped to CONNACK codes by the broker. */
export type AuthRejectReason =
  /** Bad user name or password: v5 0x86, v3 0x04. */
  | 'badCredentials'
  /** Not authorized: v5 0x87, v3 0x05. */
  | 'notAuthorized'
  /** Banned: v5 0x8A, v3 0x05. */
  | 'banned'
  /** Bad authentication method: v5 0x8C, v3 0x05. */
  | 'badAuthMethod'
  /** The provider could not decide (backend down...): v5 0x80 unspecified error, v3 0x03 server unavailable. */
  | 'error';

/** The client is who it says: it belongs to `tenantId` as `userId`. */
export interface AuthOk {
  readonly type: 'ok';
  readonly tenantId: string;
  readonly userId: string;
  /** Attributes handed to later plugin calls in {@link ClientInfo.attrs}. */
  readonly attrs?: Readonly<Record<string, string>>;
  /** v5 Response Information returned in CONNACK when the client requested it. */
  readonly responseInfo?: string;
  /** v5 user properties added to CONNACK. */
  readonly userProperties?: UserProperties;
  /**
   * When the credentials stop being valid (ms since the epoch; e.g. a JWT's `exp`), SPI 1.2.0. The
   * broker ends the connection then: MQTT 5 DISCONNECT 0xA0 (Maximum connect time), MQTT 3 closed,
   * reported as a `byServer` event with `reason: 'credentials expired'`. An MQTT 5 client may
   * re-authenticate (AUTH 0x19) before: a success carrying a later `expiresAt` moves the deadline.
   * Absent: the credentials do not expire while connected.
   */
  readonly expiresAt?: number;
}

/** The client is refused. */
export interface AuthReject {
  readonly type: 'reject';
  readonly reason: AuthRejectReason;
  /** Human-readable reason; sent as v5 Reason String when the client asked for problem information. */
  readonly text?: string;
}

/** This provider has no opinion: ask the next provider in the chain. When every provider defers, the client is refused with `notAuthorized`. */
export interface AuthDefer {
  readonly type: 'defer';
}

export type AuthResult = AuthOk | AuthReject | AuthDefer;

/** One step of the MQTT 5 enhanced authentication exchange (AUTH packets). */
export interface ExtendedAuthRequest extends AuthRequest {
  /** `start`: CONNECT carried an Authentication Method; `continue`: an AUTH 0x18 from the client; `reauth`: an AUTH 0x19 on a live connection. */
  readonly phase: 'start' | 'continue' | 'reauth';
  /** The Authentication Method. */
  readonly method: string;
  /** The Authentication Data of this step, if any. */
  readonly data?: Uint8Array;
  /** Per-exchange scratch space kept by the broker across the steps of one exchange. */
  readonly state: Map<string, unknown>;
  /** On `reauth`: who the client currently is. */
  readonly client?: ClientInfo;
}

/** The exchange succeeded; the broker sends CONNACK 0x00 (or AUTH 0x00 on re-auth). */
export interface ExtendedAuthSuccess extends Omit<AuthOk, 'type'> {
  readonly type: 'success';
  /** Authentication Data to send with the success. */
  readonly data?: Uint8Array;
}

/** Another round: the broker sends AUTH 0x18 with this data and waits for the client's answer. */
export interface ExtendedAuthContinue {
  readonly type: 'continue';
  readonly data?: Uint8Array;
}

/** The exchange failed. */
export interface ExtendedAuthFailed {
  readonly type: 'failed';
  readonly reason: AuthRejectReason;
  readonly text?: string;
}

export type ExtendedAuthResult = ExtendedAuthSuccess | ExtendedAuthContinue | ExtendedAuthFailed | AuthDefer;

/**
 * Authenticates connecting clients and names their tenant. Several providers form an ordered
 * chain: the first result that is not `defer` decides.
 *
 * @example
 * ```ts
 * const auth: AuthProvider = {
 *   authenticate(req) {
 *     if (req.username === undefined) return { type: 'defer' };
 *     const [tenantId, userId] = req.username.split('/');
 *     return check(req) ? { type: 'ok', tenantId, userId } : { type: 'reject', reason: 'badCredentials' };
 *   },
 * };
 * ```
 */
export interface AuthProvider extends Lifecycle {
  /** Decide on a CONNECT without an Authentication Method. Return synchronously when you can. */
  authenticate(request: AuthRequest): MaybePromise<AuthResult>;
  /** Authentication Methods this provider handles in {@link extendedAuth}. */
  readonly authMethods?: readonly string[];
  /** MQTT 5 enhanced authentication (CONNECT with Authentication Method, AUTH packets, re-auth). */
  extendedAuth?(request: ExtendedAuthRequest): MaybePromise<ExtendedAuthResult>;
}
