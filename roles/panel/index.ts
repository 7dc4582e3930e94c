import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, subcommand } from '../../src/core/cli.ts';
import { loadPanelConfig, DEFAULT_CONFIG_PATH } from './config.ts';

/** `hostkit panel`: the hosting panel and its addons. */
export const panelRole: RoleDefinition = {
  name: 'panel',
  summary: 'hosting panel: users, nodes, servers, API keys, bandwidth, trash bin, operations, firewall alerts',
  register(cmd) {
    subcommand(cmd, 'check', 'validate the config file, print every problem and exit 1, or print ok')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action((opts: { config: string }) => reportCheck(loadPanelConfig(opts.config)));
  },
};
