// /assets/dagre.js is @dagrejs/dagre's ES module, served from its package (src/http/routes/dashboard.ts): its types.
export { default } from '@dagrejs/dagre';
