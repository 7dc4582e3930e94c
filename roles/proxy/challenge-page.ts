/**
 * The proof-of-work challenge page (spec/3 §2.5 "Challenge flow"): self-contained HTML (no
 * external resources) whose inline script starts a Web Worker from a blob: URL. The worker
 * searches a nonce with `difficulty` leading zero hex nibbles in `sha256(seed + nonce)`, using Web
 * Crypto where the page is a secure context (HTTPS, localhost) and a plain-JS SHA-256 elsewhere
 * (Web Crypto does not exist on plain-HTTP pages), then the page posts `{seed, nonce}` to the
 * verify path and reloads the URL it was served at with a GET. It lives in a module, not a file,
 * because the proxy ships as one bundled executable.
 */

export const VERIFY_PATH = '/__osc_challenge/verify';

/**
 * The worker's source. `sha256` is the fallback for pages that are not a secure context; the
 * constants are computed (fractional parts of roots of the first primes, FIPS 180-4 §4.2.2, §5.3.3)
 * to keep the page small. Messages out: `{hashes}` every batch, then `{nonce, hashes}`.
 */
export const WORKER_SOURCE = String.raw`'use strict';
const P = [];
for (let n = 2; P.length < 64; n++) if (P.every((p) => n % p !== 0)) P.push(n);
const frac = (x) => Math.floor((x - Math.floor(x)) * 4294967296) | 0;
const K = Int32Array.from(P, (p) => frac(Math.cbrt(p)));
const H0 = Int32Array.from(P.slice(0, 8), (p) => frac(Math.sqrt(p)));
const W = new Int32Array(64);
function sha256(msg) {
  const len = msg.length;
  const buf = new Uint8Array(((len + 9 + 63) >> 6) << 6);
  buf.set(msg);
  buf[len] = 0x80;
  const dv = new DataView(buf.buffer);
  dv.setUint32(buf.length - 4, len * 8);
  const h = H0.slice();
  for (let off = 0; off < buf.length; off += 64) {
    for (let t = 0; t < 16; t++) W[t] = dv.getInt32(off + t * 4);
    for (let t = 16; t < 64; t++) {
      const x = W[t - 15], y = W[t - 2];
      const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
      const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
      W[t] = (W[t - 16] + s0 + W[t - 7] + s1) | 0;
    }
    let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (let t = 0; t < 64; t++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (k + S1 + ((e & f) ^ (~e & g)) + K[t] + W[t]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) ov.setInt32(i * 4, h[i]);
  return out;
}
function zeroNibbles(bytes, want) {
  for (let i = 0; i < want; i++) {
    const b = bytes[i >> 1];
    if ((i & 1 ? b & 15 : b >> 4) !== 0) return false;
  }
  return true;
}
const BATCH = 1024;
onmessage = async (ev) => {
  const { seed, difficulty } = ev.data;
  const enc = new TextEncoder();
  const subtle = self.crypto && self.crypto.subtle;
  for (let n = 0; ; n += BATCH) {
    if (subtle) {
      const jobs = [];
      for (let i = 0; i < BATCH; i++) jobs.push(subtle.digest('SHA-256', enc.encode(seed + (n + i))));
      const digests = await Promise.all(jobs);
      for (let i = 0; i < BATCH; i++) {
        if (zeroNibbles(new Uint8Array(digests[i]), difficulty)) return postMessage({ nonce: String(n + i), hashes: n + i + 1 });
      }
    } else {
      for (let i = 0; i < BATCH; i++) {
        if (zeroNibbles(sha256(enc.encode(seed + (n + i))), difficulty)) return postMessage({ nonce: String(n + i), hashes: n + i + 1 });
      }
    }
    postMessage({ hashes: n + BATCH });
  }
};
`;

// The page's own script: starts the worker, shows progress, posts the answer, reloads.
const PAGE_SCRIPT = String.raw`(function () {
  'use strict';
  var cfg = JSON.parse(document.getElementById('osc-challenge').textContent);
  var status = document.getElementById('status');
  var bar = document.getElementById('bar');
  var detail = document.getElementById('detail');
  var expected = Math.pow(16, cfg.difficulty);
  var started = Date.now();
  function fail(text) {
    status.textContent = text;
    bar.hidden = true;
  }
  // Solved three times within a minute and still here: the clearance cookie is not kept.
  var tries = { n: 0, t: started };
  try {
    var saved = JSON.parse(sessionStorage.getItem('osc_tries') || 'null');
    if (saved && started - saved.t < 60000) tries = { n: saved.n, t: saved.t };
    sessionStorage.setItem('osc_tries', JSON.stringify({ n: tries.n + 1, t: tries.t }));
  } catch (e) {}
  if (tries.n >= 3) {
    try { sessionStorage.removeItem('osc_tries'); } catch (e) {}
    return fail('The check keeps repeating. Please allow cookies for this site, then reload the page.');
  }
  var worker;
  try {
    worker = new Worker(URL.createObjectURL(new Blob([cfg.worker], { type: 'text/javascript' })));
  } catch (e) {
    return fail('Your browser cannot run the check (Web Workers are blocked).');
  }
  worker.onerror = function () { fail('The check failed in your browser. Please reload the page.'); };
  worker.onmessage = function (ev) {
    var m = ev.data;
    var secs = Math.max((Date.now() - started) / 1000, 0.001);
    bar.value = Math.round(100 * (1 - Math.exp(-m.hashes / expected)));
    detail.textContent = m.hashes.toLocaleString() + ' hashes, ' + Math.round(m.hashes / secs).toLocaleString() + ' per second';
    if (m.nonce === undefined) return;
    worker.terminate();
    bar.value = 100;
    status.textContent = 'Done. Loading the page\u2026';
    fetch(cfg.verify, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      credentials: 'same-origin',
      body: JSON.stringify({ seed: cfg.seed, nonce: m.nonce })
    }).then(function (r) {
      if (!r.ok) throw new Error(String(r.status));
      location.replace(location.href);
    }).catch(function () {
      fail('The answer was not accepted. Trying again\u2026');
      setTimeout(function () { location.replace(location.href); }, 2000);
    });
  };
  worker.postMessage({ seed: cfg.seed, difficulty: cfg.difficulty });
})();`;

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center;background:#f6f7f9;color:#1d2129}
main{max-width:32rem;padding:2rem;background:#fff;border-radius:8px;box-shadow:0 1px 4px rgba(0,0,0,.12)}
h1{font-size:1.3rem;margin:0 0 .5rem}progress{width:100%;height:.75rem}#detail{color:#5f6670;font-size:.85rem}`;

// `<` escaped so no value can close the script element it is embedded in.
const scriptJson = (value: unknown): string => JSON.stringify(value).replace(/</g, '\\u003c');

/**
 * The page for one challenge: `seed` from challenge-tokens.ts, the capped `difficulty`, and the
 * CSP nonce that lets its inline script and style run (see challengeCsp).
 */
export function renderChallengePage(opts: { seed: string; difficulty: number; cspNonce: string }): string {
  const data = scriptJson({ seed: opts.seed, difficulty: opts.difficulty, verify: VERIFY_PATH, worker: WORKER_SOURCE });
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow">
<title>Checking your browser&hellip;</title>
<style nonce="${opts.cspNonce}">${STYLE}</style>
</head>
<body>
<main>
<h1>Checking your browser</h1>
<p id="status">This site asks your browser to solve a short puzzle before it continues. This takes a few seconds and happens once.</p>
<progress id="bar" max="100" value="0"></progress>
<p id="detail"></p>
<noscript><p>Please enable JavaScript to continue.</p></noscript>
</main>
<script id="osc-challenge" type="application/json">${data}</script>
<script nonce="${opts.cspNonce}">${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

/**
 * The page's Content-Security-Policy: nothing loads from anywhere; only the nonce'd inline script
 * and style run, the worker comes from a blob: URL, and fetch goes to the page's own origin.
 */
export function challengeCsp(cspNonce: string): string {
  return `default-src 'none'; script-src 'nonce-${cspNonce}'; style-src 'nonce-${cspNonce}'; worker-src blob:; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;
}
