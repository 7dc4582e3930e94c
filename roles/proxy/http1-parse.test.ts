import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChunkedDecoder, OriginProtocolError, PartialHead, headText, headerList, parseRequestHead, parseResponseHead, scanResponseHead, type ResponseHead } from './http1-parse.ts';

test('plain requests parse into node-shaped headers: repeats joined as node joins them, the first Host and type kept', () => {
  const head = parseRequestHead('POST /a?b=1 HTTP/1.1\r\nHost: x.test\r\nAccept: a\r\naccept: b\r\nCookie: c=1\r\nCookie: d=2\r\nContent-Type: t1\r\nContent-Type: t2\r\nContent-Length: 3\r\nConnection: close');
  assert.ok(head);
  assert.equal(head.method, 'POST');
  assert.equal(head.target, '/a?b=1');
  assert.equal(head.headers['accept'], 'a, b');
  assert.equal(head.headers['cookie'], 'c=1; d=2');
  assert.equal(head.headers['content-type'], 't1');
  assert.equal(head.contentLength, 3);
  assert.equal(head.close, true);
  assert.deepEqual(head.rawHeaders.slice(0, 4), ['Host', 'x.test', 'Accept', 'a']);
  assert.equal(parseRequestHead('GET / HTTP/1.1\r\nHost:   spaced \t')?.headers['host'], 'spaced');
});

test('any token method but CONNECT is a plain request: extension and lower-case methods reach allowed_methods', () => {
  for (const method of ['PROPFIND', 'BREW', 'get', 'M-SEARCH']) assert.equal(parseRequestHead(`${method} / HTTP/1.1\r\nHost: x`)?.method, method);
});

test("anything outside the plain subset is left to node's parser", () => {
  const refused = [
    'GET / HTTP/1.0\r\nHost: x',
    'GET http://x/ HTTP/1.1\r\nHost: x',
    'CONNECT x:443 HTTP/1.1\r\nHost: x',
    'GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked',
    'GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket',
    'POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue',
    'GET / HTTP/1.1\r\nHost: x\r\nHost: y',
    'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1',
    'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1',
    'GET / HTTP/1.1\r\nHost: x\r\n folded',
    'GET / HTTP/1.1\r\nHost: x\nX-Bare: lf',
    'GET / HTTP/1.1\r\nHo st: x',
    'GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b',
    'GET /a b HTTP/1.1\r\nHost: x',
    'G(T / HTTP/1.1\r\nHost: x',
    'CONNECT / HTTP/1.1\r\nHost: x',
    'GET / HTTP/1.1\r\nHost: x\r\nX: a\x7fb',
    'GET / HTTP/1.1\r\nHost: x\r\nX: a\0b',
    'GET /\x01 HTTP/1.1\r\nHost: x',
    'GET / HTTP/1.1\x01\r\nHost: x',
  ];
  for (const head of refused) assert.equal(parseRequestHead(head), undefined, JSON.stringify(head));
});

test('a Host or User-Agent seen before is reused, and a different one is still checked', () => {
  const ua = 'Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0.0.0';
  for (let i = 0; i < 3; i++) {
    const req = parseRequestHead(`GET / HTTP/1.1\r\nHost: site.test\r\nUser-Agent: ${ua}\r\nAccept: */*`);
    assert.equal(req?.headers.host, 'site.test');
    assert.equal(req?.headers['user-agent'], ua);
  }
  // Same length as the last one, one byte different: a control character is still refused.
  assert.equal(parseRequestHead(`GET / HTTP/1.1\r\nHost: site.test\r\nUser-Agent: ${ua.slice(0, -1)}\x01`), undefined);
  assert.equal(parseRequestHead('GET / HTTP/1.1\r\nHost: site.tes\x7f'), undefined);
  assert.equal(parseRequestHead(`GET / HTTP/1.1\r\nHost: site.test\r\nUser-Agent: ${ua}`)?.headers['user-agent'], ua);
  assert.equal(parseRequestHead('GET / HTTP/1.1\r\nHost: other.test')?.headers.host, 'other.test');
});

test('origin response heads: hop-by-hop and Connection-listed headers consumed, framing decided', () => {
  const r = parseResponseHead('HTTP/1.1 200 OK\r\nConnection: x-secret\r\nX-Secret: 1\r\nKeep-Alive: timeout=5\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 5', false);
  assert.equal(r.lines, 'Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 5\r\n');
  assert.deepEqual(headerList(r.lines), ['set-cookie', 'a=1', 'set-cookie', 'b=2', 'content-length', '5']);
  assert.deepEqual([r.hasLength, r.hasDate, r.hasHsts], [true, false, false]);
  assert.deepEqual(r.framing, { kind: 'length', length: 5 });
  assert.equal(r.reusable, true);
  const chunked = parseResponseHead('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 9', false);
  assert.deepEqual(chunked.framing, { kind: 'chunked' });
  assert.equal(chunked.reusable, false, 'Transfer-Encoding with Content-Length: never reused');
  // The body stays gzip-coded: its label stays, less the chunked the writer applies anew.
  assert.equal(chunked.lines, 'transfer-encoding: gzip\r\n');
  assert.equal(chunked.hasLength, false);
  const coded = parseResponseHead('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: br ,, chunked', false);
  assert.deepEqual([coded.framing, coded.lines], [{ kind: 'chunked' }, 'transfer-encoding: gzip, br\r\n']);
  // identity (RFC 2616's "no coding") labels nothing.
  assert.equal(parseResponseHead('HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked', false).lines, '');
  const closeDelimited = parseResponseHead('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip', false);
  assert.deepEqual([closeDelimited.framing, closeDelimited.lines], [{ kind: 'close' }, 'transfer-encoding: gzip\r\n']);
  // No body, no transfer coding to label.
  assert.equal(parseResponseHead('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked', true).lines, '');
  // RFC 9110 §8.6: no Content-Length in a 1xx or 204; a 304 or a HEAD answer keeps the one it has.
  for (const status of ['204 No Content', '100 Continue', '103 Early Hints']) {
    const r = parseResponseHead(`HTTP/1.1 ${status}\r\nContent-Length: 0\r\nX-A: 1`, false);
    assert.deepEqual([r.lines, r.hasLength], ['X-A: 1\r\n', false], status);
  }
  const notModified = parseResponseHead('HTTP/1.1 304 Not Modified\r\nContent-Length: 42', false);
  assert.deepEqual([notModified.lines, notModified.hasLength], ['Content-Length: 42\r\n', true]);
  assert.deepEqual(parseResponseHead('HTTP/1.1 200 OK', false).framing, { kind: 'close' });
  assert.equal(parseResponseHead('HTTP/1.0 200 OK\r\nContent-Length: 1', false).reusable, false);
  const head = parseResponseHead('HTTP/1.1 200 OK\r\nContent-Length: 42', true);
  assert.deepEqual(head.framing, { kind: 'length', length: 0 });
  assert.equal(head.lines, 'Content-Length: 42\r\n');
  assert.equal(head.hasLength, true);
  // Lines pass as received (spelling, spacing, order); what is left out goes wherever it is.
  const nginx = parseResponseHead('HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Wed, 25 Nov 2026 21:19:36 GMT\r\nContent-Length: 3\r\nContent-Length:3\r\nConnection: keep-alive\r\nETag:  "x" \r\nKeep-Alive: timeout=5', false);
  assert.equal(nginx.lines, 'Server: nginx\r\nDate: Wed, 25 Nov 2026 21:19:36 GMT\r\nContent-Length: 3\r\nETag:  "x" \r\n');
  assert.deepEqual(headerList(nginx.lines), ['server', 'nginx', 'date', 'Wed, 25 Nov 2026 21:19:36 GMT', 'content-length', '3', 'etag', '"x"']);
  assert.deepEqual([nginx.hasLength, nginx.hasDate, nginx.hasHsts], [true, true, false]);
  // A Content-Length before the Transfer-Encoding that overrides it is left out too.
  const te = parseResponseHead('HTTP/1.1 200 OK\r\nContent-Length: 9\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\nX-B: 2', false);
  assert.equal(te.lines, 'X-A: 1\r\nX-B: 2\r\n');
  // Connection may list a hop-by-hop header too, and Date or HSTS; never the framing.
  const listed = parseResponseHead('HTTP/1.1 200 OK\r\nDate: x\r\nStrict-Transport-Security: max-age=1\r\nKeep-Alive: 5\r\nContent-Length: 1\r\nConnection: keep-alive, Date, strict-transport-security, content-length', false);
  assert.equal(listed.lines, 'Content-Length: 1\r\n');
  assert.deepEqual([listed.hasLength, listed.hasDate, listed.hasHsts], [true, false, false]);
  assert.equal(parseResponseHead('HTTP/1.1 200 OK\r\nStrict-Transport-Security: max-age=1', false).hasHsts, true);
  assert.deepEqual(parseResponseHead('HTTP/1.1 304 Not Modified\r\nETag: "x"', false).framing, { kind: 'length', length: 0 });
});

test('malformed origin heads are refused', () => {
  for (const head of ['HTTP/2 200 OK', 'HTTP/1.1 20 OK', 'HTTP/1.1 200 OK\r\nBad Line', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2', 'HTTP/1.1 200 OK\r\nContent-Length: -1', 'HTTP/1.1 200 OK\r\nX: a\rb', 'HTTP/1.1 200 OK\r\nX: a\0']) {
    assert.throws(() => parseResponseHead(head, false), OriginProtocolError, JSON.stringify(head));
  }
});

test('the byte scan of origin heads answers as the text parser does, or leaves the head to it', () => {
  const common = [
    'HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Thu, 26 Nov 2026 12:45:48 GMT\r\nContent-Type: text/plain\r\nContent-Length: 100\r\nLast-Modified: Wed, 25 Nov 2026 19:09:34 GMT\r\nConnection: keep-alive\r\nETag: "6b07326e-64"\r\nAccept-Ranges: bytes',
    'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nDate: Thu, 26 Nov 2026 12:45:48 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5',
    'HTTP/1.1 404 Not Found\r\nCONNECTION: Close\r\ncontent-length:0\r\nstrict-transport-security: max-age=1',
    'HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: Keep-Alive',
    'HTTP/1.0 200 OK\r\nContent-Length: 3',
    'HTTP/1.1 204 No Content\r\nX-A:\t a \t',
    'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x',
    'HTTP/1.1 200\r\nX-Latin: caf\xe9\r\nX-Empty:\r\nContent-Length: 007',
    'HTTP/1.1 100 Continue',
    'HTTP/1.1 200 OK',
  ];
  const others = [
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked',
    'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3',
    'HTTP/1.1 200 OK\r\nConnection: keep-alive, x-secret\r\nX-Secret: 1',
    'HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: close',
    'HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456',
    'HTTP/1.1 200 OK\r\n X-Folded: 1',
    'HTTP/1.1 204 No Content\r\nContent-Length: 0',
    'HTTP/1.1 103 Early Hints\r\nContent-Length: 0',
  ];
  const scanned = (head: string, bodyless: boolean): ResponseHead | null => scanResponseHead(Buffer.from(`${head}\r\n\r\nBODY`, 'latin1'), bodyless);
  const parsed = (head: string, bodyless: boolean): ResponseHead | Error => {
    try {
      return parseResponseHead(head, bodyless);
    } catch (err) {
      return err as Error;
    }
  };
  const agree = (head: string, bodyless: boolean): void => {
    const fast = scanned(head, bodyless);
    if (fast !== null) assert.deepEqual(fast, parsed(head, bodyless), JSON.stringify(head));
  };
  for (const bodyless of [false, true]) {
    for (const head of common) {
      assert.ok(scanned(head, bodyless), JSON.stringify(head));
      agree(head, bodyless);
      // Cut anywhere before its end, a head is not the scan's to decide.
      const wire = Buffer.from(`${head}\r\n\r\n`, 'latin1');
      for (let end = 0; end < wire.length; end++) assert.equal(scanResponseHead(wire.subarray(0, end), bodyless), null);
    }
    for (const head of others) assert.equal(scanned(head, bodyless), null, JSON.stringify(head));
    // Any byte changed to one that matters to a parser: the same answer, or the text parser's call.
    for (const head of [...common, ...others]) {
      for (let at = 0; at < head.length; at++) {
        for (const c of ['\0', '\r', '\n', ' ', '\t', ':', ',', 'A', '\xff']) agree(head.slice(0, at) + c + head.slice(at + 1), bodyless);
      }
    }
  }
});

test('chunked bodies decode across any split, with extensions and trailers; bad framing throws', () => {
  const wire = Buffer.from('5;name=v\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\nNEXT');
  for (let step = 1; step <= wire.length; step++) {
    const parts: Buffer[] = [];
    const d = new ChunkedDecoder((c) => parts.push(Buffer.from(c)));
    let used = 0;
    for (let at = 0; at < wire.length && !d.done; at += step) used += d.push(wire.subarray(at, Math.min(at + step, wire.length)));
    assert.equal(Buffer.concat(parts).toString(), 'hello world', `step ${step}`);
    assert.equal(d.done, true);
    assert.ok(used <= wire.length - 'NEXT'.length + step, `step ${step}`);
  }
  assert.equal(new ChunkedDecoder(() => undefined).push(Buffer.from('5\r\nhello\r\n0\r\n\r\nNEXT')), 15);
  for (const bad of ['z\r\n', '5\r\nhelloXX\r\n', '5\nhello']) assert.throws(() => new ChunkedDecoder(() => undefined).push(Buffer.from(bad)), OriginProtocolError, bad);
});

test('a head arriving a byte at a time is joined whole and found once complete, a split CRLF CRLF included', () => {
  const wire = Buffer.from('GET /x HTTP/1.1\r\nHost: a\r\nX-Long: ' + 'v'.repeat(5000) + '\r\n\r\nBODY');
  const end = wire.indexOf('\r\n\r\n');
  const p = new PartialHead();
  let buf: Buffer = wire.subarray(0, 1);
  let head = p.head(buf);
  for (let i = 1; i < wire.length && head === undefined; i++) {
    buf = p.append(buf, wire.subarray(i, i + 1));
    head = p.head(buf);
    if (buf.length < end + 4) assert.equal(head, undefined, `${buf.length} bytes`);
  }
  assert.equal(head, wire.toString('latin1', 0, end));
  assert.equal(buf.length, end + 4);
  // Bytes that did not come from append() are searched from their start, short and long ones.
  assert.equal(p.head(Buffer.from('a\r\n\r\nb')), 'a');
  assert.equal(headText(Buffer.from('x'.repeat(9000) + '\r\n\r\n')), 'x'.repeat(9000));
  assert.equal(headText(Buffer.from('x'.repeat(9000) + '\r\n\r')), undefined);
  assert.equal(headText(Buffer.from('\xff\r\n\r\n', 'latin1')), '\xff');
});

test('header names of the same length and first letter, in any case, each keep their own meaning', () => {
  // Same length and first character share a lookup bucket: each must still be told apart, the
  // second round from the names the first one kept.
  for (let round = 0; round < 2; round++) {
    const req = parseRequestHead('GET / HTTP/1.1\r\nHOST: a\r\nHosx: b\r\nContent-Lengtx: 7\r\nCONTENT-LENGTH: 3\r\nConnectiox: z\r\nCONNECTION: close');
    assert.ok(req);
    assert.deepEqual(req.rawHeaders, ['HOST', 'a', 'Hosx', 'b', 'Content-Lengtx', '7', 'CONTENT-LENGTH', '3', 'Connectiox', 'z', 'CONNECTION', 'close']);
    assert.equal(req.headers.host, 'a');
    assert.equal(req.headers['hosx'], 'b');
    assert.equal(req.contentLength, 3);
    assert.equal(req.close, true);
    const res = parseResponseHead('HTTP/1.1 200 OK\r\nConnectiox: z\r\nCONNECTION: keep-alive\r\nContent-Lengtx: 9\r\ncontent-length: 4', false);
    assert.deepEqual(headerList(res.lines), ['connectiox', 'z', 'content-lengtx', '9', 'content-length', '4']);
    assert.deepEqual(res.framing, { kind: 'length', length: 4 });
  }
  // More spellings than a bucket keeps: the ones beyond it are still read right.
  for (let i = 0; i < 40; i++) {
    const name = `X-${String(i).padStart(2, '0')}`;
    const req = parseRequestHead(`GET / HTTP/1.1\r\nHost: a\r\n${name}: ${i}`);
    assert.equal(req?.headers[name.toLowerCase()], String(i));
  }
});

test('a bare CR or LF anywhere in a head is refused, the status line included', () => {
  assert.equal(parseRequestHead('GET / HTTP/1.1\nHost: a'), undefined);
  assert.equal(parseRequestHead('GET / HTTP/1.1\r\nHost: a\rb'), undefined);
  assert.equal(parseRequestHead('GET / HTTP/1.1\r\nHost: a\nX: b'), undefined);
  for (const bad of ['HTTP/1.1 200 OK\nX: a', 'HTTP/1.1 200 O\rK\r\nX: a', 'HTTP/1.1 200 OK\r\nX: a\nY: b', 'HTTP/1.1 200 OK\r\nX: a\r']) {
    assert.throws(() => parseResponseHead(bad, false), OriginProtocolError, JSON.stringify(bad));
  }
});
