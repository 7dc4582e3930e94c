import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../core/app-error.ts';
import { createBearerCheck, type Envelope } from './api-envelope.ts';
import { createApiServer } from './http-api.ts';

const json = async (res: Response): Promise<Envelope<unknown>> => (await res.json()) as Envelope<unknown>;

async function withServer(codeOnSuccess: boolean, fn: (base: string) => Promise<void>): Promise<void> {
  const api = createApiServer({ codeOnSuccess, version: '1.0.0' });
  const check = createBearerCheck(() => 'a'.repeat(64));
  api.app.get('/ok', () => api.ok({ hello: 'world' }));
  api.app.post('/echo', (req) => api.ok({ body: req.body }));
  api.app.get('/missing', () => {
    throw new AppError('ERR_NOT_FOUND', 'unknown server', { status: 404 });
  });
  api.app.get('/boom', () => {
    throw new Error('secret detail');
  });
  api.app.get('/auth', (req, reply) => (check(req.headers.authorization) ? api.ok({}) : api.fail(reply, 401, 'ERR_UNAUTHORIZED', 'invalid token')));
  const base = await api.app.listen({ host: '127.0.0.1', port: 0 });
  try {
    await fn(base);
  } finally {
    await api.app.close();
  }
}

test('success envelope: node API style has meta.code "", panel style omits it', async () => {
  await withServer(true, async (base) => {
    const res = await fetch(`${base}/ok`);
    assert.equal(res.status, 200);
    assert.deepEqual(await json(res), { success: true, data: { hello: 'world' }, error: null, meta: { version: '1.0.0', code: '' } });
  });
  await withServer(false, async (base) => {
    assert.deepEqual((await json(await fetch(`${base}/ok`))).meta, { version: '1.0.0' });
  });
});

test('errors are envelopes: AppError, unknown route, malformed JSON, oversized body, internal; an empty JSON body is none', async () => {
  await withServer(true, async (base) => {
    const missing = await fetch(`${base}/missing`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await json(missing), { success: false, data: null, error: 'unknown server', meta: { version: '1.0.0', code: 'ERR_NOT_FOUND' } });

    const noRoute = await fetch(`${base}/nope`);
    assert.equal(noRoute.status, 404);
    assert.equal((await json(noRoute)).meta.code, 'ERR_NOT_FOUND');

    const bad = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":' });
    assert.equal(bad.status, 400);
    assert.deepEqual(await json(bad), { success: false, data: null, error: 'malformed JSON body', meta: { version: '1.0.0', code: 'ERR_BAD_REQUEST' } });

    const big = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ x: 'y'.repeat(1024 * 1024) }) });
    assert.equal(big.status, 413);
    assert.equal((await json(big)).success, false);

    const fine = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ x: 'y'.repeat(1000) }) });
    assert.equal(fine.status, 200);

    // An empty body labelled JSON is no body; prototype poisoning is still refused.
    const empty = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    assert.equal(empty.status, 200);
    assert.deepEqual((await json(empty)).data, {});
    assert.equal((await fetch(`${base}/nope`, { method: 'DELETE', headers: { 'content-type': 'application/json' } })).status, 404);
    const poisoned = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"__proto__": {"x": 1}}' });
    assert.equal(poisoned.status, 400);

    const boom = await fetch(`${base}/boom`);
    assert.equal(boom.status, 500);
    const body = await json(boom);
    assert.equal(body.meta.code, 'ERR_INTERNAL');
    assert.ok(!JSON.stringify(body).includes('secret detail'));
  });
});

test('bearer check: right token only, whatever the length of a wrong one', async () => {
  await withServer(true, async (base) => {
    const status = async (auth?: string) => (await fetch(`${base}/auth`, auth ? { headers: { authorization: auth } } : {})).status;
    assert.equal(await status(`Bearer ${'a'.repeat(64)}`), 200);
    assert.equal(await status(), 401);
    assert.equal(await status('Bearer short'), 401);
    assert.equal(await status(`Bearer ${'a'.repeat(65)}`), 401);
    assert.equal(await status(`Bearer ${'a'.repeat(63)}b`), 401);
    assert.equal(await status(`Basic ${'a'.repeat(64)}`), 401);
  });
  const empty = createBearerCheck(() => '');
  assert.equal(empty('Bearer '), false);
});

test('a close waits for an answer under way, then closes its kept-alive connection at once instead of waiting it out', async () => {
  const api = createApiServer({ codeOnSuccess: true, version: '1.0.0' });
  let release: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    api.app.get('/slow', async () => {
      resolve();
      await new Promise<void>((r) => (release = r));
      return api.ok({ done: true });
    });
  });
  const base = await api.app.listen({ host: '127.0.0.1', port: 0 });
  const answer = fetch(`${base}/slow`);
  await started;
  const t0 = performance.now();
  const closed = api.app.close();
  setTimeout(() => release(), 50);
  assert.equal((await answer).status, 200, 'the request under way is answered');
  await closed;
  const took = performance.now() - t0;
  assert.ok(took < 2000, `closed after ${Math.round(took)} ms; a kept-alive connection is held 72 s`);
});
