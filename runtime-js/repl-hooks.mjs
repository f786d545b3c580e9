// Module resolution hook of the Browser REPL (repl.mjs registers it): a bare
// specifier that the working folder cannot resolve (import('playwright-core')
// from /home/kernel) is resolved from runtime-js, where the packages are.
const HERE = new URL('./repl.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (e) {
    const bare = !/^(\.|\/|[a-z][a-z0-9+.-]*:)/i.test(specifier);
    if (e?.code !== 'ERR_MODULE_NOT_FOUND' || !bare) throw e;
    return next(specifier, { ...context, parentURL: HERE });
  }
}
