import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, subcommand } from '../../src/core/cli.ts';
import { loadBandwidthdConfig, DEFAULT_CONFIG_PATH } from './config.ts';

/** `bandwidth` / `hostkit bandwidthd`: the container bandwidth daemon of spec/3 §2.8-2.9. */
export const bandwidthdRole: RoleDefinition = {
  name: 'bandwidthd',
  alias: 'bandwidth',
  summary: 'container bandwidth daemon: default rates, daily quotas, webhook notifications',
  register(cmd) {
    subcommand(cmd, 'check', 'validate the config file, print every problem and exit 1, or print ok')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action((opts: { config: string }) => reportCheck(loadBandwidthdConfig(opts.config)));
  },
};
