import { definePlugin } from '@bifro/spi';
import { parseQuotaOptions } from './options';
import { QuotaThrottler } from './quota-throttler';

export { QuotaThrottler } from './quota-throttler';
export { parseQuotaOptions, QUOTA_OPTION_NAMES, type QuotaOptions, type Quotas } from './options';

/**
 * The quota throttler plugin (`plugins.throttler: { use: "@bifro/plugin-throttler-quota",
 * options: { defaults, tenants } }` in the broker config). Invalid options fail the plugin's
 * load with an Error naming the option path.
 */
export default definePlugin({
  throttler: (ctx) => {
    const options = parseQuotaOptions(ctx.options);
    ctx.logger.info('quota throttler', {
      defaults: Object.keys(options.defaults).length,
      tenants: Object.keys(options.tenants).length,
    });
    return new QuotaThrottler(ctx.tenantUsage, options);
  },
});
