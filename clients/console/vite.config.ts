import { defineConfig } from 'vite';

// Built into dist/ and served by the gateway under /console (services/gateway/src/console.ts):
// hashed files in dist/assets are cached for a year, index.html never.
export default defineConfig({
  base: '/console/',
  // Preact's automatic JSX runtime (tsconfig.json jsxImportSource); no plugin needed.
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    target: 'es2022',
    // The polyfill is not needed by the browsers we serve, and one file less to reason about under the CSP.
    modulePreload: { polyfill: false },
    // Everything inline would need 'unsafe-inline' or data: in the CSP; keep assets as files.
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
});
