import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, subcommand } from '../../src/core/cli.ts';
import { loadBandwidthdConfig, DEFAULT_CONFIG_PATH } from './config.ts';
import { jobCommand, resetCommand, socketPathOf, statusCommand, webhookTestCommand } from './cli.ts';
import { MIN_ID_PREFIX } from './daemon.ts';

/** `bandwidth` / `hostkit bandwidthd`: the container bandwidth daemon of spec/3 §2.8-2.9. */
export const bandwidthdRole: RoleDefinition = {
  name: 'bandwidthd',
  alias: 'bandwidth',
  summary: 'container bandwidth daemon: default rates, daily quotas, webhook notifications',
  register(cmd) {
    subcommand(cmd, 'serve', 'run the daemon (discovery, rates, daily quotas, jobs, webhooks, admin socket)')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action(async (opts: { config: string }) => {
        // Loaded on demand: the daemon's dependencies (Docker client, tc) are not needed by the CLI commands.
        const { serveBandwidthd } = await import('./serve.ts');
        await serveBandwidthd(opts.config);
      });
    subcommand(cmd, 'check', 'validate the config file, print every problem and exit 1, or print ok')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action((opts: { config: string }) => reportCheck(loadBandwidthdConfig(opts.config)));
    subcommand(cmd, 'status', 'show the running daemon’s containers, usage, quotas and webhook counters')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .option('--json', 'print JSON')
      .action((opts: { config: string; json?: boolean }) => statusCommand(socketPathOf(opts.config), opts.json === true));
    subcommand(cmd, 'reset [container]', `reset the daily counters of one container (name, id, or id prefix of at least ${MIN_ID_PREFIX} characters) or of all`)
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action((container: string | undefined, opts: { config: string }) => resetCommand(socketPathOf(opts.config), container));
    subcommand(cmd, 'cleanup', 'run the cleanup job now (stale containers, orphan tc devices, compaction)')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action((opts: { config: string }) => jobCommand(socketPathOf(opts.config), 'cleanup'));
    subcommand(cmd, 'run-job <job>', 'run a scheduled job now: reset, cleanup, history, health or webhook_retry')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .action((job: string, opts: { config: string }) => jobCommand(socketPathOf(opts.config), job));
    const webhook = subcommand(cmd, 'webhook', 'webhook tools');
    subcommand(webhook, 'test', 'send a synthetic event to every enabled webhook; exit 0 only if all succeed')
      .option('-c, --config <file>', 'config file', DEFAULT_CONFIG_PATH)
      .option('--platform <platform>', 'only chat_a, chat_b or generic endpoints')
      .action((opts: { config: string; platform?: string }) => webhookTestCommand(opts.config, opts.platform));
  },
};
