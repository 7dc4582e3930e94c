/** The addons every panel process loads, in order (their migrations apply in this order too). */
import type { PanelAddon } from './addon.ts';
import { bandwidthAddon } from './bandwidth/index.ts';
import { firewallAddon } from './firewall/index.ts';
import { opsAddon } from './ops/index.ts';
import { trashbinAddon } from './trashbin/index.ts';

export const ADDONS: readonly PanelAddon[] = [bandwidthAddon, trashbinAddon, opsAddon, firewallAddon];
