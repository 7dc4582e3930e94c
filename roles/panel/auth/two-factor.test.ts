/**
 * Two-factor rules that depend on the store's answers: a recovery code used by two requests at
 * once over an asynchronous store passes only the request that deleted it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateSync } from 'otplib';
import { createUser } from '../services/users.ts';
import { createTestContext } from '../test-context.ts';
import { beginEnrolment, enableTwoFactor, verifySecondFactor } from './two-factor.ts';

describe('panel two-factor authentication', () => {
  it('passes only one of two requests that use the same recovery code at once', async () => {
    const ctx = createTestContext();
    const created = await createUser(ctx, { username: 'racer', email: 'racer@example.test', password: 'long enough' });
    const { secret } = await beginEnrolment(ctx, created);
    const enrolling = (await ctx.store.users.find(created.id))!;
    const [code] = await enableTwoFactor(ctx, enrolling, generateSync({ secret }));
    const user = (await ctx.store.users.find(created.id))!;

    // Both lookups answer before either delete runs, as two requests on a slower store can.
    const repo = ctx.store.recoveryTokens;
    const findBy = repo.findBy.bind(repo);
    let release: () => void = () => undefined;
    const bothLooked = new Promise<void>((resolve) => (release = resolve));
    let lookups = 0;
    repo.findBy = async (filter) => {
      const row = await findBy(filter);
      if (++lookups === 2) release();
      await bothLooked;
      return row;
    };

    const passed = await Promise.all([verifySecondFactor(ctx, user, code ?? ''), verifySecondFactor(ctx, user, code ?? '')]);
    assert.deepEqual(passed.sort(), [false, true], 'the code signs in once');
    assert.equal(await verifySecondFactor(ctx, user, code ?? ''), false);
  });
});
