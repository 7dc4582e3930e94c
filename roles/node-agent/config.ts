/**
 * The node agent's config (spec/1 §2.10): path from --config, else BANDWIDTH_NODE_CONFIG, else
 * /etc/bandwidth-node/config.yaml; schema defaults; the start-time refusals of the spec (missing
 * panel.url, non-IANA timezone, non-positive durations, a token file that is not 64 lowercase
 * hex characters with mode 0600).
 */
import { statSync, readFileSync } from 'node:fs';
import { loadConfigFile, type ConfigProblem, type ConfigSpec, type LoadedConfig } from '../../src/core/config-loader.ts';
import { at, checkHttpUrl, checkPositiveDurations, checkTimeZone } from '../../src/core/config-checks.ts';
import { validateNodeAgentConfig } from '../../src/contracts/validators.js';
import { nodeAgentConfigSchema } from '../../src/contracts/schemas.ts';
import type { NodeAgentConfig } from '../../src/contracts/types.ts';

export const DEFAULT_CONFIG_PATH = '/etc/bandwidth-node/config.yaml';

/** The config path an agent command uses: the flag, then BANDWIDTH_NODE_CONFIG, then the default. */
export function nodeAgentConfigPath(flag: string | undefined): string {
  return flag ?? process.env['BANDWIDTH_NODE_CONFIG'] ?? DEFAULT_CONFIG_PATH;
}

const TOKEN = /^[0-9a-f]{64}$/;

/** Problems of the pairing token file; the file is read again at start, never cached here. */
export function tokenFileProblems(file: string): string[] {
  let mode: number;
  let uid: number;
  try {
    ({ mode, uid } = statSync(file));
  } catch (err) {
    return [`cannot read token file ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : String(err)}`];
  }
  const out: string[] = [];
  if ((mode & 0o077) !== 0) out.push(`token file ${file} must have mode 0600 (has ${(mode & 0o777).toString(8).padStart(4, '0')})`);
  if (process.getuid?.() === 0 && uid !== 0) out.push(`token file ${file} must be owned by root`);
  let text = '';
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    out.push(`cannot read token file ${file}: ${String(err)}`);
    return out;
  }
  if (!TOKEN.test(text)) out.push(`token file ${file} must hold 64 lowercase hex characters (the node's pairing token from the panel)`);
  return out;
}

export const nodeAgentConfigSpec: ConfigSpec<NodeAgentConfig> = {
  validate: validateNodeAgentConfig,
  schema: nodeAgentConfigSchema,
  checks(config, problems: ConfigProblem[]) {
    checkPositiveDurations(
      config,
      ['/docker/discovery_interval', '/bandwidth/poll_interval', '/scheduler/check_interval', '/cleanup/interval', '/panel/heartbeat_interval'],
      problems,
    );
    checkTimeZone(config, '/timezone', problems);
    checkHttpUrl(config, '/panel/url', problems);
    if (at(config, '/database/max_open_conns') !== undefined && at(config, '/database/max_open_conns') !== 1) {
      problems.push({ path: '/database/max_open_conns', message: 'must be 1: the store has a single writer' });
    }
    if (at(config, '/api/enabled') !== false && at(config, '/api/listen') === '') {
      problems.push({ path: '/api/listen', message: 'is required while the API is enabled' });
    }
    const tokenFile = at(config, '/panel/token_file');
    if (typeof tokenFile === 'string' && tokenFile !== '') {
      for (const message of tokenFileProblems(tokenFile)) problems.push({ path: '/panel/token_file', message });
    }
  },
};

/** Loads and checks the agent config; throws ConfigError listing every problem. */
export function loadNodeAgentConfig(file: string): LoadedConfig<NodeAgentConfig> {
  return loadConfigFile(file, nodeAgentConfigSpec);
}
