/**
 * Site certificates (spec/3 §2.3): PEM files read into TLS contexts whenever a config generation
 * is built — on a site file change, an API reload and the hourly rebuild — so a renewed
 * certificate is served without a restart. An unreadable pair keeps the site's previous
 * certificate when there is one.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import { errorMessage } from '../../src/core/app-error.ts';

export interface CertificateResult {
  context: SecureContext | undefined;
  /** Why the files could not be used; the caller logs it. */
  problem?: string;
}

/**
 * Reads one site's certificate and key. Runs for each TLS site when a generation is built;
 * returns the new context, or `previous` with the problem when the files are unusable.
 */
export function loadCertificate(root: string, tls: { cert_path: string; key_path: string }, previous: SecureContext | undefined): CertificateResult {
  const resolve = (p: string): string => (isAbsolute(p) ? p : join(root, p));
  try {
    const context = createSecureContext({ cert: readFileSync(resolve(tls.cert_path)), key: readFileSync(resolve(tls.key_path)) });
    return { context };
  } catch (err) {
    return { context: previous, problem: errorMessage(err) };
  }
}
