import type { RoleDefinition } from '../../src/core/role.ts';
import { reportCheck, reportProblemsOf, subcommand } from '../../src/core/cli.ts';
import { loadProxyFiles } from './config.ts';

/** `osproxy` / `hostkit proxy`: the layer-7 reverse proxy of spec/3 §2.1-2.7. */
export const proxyRole: RoleDefinition = {
  name: 'proxy',
  alias: 'osproxy',
  summary: 'layer-7 reverse proxy: Host/SNI routing, TLS, WAF, rate limits, challenges, quotas',
  register(cmd) {
    subcommand(cmd, 'check', 'validate config.yaml and every site file, print every problem and exit 1, or print ok')
      .option('-r, --root <dir>', 'project root holding config.yaml, sites.d/ and data/', '.')
      .action((opts: { root: string }) => {
        const files = loadProxyFiles(opts.root);
        reportProblemsOf(files.errors);
        reportCheck(files);
      });
  },
};
