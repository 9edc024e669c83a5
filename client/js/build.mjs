// build.mjs -- bundles src/index.ts with esbuild: dist/tessera.mjs (ESM, for
// node and bundlers) and dist/tessera.js (an IIFE defining the global
// `Tessera`, for a page with no build step), then the type declarations
// (dist/types/, from tsc). proto/client.proto goes in as text; protobufjs and
// long.js go in too, so each bundle stands alone.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import * as esbuild from 'esbuild';

const common = {
    entryPoints: ['src/index.ts'],
    bundle: true,
    loader: { '.proto': 'text' },
    target: 'es2022',
    sourcemap: true,
    logLevel: 'warning',
    // protobufjs looks for long.js with an eval'd require(); the SDK hands it long.js itself.
    logOverride: { 'direct-eval': 'silent' },
};

await esbuild.build({ ...common, format: 'esm', platform: 'neutral', mainFields: ['module', 'main'], outfile: 'dist/tessera.mjs' });
await esbuild.build({ ...common, format: 'iife', globalName: 'Tessera', platform: 'browser', outfile: 'dist/tessera.js' });

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '--noEmit', 'false', '--declaration', '--emitDeclarationOnly', '--outDir', 'dist/types'], {
    stdio: 'inherit',
});
