// build.mjs -- bundles src/index.ts with esbuild: dist/tessera.mjs (ESM, for
// node and bundlers) and dist/tessera.js (an IIFE defining the global
// `Tessera`, for a page with no build step). proto/client.proto goes in as
// text; protobufjs and long.js go in too, so each file stands alone.
import * as esbuild from 'esbuild';

const common = {
    entryPoints: ['src/index.ts'],
    bundle: true,
    loader: { '.proto': 'text' },
    target: 'es2022',
    sourcemap: true,
    logLevel: 'warning',
    // protobufjs's optional require() of long.js: the SDK hands it long.js itself.
    logOverride: { 'direct-eval': 'silent' },
};

await esbuild.build({ ...common, format: 'esm', platform: 'neutral', mainFields: ['module', 'main'], outfile: 'dist/tessera.mjs' });
await esbuild.build({ ...common, format: 'iife', globalName: 'Tessera', platform: 'browser', outfile: 'dist/tessera.js' });
