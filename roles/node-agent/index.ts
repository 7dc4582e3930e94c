import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, subcommand } from '../../src/core/cli.ts';
import { loadNodeAgentConfig, nodeAgentConfigPath, DEFAULT_CONFIG_PATH } from './config.ts';

/** `bandwidth-node` / `hostkit node-agent`: the per-node bandwidth agent of spec/1. */
export const nodeAgentRole: RoleDefinition = {
  name: 'node-agent',
  alias: 'bandwidth-node',
  summary: 'node bandwidth agent: meters and shapes each server’s traffic, serves the node API',
  register(cmd) {
    subcommand(cmd, 'check', 'validate the config file, print every problem and exit 1, or print ok')
      .option('-c, --config <file>', `config file (default: $BANDWIDTH_NODE_CONFIG, else ${DEFAULT_CONFIG_PATH})`)
      .action((opts: { config?: string }) => reportCheck(loadNodeAgentConfig(nodeAgentConfigPath(opts.config))));
  },
};
