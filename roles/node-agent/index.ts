import { Option } from 'commander';
import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, subcommand } from '../../src/core/cli.ts';
import { loadNodeAgentConfig, nodeAgentConfigPath, DEFAULT_CONFIG_PATH } from './config.ts';
import { agentSocketPath, historyCommand, statsCommand, statusCommand, unthrottleCommand } from './cli.ts';
import { useAgentMemoryProfile } from './memory-profile.ts';

const CONFIG_HELP = `config file (default: $BANDWIDTH_NODE_CONFIG, else ${DEFAULT_CONFIG_PATH})`;
const SOCKET_HELP = '\nThe agent is asked over general.socket_path of the config; $BANDWIDTH_NODE_SOCKET names another socket.';

/** `bandwidth-node` / `hostkit node-agent`: the per-node bandwidth agent of spec/1. */
export const nodeAgentRole: RoleDefinition = {
  name: 'node-agent',
  alias: 'bandwidth-node',
  summary: 'node bandwidth agent: meters and shapes each server’s traffic, serves the node API',
  register(cmd) {
    subcommand(cmd, 'serve', 'run the agent (metering, quotas, tc enforcement, node API, panel client)')
      .option('-c, --config <file>', CONFIG_HELP)
      .action(async (opts: { config?: string }) => {
        // Before the daemon's modules load: they are the first thing the profile keeps small.
        useAgentMemoryProfile();
        // Loaded on demand: the daemon's dependencies (Docker client, tc) are not needed by the CLI commands.
        const { serveNodeAgent } = await import('./serve.ts');
        await serveNodeAgent(nodeAgentConfigPath(opts.config));
      });
    subcommand(cmd, 'check', 'validate the config file, print every problem and exit 1, or print ok')
      .option('-c, --config <file>', CONFIG_HELP)
      .action((opts: { config?: string }) => reportCheck(loadNodeAgentConfig(nodeAgentConfigPath(opts.config))));
    const socketOf = (opts: { config?: string }): string => agentSocketPath(nodeAgentConfigPath(opts.config));
    const socketCommand = (name: string, description: string) => subcommand(cmd, name, description).addHelpText('after', SOCKET_HELP);
    socketCommand('status', 'show the running agent’s state (panel, docker, counts, queued events)')
      .option('-c, --config <file>', CONFIG_HELP)
      .option('--json', 'print JSON')
      .action((opts: { config?: string; json?: boolean }) => statusCommand(socketOf(opts), opts.json === true));
    socketCommand('stats', 'show every server’s counters, rates and quota state')
      .option('-c, --config <file>', CONFIG_HELP)
      .option('--json', 'print JSON')
      .action((opts: { config?: string; json?: boolean }) => statsCommand(socketOf(opts), opts.json === true));
    socketCommand('history <uuid>', 'show a server’s usage since the start of the current period')
      .option('-c, --config <file>', CONFIG_HELP)
      // choices: another value is a usage error (exit 2), before the socket is asked
      .addOption(new Option('--period <period>', 'day, week or month').choices(['day', 'week', 'month']).default('day'))
      .addOption(new Option('--bucket <bucket>', 'hour or day').choices(['hour', 'day']).default('hour'))
      .option('--json', 'print JSON')
      .action((uuid: string, opts: { config?: string; period: string; bucket: string; json?: boolean }) =>
        historyCommand(socketOf(opts), uuid, opts.period, opts.bucket, opts.json === true),
      );
    socketCommand('unthrottle <uuid>', 'clear a server’s exceeded quotas until their periods reset')
      .option('-c, --config <file>', CONFIG_HELP)
      .action((uuid: string, opts: { config?: string }) => unthrottleCommand(socketOf(opts), uuid));
  },
};
