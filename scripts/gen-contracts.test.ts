import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateContracts, OUT_DIR } from './gen-contracts.ts';

test('src/contracts matches what schemas/ generates (run `make gen` after a schema change)', async () => {
  for (const [name, content] of await generateContracts()) {
    const committed = readFileSync(join(OUT_DIR, name), 'utf8');
    assert.ok(committed === content, `src/contracts/${name} is out of date with schemas/: run \`make gen\``);
  }
});
