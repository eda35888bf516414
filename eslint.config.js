import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  // src/envd/gen/ and src/isolation/host/criu-gen/ are written by protoc-gen-es (npm run gen:envd,
  // gen:criu) and committed as generated.
  { ignores: ['dist/', 'node_modules/', 'test/fixtures/', 'src/envd/gen/', 'src/isolation/host/criu-gen/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: { globals: globals.node },
    rules: {
      // `_name` marks a value destructured away on purpose.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  {
    files: ['ui/**/*.js'],
    languageOptions: { globals: globals.browser },
    rules: {
      // Job output is written by whoever submitted the job: the page builds nodes and sets text.
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'srcdoc'].map((property) => ({ property, message: 'Build nodes and set textContent: shown data may be hostile.' })),
        { object: 'document', property: 'write', message: 'Build nodes and set textContent: shown data may be hostile.' },
      ],
    },
  },
  {
    // Programs that run inside sandboxes (src/util/guest-program.ts): CommonJS scripts for node,
    // run as a file or through `node -e`.
    files: ['src/**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: globals.node },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Tests read loosely typed JSON answers.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
);
