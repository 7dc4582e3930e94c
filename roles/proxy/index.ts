import type { Command } from 'commander';
import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, reportProblemsOf, subcommand } from '../../src/core/cli.ts';
import { loadProxyFiles } from './config.ts';

const ROOT_HELP = 'project root holding config.yaml, sites.d/ and data/';

/** `osproxy serve`: runs the proxy. Loaded on demand so `check` stays light. */
async function serve(opts: { root: string }): Promise<void> {
  const { serveProxy } = await import('./serve.ts');
  await serveProxy(opts.root);
}

/** `osproxy` / `hostkit proxy`: the layer-7 reverse proxy of spec/3 §2.1-2.7. */
export const proxyRole: RoleDefinition = {
  name: 'proxy',
  alias: 'osproxy',
  summary: 'layer-7 reverse proxy: Host/SNI routing, TLS, WAF, rate limits, challenges, quotas',
  register(cmd: Command) {
    // The spec's command line is `osproxy --root DIR`: serve is the default subcommand.
    const serveCmd = cmd.command('serve', { isDefault: true }).description('run the proxy (the default: `osproxy --root DIR`)');
    serveCmd.copyInheritedSettings(cmd);
    serveCmd.option('-r, --root <dir>', ROOT_HELP, '.').action(serve);
    // The option belongs to serve (and check), but `osproxy --root DIR` is how it is run, so the
    // top help names it too.
    cmd.addHelpText('after', `\nServing (the default command):\n  -r, --root <dir>  ${ROOT_HELP} (default: ".")\n`);
    subcommand(cmd, 'check', 'validate config.yaml and every site file, print every problem and exit 1, or print ok')
      .option('-r, --root <dir>', ROOT_HELP, '.')
      .action((opts: { root: string }) => {
        // The same per-file and cross-file checks a start makes (duplicate ids, contested hostnames).
        const files = loadProxyFiles(opts.root);
        reportProblemsOf(files.errors);
        reportCheck(files);
      });
  },
};
