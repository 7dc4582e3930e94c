// Lint rules for the whole tree; the generated contracts are checked by their drift test instead.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', '.tools/**', '.cache/**', 'node_modules/**', 'src/contracts/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
);
