// /assets/panzoom.js is @panzoom/panzoom's ES module, served from its package (src/http/routes/dashboard.ts): its types.
export { default } from '@panzoom/panzoom';
