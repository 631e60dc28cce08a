import type { Storage } from '@bifro/spi';
import type { Clock } from '../base/clock';
import type { BrokerConfig } from '../base/config-types';
import type { Logger } from '../base/logger';
import type { Engine } from '../broker/engine';
import type { ClusterView } from '../cluster/cluster-view';
import type { NodeDrain } from '../broker/node-drain';
import type { LoadedPluginInfo } from '../plugin-host/managers';
import type { TenantRates } from '../tenancy/tenant-rates';

/** Where the broker is in its life, for `GET /ready` and for routes that need a running broker. */
export interface BrokerState {
  /** Listeners bound, storage open, plugins initialised, sessions restored. */
  ready: boolean;
  /** Shutdown began: MQTT listeners are closing, v5 clients were told 0x8B. */
  stopping: boolean;
}

/**
 * What the admin API's routes work with: the broker's engine and services, resolved once at boot
 * by the composition root. Routes never reach the DI container.
 */
export interface ApiContext {
  readonly config: BrokerConfig;
  readonly logger: Logger;
  readonly engine: Engine;
  /** The active storage plugin (retained messages, session records). */
  readonly storage: Storage;
  readonly plugins: readonly LoadedPluginInfo[];
  /** The broker's clock (ms since the epoch). */
  readonly clock: Clock;
  /** When the broker started (the broker's clock). */
  readonly startedAt: number;
  readonly state: BrokerState;
  /** Messages and bytes per second in and out, per tenant and broker-wide, with load averages. */
  readonly rates: TenantRates;
  /** The live nodes: cluster mode's membership, or this broker alone when standalone. */
  readonly nodes: ClusterView;
  /** This node's drain (cluster mode only). */
  readonly drain?: NodeDrain;
}
