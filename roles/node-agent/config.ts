/**
 * The node agent's config (spec/1 §2.10): path from --config, else BANDWIDTH_NODE_CONFIG, else
 * /etc/bandwidth-node/config.yaml; schema defaults; the start-time refusals of the spec (missing
 * panel.url, non-IANA timezone, non-positive durations or ones too long for a timer, a token
 * file that is not 64 lowercase hex characters with mode 0600), and what `serve` could not run
 * (an empty socket path or token file path, an api.listen that is no address).
 */
import { existsSync, statSync, readFileSync } from 'node:fs';
import { socketPathProblem } from '../../src/lib/local-socket.ts';
import { isIP } from 'node:net';
import { loadConfigFile, type ConfigProblem, type ConfigSpec, type LoadedConfig } from '../../src/core/config-loader.ts';
import { errorMessage } from '../../src/core/app-error.ts';
import { at, checkAbsolutePaths, checkHttpUrl, checkPositiveDurations, checkTimeZone } from '../../src/core/config-checks.ts';
import { validateNodeAgentConfig } from '../../src/contracts/validators.js';
import { nodeAgentConfigSchema } from '../../src/contracts/schemas.ts';
import type { NodeAgentConfig } from '../../src/contracts/types.ts';
import { durationMs } from '../../src/lib/units.ts';
import type { SmartSettings } from './smart.ts';

export const DEFAULT_CONFIG_PATH = '/etc/bandwidth-node/config.yaml';

/** The config path an agent command uses: the flag, then BANDWIDTH_NODE_CONFIG, then the default. */
export function nodeAgentConfigPath(flag: string | undefined): string {
  // `||`: an empty variable (set but blank in a unit file) means unset, as for BANDWIDTH_NODE_SOCKET.
  return flag ?? (process.env['BANDWIDTH_NODE_CONFIG'] || DEFAULT_CONFIG_PATH);
}

const TOKEN = /^[0-9a-f]{64}$/;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/**
 * Whether `api.listen` can be a bind address: an IPv4 or IPv6 literal (no brackets, no port), or
 * a host name of valid syntax whose last label is not all digits (so `999.1.1.1` is refused
 * rather than looked up in DNS at start).
 */
export function isListenHost(value: string): boolean {
  if (isIP(value) !== 0) return true;
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  return labels.every((l) => LABEL.test(l)) && !/^[0-9]+$/.test(labels[labels.length - 1] as string);
}

/** Problems of the pairing token file; the file is read again at start, never cached here. */
export function tokenFileProblems(file: string): string[] {
  const unreadable = (err: unknown): string => {
    const code = (err as NodeJS.ErrnoException).code;
    return `cannot read token file ${file}: ${code === 'ENOENT' ? 'file not found' : code === 'EACCES' ? 'permission denied' : errorMessage(err)}`;
  };
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(file);
  } catch (err) {
    return [unreadable(err)];
  }
  if (!st.isFile()) return [`token file ${file} is ${st.isDirectory() ? 'a directory' : 'not a regular file'}: give the file holding the node's pairing token`];
  const out: string[] = [];
  if ((st.mode & 0o077) !== 0) out.push(`token file ${file} must have mode 0600 (has ${(st.mode & 0o777).toString(8).padStart(4, '0')})`);
  if (process.getuid?.() === 0 && st.uid !== 0) out.push(`token file ${file} must be owned by root`);
  let text = '';
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    out.push(unreadable(err));
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
      ['/docker/discovery_interval', '/bandwidth/poll_interval', '/scheduler/check_interval', '/cleanup/interval', '/panel/heartbeat_interval', '/smart/baseline_time_constant', '/smart/hold_down'],
      problems,
    );
    checkTimeZone(config, '/timezone', problems);
    checkHttpUrl(config, '/panel/url', problems);
    checkAbsolutePaths(config, ['/general/socket_path', '/database/path', '/panel/token_file', '/logging/file'], problems);
    if (at(config, '/database/max_open_conns') !== undefined && at(config, '/database/max_open_conns') !== 1) {
      problems.push({ path: '/database/max_open_conns', message: 'must be 1: the store has a single writer' });
    }
    // The levels must rise and their caps tighten, or a higher level would be no worse than a lower one.
    const num = (path: string): number | undefined => (typeof at(config, path) === 'number' ? (at(config, path) as number) : undefined);
    for (const [lower, higher, rule] of [
      ['l1_multiplier', 'l2_multiplier', 'must be above /smart/l1_multiplier'],
      ['l2_multiplier', 'l3_multiplier', 'must be above /smart/l2_multiplier'],
    ] as const) {
      const a = num(`/smart/${lower}`);
      const b = num(`/smart/${higher}`);
      if (a !== undefined && b !== undefined && b <= a) problems.push({ path: `/smart/${higher}`, message: `${rule} (${a}); got ${b}` });
    }
    for (const [looser, tighter] of [
      ['l1_cap_factor', 'l2_cap_factor'],
      ['l2_cap_factor', 'l3_cap_factor'],
    ] as const) {
      const a = num(`/smart/${looser}`);
      const b = num(`/smart/${tighter}`);
      if (a !== undefined && b !== undefined && b > a) problems.push({ path: `/smart/${tighter}`, message: `must be at most /smart/${looser} (${a}): a higher level caps tighter; got ${b}` });
    }
    const socketPath = at(config, '/general/socket_path');
    if (socketPath === '') {
      problems.push({ path: '/general/socket_path', message: 'is required: the local CLI socket (for example /var/run/bandwidth-node.sock)' });
    } else if (typeof socketPath === 'string') {
      const problem = socketPathProblem(socketPath);
      if (problem !== undefined) problems.push({ path: '/general/socket_path', message: problem });
    }
    const dbPath = at(config, '/database/path');
    if (typeof dbPath === 'string' && dbPath !== ':memory:' && existsSync(dbPath) && statSync(dbPath).isDirectory()) {
      problems.push({ path: '/database/path', message: `${dbPath} is a directory: name the database file (for example ${dbPath.replace(/\/$/, '')}/bandwidth-node.db)` });
    }
    const listen = at(config, '/api/listen');
    // A disabled API binds nothing; a listen of another type is the schema's to report.
    if (at(config, '/api/enabled') !== false && typeof listen === 'string') {
      if (listen === '') problems.push({ path: '/api/listen', message: 'is required while the API is enabled' });
      else if (!isListenHost(listen)) {
        problems.push({ path: '/api/listen', message: `must be an IP address (such as 0.0.0.0 or ::) or a host name, without a port (got ${JSON.stringify(listen)})` });
      }
    }
    const tokenFile = at(config, '/panel/token_file');
    if (tokenFile === '') {
      problems.push({ path: '/panel/token_file', message: "is required: the file holding the node's pairing token" });
    } else if (typeof tokenFile === 'string') {
      for (const message of tokenFileProblems(tokenFile)) problems.push({ path: '/panel/token_file', message });
    }
  },
};

/** The detector's settings in base units (runs once at agent start). */
export function smartSettings(config: NodeAgentConfig): SmartSettings {
  const s = config.smart;
  return {
    baselineTauMs: durationMs(s.baseline_time_constant),
    floorPps: s.floor_pps,
    floorBps: s.floor_mbps * 1e6,
    multipliers: [s.l1_multiplier, s.l2_multiplier, s.l3_multiplier],
    mitigate: s.mitigation,
    capFactors: [s.l1_cap_factor, s.l2_cap_factor, s.l3_cap_factor],
    minCapBps: s.min_cap_mbps * 1e6,
    holdDownMs: durationMs(s.hold_down),
  };
}

/** Loads and checks the agent config; throws ConfigError listing every problem. */
export function loadNodeAgentConfig(file: string): LoadedConfig<NodeAgentConfig> {
  return loadConfigFile(file, nodeAgentConfigSpec);
}
