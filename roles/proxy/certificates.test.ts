import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCertificate } from './certificates.ts';

/** A self-signed EC pair in `dir` as `<base>.crt` and `<base>.key`. */
function makePair(dir: string, base: string): void {
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-keyout', join(dir, `${base}.key`), '-out', join(dir, `${base}.crt`), '-subj', `/CN=${base}.test`,
  ], { stdio: 'ignore' });
}

test('a reload keeps the context of unchanged files, and makes a new one when they are replaced', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'hk-certs-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  makePair(dir, 'old');
  makePair(dir, 'new');
  copyFileSync(join(dir, 'old.crt'), join(dir, 'live.crt'));
  copyFileSync(join(dir, 'old.key'), join(dir, 'live.key'));
  const tls = { cert_path: 'live.crt', key_path: 'live.key' };

  const first = loadCertificate(dir, tls, undefined).certificate;
  assert.ok(first);
  // Re-read, not re-parsed: every reload would otherwise rebuild every TLS site in every worker.
  assert.equal(loadCertificate(dir, tls, first).certificate, first);

  // A renewal copied over the files is served at the next reload.
  copyFileSync(join(dir, 'new.crt'), join(dir, 'live.crt'));
  copyFileSync(join(dir, 'new.key'), join(dir, 'live.key'));
  const renewed = loadCertificate(dir, tls, first);
  assert.equal(renewed.problem, undefined);
  assert.notEqual(renewed.certificate, first);

  // Half a renewal (the key not copied yet) keeps what served.
  copyFileSync(join(dir, 'old.crt'), join(dir, 'live.crt'));
  const half = loadCertificate(dir, tls, renewed.certificate);
  assert.equal(half.certificate, renewed.certificate);
  assert.match(half.problem ?? '', /is not the key of the certificate/);

  writeFileSync(join(dir, 'live.crt'), 'not a certificate');
  assert.equal(loadCertificate(dir, tls, first).certificate, first);
});
