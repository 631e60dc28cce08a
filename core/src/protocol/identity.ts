import type { UserProperties } from '@bifro/spi';

/** Who the auth chain says the client is. */
export interface Identity {
  readonly tenantId: string;
  readonly userId: string;
  readonly attrs?: Readonly<Record<string, string>>;
  readonly responseInfo?: string;
  readonly userProperties?: UserProperties;
  /** When the credentials expire (ms since the epoch); the connection ends then (SPI 1.2.0 `AuthOk.expiresAt`). */
  readonly expiresAt?: number;
}
