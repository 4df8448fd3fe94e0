// ESLint's flat config: ESLint's and typescript-eslint's recommended rules with type information, tuned to this code.
import js from '@eslint/js'
import { defineConfig } from 'eslint/config'
import tseslint from 'typescript-eslint'

export default defineConfig(
  { ignores: ['dist/', 'coverage/', 'bench/results/', 'scratch/'] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules: {
      // An async function without await still turns a throw into a rejection, which callers of a Promise API expect.
      '@typescript-eslint/require-await': 'off',
      // Interfaces here declare methods whose implementations are bound (ctx's getters, arrow properties), and pg's
      // overloaded methods are wrapped with super's method called on `this`: every report was such a false alarm.
      '@typescript-eslint/unbound-method': 'off',
      // A leading underscore names what is unused on purpose (a destructured-away field, a handler's first argument).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // The dashboard's browser code is type-checked with the DOM's types by a tsconfig of its own (the rest has none).
    files: ['src/dashboard/ui/**/*.{ts,tsx}'],
    languageOptions: { parserOptions: { project: './src/dashboard/ui/tsconfig.json' } },
  },
  {
    // The project's file size: a room much larger than its neighbours is asking to be split. Lines of code, so that
    // neither the formatter's wrapping nor a comment that says why pushes a file over.
    files: ['src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 300, skipBlankLines: true, skipComments: true }] },
  },
  {
    // Tests read columns straight off pg's rows, which pg types as `any`.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  { files: ['**/*.js'], extends: [tseslint.configs.disableTypeChecked] },
)
