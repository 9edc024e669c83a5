/* text-imports.d.ts -- files esbuild bundles as text (the .proto). */
declare module '*.proto' {
    const text: string;
    export default text;
}
