/**
 * The quota phase (spec/3 §2.6, §7): a site at or over `bandwidth.monthly_quota_bytes` answers
 * 509 (`quota_action: error_page`) or closes the connection without an answer (`close`), rule
 * `quota.exceeded`. Bytes are counted by the data plane when a request or tunnel ends.
 */
import type { ProxySiteConfig } from '../../src/contracts/types.ts';
import type { QuotaCounters } from './quota-store.ts';
import type { Check } from './pipeline.ts';
import { ALLOW, deny, type CloseVerdict } from './verdict.ts';

export const QUOTA_RULE = 'quota.exceeded';
const OVER_PAGE = deny(509, QUOTA_RULE);
const OVER_CLOSE: CloseVerdict = Object.freeze({ kind: 'close', rule: QUOTA_RULE });

/** Compiles the site's check once per generation; undefined for sites without a quota. */
export function createQuotaCheck(site: Readonly<ProxySiteConfig>, quota: QuotaCounters): Check | undefined {
  const bw = site.bandwidth;
  if (bw.monthly_quota_bytes === null) return undefined;
  const over = bw.quota_action === 'close' ? OVER_CLOSE : OVER_PAGE;
  const id = site.id;
  return function checkQuota() {
    return quota.isOver(id, bw) ? over : ALLOW;
  };
}
