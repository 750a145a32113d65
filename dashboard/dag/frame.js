// @ts-check
// The DAG page's graph: the drawing in a frame that pans and zooms, and its legend.
import { STATUS_ORDER, statusLabel } from '../graph.js';
import { h } from '../dom.js';
import Panzoom from '../panzoom.js';

/**
 * The drawing in a frame that pans (drag the background) and zooms (wheel, or the buttons), fitted to the
 * frame's width at first: a 3,000-task DAG is legible as a whole, then as a part.
 * @param {SVGSVGElement} svg
 */
export function pannable(svg) {
  const frame = h('div', { class: 'graph-frame' }, svg);
  const width = Number(svg.getAttribute('width'));
  const height = Number(svg.getAttribute('height'));
  // Panzoom measures the element: it starts once the frame is in the page.
  /** @type {import('@panzoom/panzoom').PanzoomObject | undefined} */
  let pz;
  const fit = () => {
    if (!pz) return;
    const scale = Math.min(1, Math.max(0.05, (frame.clientWidth - 8) / width));
    pz.zoom(scale, { animate: false });
    pz.pan(0, 0, { animate: false });
    frame.style.height = `${Math.min(Math.max(160, height * scale + 8), window.innerHeight * 0.7)}px`;
    svg.dataset.scale = String(scale);
  };
  /**
   * @param {string} label
   * @param {string} action
   * @param {() => void} fn
   */
  const button = (label, action, fn) => {
    const b = h('button', { type: 'button', class: 'small', 'data-action': action }, label);
    b.addEventListener('click', () => fn());
    return b;
  };
  const tools = h('div', { class: 'graph-tools' }, button('Fit', 'graph-fit', fit), button('+', 'graph-zoom-in', () => pz?.zoomIn()), button('−', 'graph-zoom-out', () => pz?.zoomOut()));
  requestAnimationFrame(() => {
    if (!frame.isConnected) return;
    const zoomer = Panzoom(svg, { maxScale: 4, minScale: 0.05, step: 0.2, excludeClass: 'panzoom-exclude', origin: '0 0' });
    pz = zoomer;
    frame.addEventListener('wheel', (ev) => zoomer.zoomWithWheel(ev));
    fit();
  });
  return h('div', null, tools, frame);
}

export function legend() {
  return h('div', { class: 'legend' },
    STATUS_ORDER.map((s) => h('span', { class: 'legend-item' }, h('span', { class: `swatch status-${s}` }), statusLabel(s))),
    h('span', { class: 'legend-item' }, h('span', { class: 'swatch critical' }), 'critical path'));
}
