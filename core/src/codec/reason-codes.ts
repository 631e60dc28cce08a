import type { AuthRejectReason } from '@bifro/spi';

/** MQTT 5 reason codes the broker sends (MQTT 5.0 §2.4). */
export const RC = {
  Success: 0x00,
  /** DISCONNECT from a client: close, and publish the will (§3.14.2.1). */
  DisconnectWithWillMessage: 0x04,
  /** PUBACK/PUBREC: accepted, but nobody subscribes (§3.4.2.1). */
  NoMatchingSubscribers: 0x10,
  /** UNSUBACK: no subscription existed (§3.11.3). */
  NoSubscriptionExisted: 0x11,
  /** AUTH: the exchange goes on (§3.15.2.1). */
  ContinueAuthentication: 0x18,
  /** AUTH: the client re-authenticates (§3.15.2.1). */
  ReAuthenticate: 0x19,
  UnspecifiedError: 0x80,
  MalformedPacket: 0x81,
  ProtocolError: 0x82,
  ImplementationSpecificError: 0x83,
  UnsupportedProtocolVersion: 0x84,
  ClientIdentifierNotValid: 0x85,
  BadUserNameOrPassword: 0x86,
  NotAuthorized: 0x87,
  ServerUnavailable: 0x88,
  ServerBusy: 0x89,
  Banned: 0x8a,
  ServerShuttingDown: 0x8b,
  BadAuthenticationMethod: 0x8c,
  KeepAliveTimeout: 0x8d,
  SessionTakenOver: 0x8e,
  TopicFilterInvalid: 0x8f,
  TopicNameInvalid: 0x90,
  PacketIdentifierInUse: 0x91,
  PacketIdentifierNotFound: 0x92,
  ReceiveMaximumExceeded: 0x93,
  TopicAliasInvalid: 0x94,
  PacketTooLarge: 0x95,
  MessageRateTooHigh: 0x96,
  QuotaExceeded: 0x97,
  AdministrativeAction: 0x98,
  PayloadFormatInvalid: 0x99,
  RetainNotSupported: 0x9a,
  QoSNotSupported: 0x9b,
  UseAnotherServer: 0x9c,
  ServerMoved: 0x9d,
  SharedSubscriptionsNotSupported: 0x9e,
  ConnectionRateExceeded: 0x9f,
  MaximumConnectTime: 0xa0,
  SubscriptionIdentifiersNotSupported: 0xa1,
  WildcardSubscriptionsNotSupported: 0xa2,
} as const;

/** Reason codes from 0x80 up report a failure (MQTT 5.0 §2.4); the v3.1.1 SUBACK return code for a failure is 0x80 too. */
export const FIRST_FAILURE_CODE = 0x80;

/** MQTT 3.1/3.1.1 CONNACK return codes (MQTT 3.1.1 §3.2.2.3). */
export const RC3 = {
  Accepted: 0,
  UnacceptableProtocolVersion: 1,
  IdentifierRejected: 2,
  ServerUnavailable: 3,
  BadUserNameOrPassword: 4,
  NotAuthorized: 5,
} as const;

/** CONNACK code for an auth rejection, per protocol version. */
export function connackCodeForAuthReject(reason: AuthRejectReason, protocolVersion: number): number {
  if (protocolVersion === 5) {
    switch (reason) {
      case 'badCredentials':
        return RC.BadUserNameOrPassword;
      case 'notAuthorized':
        return RC.NotAuthorized;
      case 'banned':
        return RC.Banned;
      case 'badAuthMethod':
        return RC.BadAuthenticationMethod;
      case 'error':
        return RC.UnspecifiedError;
    }
  }
  switch (reason) {
    case 'badCredentials':
      return RC3.BadUserNameOrPassword;
    case 'error':
      return RC3.ServerUnavailable;
    default:
      return RC3.NotAuthorized;
  }
}
