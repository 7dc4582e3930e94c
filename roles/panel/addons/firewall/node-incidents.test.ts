/**
 * Offline incidents of a flapping node: one alert per offline transition up to the cap, one
 * incident until the node has stayed online for the stable time, then one return.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cameOnline, isOver, wentOffline, type NodeIncident } from './node-incidents.ts';

const at = (s: number): string => new Date(Date.UTC(2026, 11, 7, 10, 0, s)).toISOString();

test('a node flapping 10 times inside one incident is announced offline at most max times, back once', () => {
  let incident: NodeIncident | undefined;
  let offlineAlerts = 0;
  let onlineAlerts = 0;
  for (let i = 0; i < 10; i++) {
    const r = wentOffline(incident, at(i * 20), 3);
    incident = r.incident;
    if (r.announce) offlineAlerts++;
    incident = cameOnline(incident, at(i * 20 + 10));
    // back for 10 s only, less than the 60 s stable time: still the same incident
    assert.equal(isOver(incident as NodeIncident, Date.parse(at(i * 20 + 19)), 60), false);
  }
  assert.equal(offlineAlerts, 3);
  assert.deepEqual({ count: incident?.offline_count, alerts: incident?.offline_alerts, started: incident?.started_at }, { count: 10, alerts: 3, started: at(0) });
  const lastBack = Date.parse(incident?.online_since ?? '');
  if (isOver(incident as NodeIncident, lastBack + 59_999, 60)) onlineAlerts++;
  if (isOver(incident as NodeIncident, lastBack + 60_000, 60)) onlineAlerts++;
  assert.equal(onlineAlerts, 1, 'over only once the stable time has passed');
});

test('an offline node is never over; a node coming online without an incident starts none', () => {
  const { incident, announce } = wentOffline(undefined, at(0), 1);
  assert.equal(announce, true);
  assert.equal(isOver(incident, Date.parse(at(0)) + 86_400_000, 30), false);
  assert.equal(cameOnline(undefined, at(5)), undefined);
  assert.equal(wentOffline(cameOnline(incident, at(5)), at(9), 1).announce, false, 'the cap of one was reached');
});
