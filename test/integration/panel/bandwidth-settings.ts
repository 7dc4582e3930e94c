/**
 * The bandwidth settings as an admin changes them: the whole form saved through the admin web
 * (the only way to change them), keeping the values of earlier saves.
 */
import assert from 'node:assert/strict';
import { SETTING_DEFAULTS, type BandwidthSettings } from '../../../roles/panel/addons/bandwidth/settings.ts';
import type { AdminSession } from './admin-session.ts';

/** A form for one signed-in admin; `save` merges the change into the last saved values. */
export function bandwidthSettingsForm(web: AdminSession): { save(change: Partial<BandwidthSettings>): Promise<void>; current(): BandwidthSettings } {
  let settings: BandwidthSettings = { ...SETTING_DEFAULTS };
  return {
    async save(change) {
      settings = { ...settings, ...change };
      await web.get('/admin/bandwidth/settings');
      const form = Object.fromEntries(Object.entries(settings).flatMap(([k, v]) => (typeof v === 'boolean' ? (v ? [[k, 'on']] : []) : [[k, String(v)]])));
      const r = await web.post('/admin/bandwidth/settings', form);
      assert.equal(r.status, 303, r.text.slice(0, 2000));
    },
    current: () => settings,
  };
}
