/**
 * The hosting panel's config: listen address, base URL, data directory, database driver, SMTP
 * mail, the app key file and the volumes directory of same-host nodes.
 */
import { loadConfigFile, type ConfigProblem, type ConfigSpec, type LoadedConfig } from '../../src/core/config-loader.ts';
import { checkAbsolutePaths, checkCidrList, checkHttpUrl, checkListen } from '../../src/core/config-checks.ts';
import { validatePanelConfig } from '../../src/contracts/validators.js';
import { panelConfigSchema } from '../../src/contracts/schemas.ts';
import type { PanelConfig } from '../../src/contracts/types.ts';

export const DEFAULT_CONFIG_PATH = '/etc/hostkit/panel.yaml';

export const panelConfigSpec: ConfigSpec<PanelConfig> = {
  validate: validatePanelConfig,
  schema: panelConfigSchema,
  checks(config, problems: ConfigProblem[]) {
    checkListen(config, '/listen', problems);
    checkHttpUrl(config, '/base_url', problems);
    checkCidrList(config, '/trusted_proxies', problems);
    checkAbsolutePaths(config, ['/data_dir', '/volumes_dir', '/logging/file'], problems);
  },
};

/** Loads and checks the panel config; throws ConfigError listing every problem. */
export function loadPanelConfig(file: string): LoadedConfig<PanelConfig> {
  return loadConfigFile(file, panelConfigSpec);
}
