/**
 * Site certificates (spec/3 §2.3): PEM files read into TLS contexts whenever a config generation
 * is built — on a site file change, an API reload and the hourly rebuild — so a renewed
 * certificate is served without a restart. An unreadable pair keeps the site's previous
 * certificate when there is one.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { errorMessage } from '../../src/core/app-error.ts';

export interface CertificateResult {
  context: SecureContext | undefined;
  /** Why the files could not be used; the caller logs it. */
  problem?: string;
  /** The file the problem is in, when it is one file's. */
  field?: 'cert_path' | 'key_path';
}

/**
 * Reads one site's certificate and key. Runs for each TLS site when a generation is built;
 * returns the new context, or `previous` with the problem when the files are unusable. Each file
 * is parsed on its own first, so the problem names the file at fault rather than OpenSSL's
 * decoder.
 */
export function loadCertificate(root: string, tls: { cert_path: string; key_path: string }, previous: SecureContext | undefined): CertificateResult {
  const resolve = (p: string): string => (isAbsolute(p) ? p : join(root, p));
  const failed = (problem: string, field?: CertificateResult['field']): CertificateResult => ({ context: previous, problem, ...(field ? { field } : {}) });
  let cert: Buffer;
  let key: Buffer;
  try {
    cert = readFileSync(resolve(tls.cert_path));
    key = readFileSync(resolve(tls.key_path));
  } catch (err) {
    return failed(errorMessage(err));
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    return failed(`${tls.cert_path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`, 'cert_path');
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    return failed(`${tls.key_path} holds no PEM private key (-----BEGIN PRIVATE KEY-----), or one protected by a passphrase`, 'key_path');
  }
  if (!x509.checkPrivateKey(privateKey)) return failed(`${tls.key_path} is not the key of the certificate in ${tls.cert_path}`, 'key_path');
  try {
    return { context: createSecureContext({ cert, key }) };
  } catch (err) {
    return failed(errorMessage(err));
  }
}
