import { Option } from 'commander';
import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, subcommand } from '../../src/core/cli.ts';
import { loadPanelConfig, DEFAULT_CONFIG_PATH } from './config.ts';
import type * as PanelCli from './cli.ts';
import type { KeyCreateOptions, NodeCreateOptions, UserCreateOptions } from './cli.ts';

const CONFIG_HELP = 'config file';

// The panel's code (web stack, mail, addons) loads only when a panel command runs, so the other
// roles of the executable do not carry it in memory.
const commands = (): Promise<typeof PanelCli> => import('./cli.ts');

/** `hostkit panel`: the hosting panel and its addons. */
export const panelRole: RoleDefinition = {
  name: 'panel',
  summary: 'hosting panel: users, nodes, servers, API keys, bandwidth addon, trash bin, operations suite',
  register(cmd) {
    subcommand(cmd, 'serve', 'run the panel: admin web pages, client and application APIs')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (opts: { config: string }) => {
        // Loaded on demand: the web stack is not needed by the other commands.
        const { servePanel } = await import('./serve.ts');
        await servePanel(opts.config);
      });
    subcommand(cmd, 'check', 'validate the config file, print every problem and exit 1, or print ok')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action((opts: { config: string }) => reportCheck(loadPanelConfig(opts.config)));

    const user = subcommand(cmd, 'user', 'manage panel users');
    subcommand(user, 'create', 'create a user (a random password is generated and printed when --password is left out)')
      .requiredOption('--username <name>', 'login name')
      .requiredOption('--email <address>', 'email address')
      .option('--password <password>', 'password, at least 8 characters')
      .option('--admin', 'make the user a root administrator')
      .option('--first-name <name>', 'first name')
      .option('--last-name <name>', 'last name')
      .option('--json', 'print JSON')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: UserCreateOptions) => (await commands()).userCreateCommand(o));
    subcommand(user, 'list', 'list the users: id, username, email, administrator, two-factor')
      .option('--json', 'print JSON')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: { config: string; json?: boolean }) => (await commands()).userListCommand(o));
    subcommand(user, 'password', "set a user's password and end their web sessions (a random password is generated and printed when --password is left out)")
      .requiredOption('--user <user>', 'user id, username or email')
      .option('--password <password>', 'new password, at least 8 characters')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: { config: string; user: string; password?: string }) => (await commands()).userPasswordCommand(o));
    subcommand(user, 'disable-2fa', 'turn off two-factor authentication for a user who lost their authenticator and recovery codes')
      .requiredOption('--user <user>', 'user id, username or email')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: { config: string; user: string }) => (await commands()).userDisableTwoFactorCommand(o));

    const node = subcommand(cmd, 'node', 'manage nodes');
    subcommand(node, 'create', 'create a node and print its pairing token (shown once)')
      .requiredOption('--name <name>', 'node name')
      .requiredOption('--fqdn <host>', 'host name or IP the panel reaches the node agent at')
      .option('--location <id>', 'location id (default: the first location, created as "default" if none)')
      // choices: another value is a usage error (exit 2) naming the option, before the database opens
      .addOption(new Option('--scheme <scheme>', 'http or https').choices(['http', 'https']).default('http'))
      .option('--port <port>', 'node API port', '8480')
      .option('--json', 'print JSON')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: NodeCreateOptions) => (await commands()).nodeCreateCommand(o));

    const key = subcommand(cmd, 'key', 'manage API keys');
    subcommand(key, 'create', 'create an API key for a user and print it (shown once)')
      .requiredOption('--user <user>', 'user id, username or email')
      .requiredOption('--type <type>', 'client or application (application keys need a root administrator)')
      .option('--memo <text>', 'what the key is for')
      .option('--json', 'print JSON')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: KeyCreateOptions) => (await commands()).keyCreateCommand(o));

    const mail = subcommand(cmd, 'mail', 'outgoing mail');
    subcommand(mail, 'test', 'send a test mail through the configured SMTP server')
      .requiredOption('--to <address>', 'recipient')
      .option('-c, --config <file>', CONFIG_HELP, DEFAULT_CONFIG_PATH)
      .action(async (o: { config: string; to: string }) => (await commands()).mailTestCommand(o));
  },
};
