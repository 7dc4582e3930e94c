import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseNetDev, readCounters } from './veth.ts';

const SAMPLE = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  123456     789    0    0    0     0          0         0   123456     789    0    0    0     0       0          0
  eth0: 9007199254740000 10    0    0    0     0          0         0 42 3    0    0    0     0       0          0
veth8ec2ed7:    1684      26    0    0    0     0          0         0   104558      65    0    0    0     0       0          0
br-d7037a6b98df:       0       0    0    0    0     0          0         0        0       0    0    1    0     0       0          0
`;

test('parseNetDev reads rx and tx bytes and packets of every interface, skipping the two header lines', () => {
  const m = parseNetDev(SAMPLE);
  assert.deepEqual([...m.keys()], ['lo', 'eth0', 'veth8ec2ed7', 'br-d7037a6b98df']);
  assert.deepEqual(m.get('lo'), { rxBytes: 123456, rxPackets: 789, txBytes: 123456, txPackets: 789 });
  assert.deepEqual(m.get('veth8ec2ed7'), { rxBytes: 1684, rxPackets: 26, txBytes: 104558, txPackets: 65 });
  assert.deepEqual(m.get('eth0'), { rxBytes: 9007199254740000, rxPackets: 10, txBytes: 42, txPackets: 3 });
});

test('parseNetDev reads the old layout where the first number touches the colon', () => {
  const m = parseNetDev('  eth1:12345 6 0 0 0 0 0 0 777 8 0 0 0 0 0 0\n');
  assert.deepEqual(m.get('eth1'), { rxBytes: 12345, rxPackets: 6, txBytes: 777, txPackets: 8 });
});

test('parseNetDev ignores truncated and garbage lines', () => {
  const m = parseNetDev('x: 1 2 3\ny: a b c d e f g h i j k l m n o p\n\n  ok: 1 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0');
  assert.deepEqual([...m.entries()], [['ok', { rxBytes: 1, rxPackets: 0, txBytes: 2, txPackets: 0 }]]);
});

test('readCounters returns only the asked interfaces that exist', async () => {
  const m = await readCounters(['lo', 'no-such-iface0']);
  assert.ok(m.has('lo'));
  assert.ok(!m.has('no-such-iface0'));
  assert.ok((m.get('lo')?.rxBytes ?? -1) >= 0);
});
