import { test } from 'node:test';
import assert from 'node:assert/strict';
import { proxyProtocolHeader } from './proxy-protocol.ts';

test('v1: TCP4, TCP6, and a mixed pair written as IPv6', () => {
  assert.equal(proxyProtocolHeader('v1', { sourceIp: '192.0.2.7', sourcePort: 5000, destIp: '127.0.0.1', destPort: 80 }).toString(), 'PROXY TCP4 192.0.2.7 127.0.0.1 5000 80\r\n');
  assert.equal(proxyProtocolHeader('v1', { sourceIp: '2001:db8::1', sourcePort: 1, destIp: '::1', destPort: 443 }).toString(), 'PROXY TCP6 2001:db8::1 ::1 1 443\r\n');
  assert.equal(proxyProtocolHeader('v1', { sourceIp: '2001:db8::1', sourcePort: 1, destIp: '127.0.0.1', destPort: 443 }).toString(), 'PROXY TCP6 2001:db8::1 ::ffff:127.0.0.1 1 443\r\n');
  assert.equal(proxyProtocolHeader('v1', { sourceIp: 'x', sourcePort: 1, destIp: '127.0.0.1', destPort: 443 }).toString(), 'PROXY UNKNOWN\r\n');
});

test('v2: signature, TCP4 and TCP6 address blocks', () => {
  const v4 = proxyProtocolHeader('v2', { sourceIp: '192.0.2.7', sourcePort: 5000, destIp: '127.0.0.1', destPort: 80 });
  assert.equal(v4.subarray(0, 12).toString('hex'), '0d0a0d0a000d0a515549540a');
  assert.deepEqual([...v4.subarray(12, 16)], [0x21, 0x11, 0, 12]);
  assert.deepEqual([...v4.subarray(16, 24)], [192, 0, 2, 7, 127, 0, 0, 1]);
  assert.equal(v4.readUInt16BE(24), 5000);
  assert.equal(v4.readUInt16BE(26), 80);
  assert.equal(v4.length, 28);
  const v6 = proxyProtocolHeader('v2', { sourceIp: '2001:db8::1', sourcePort: 1, destIp: '::ffff:10.0.0.1', destPort: 2 });
  assert.deepEqual([...v6.subarray(12, 16)], [0x21, 0x21, 0, 36]);
  assert.equal(v6.subarray(16, 32).toString('hex'), '20010db8000000000000000000000001');
  assert.equal(v6.subarray(32, 48).toString('hex'), '00000000000000000000ffff0a000001');
  assert.equal(v6.length, 52);
});
