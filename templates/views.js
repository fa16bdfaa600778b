/* views.js — the views' registry. Each view is one file, templates/view_NAME.js
 * (page.html includes every view_*.js after this file), which ends with
 * Views.register({...}); page.js makes the tabs, keys 1..n, view sections and
 * control states from Views.list(), and nothing else names a view.
 *
 * An entry: id ('NAME': the tab, its section, --view NAME); order (its place
 * among the tabs, 1 first; keys 1..n follow it); label; diffOnly: true for a
 * view only pages of attnviz diff have; uses {layer, mode, heads, merge,
 * contrast}: the controls it reads (the others are hidden or disabled);
 * picksHead(mode): the head chips pick one head rather than toggle;
 * ownsLayers: it decodes layers itself (else the page waits for the shown
 * layer, and for the rollout when it uses the mode control); mergeNote: the
 * status line when it ignores "merge"; draw(host, c): the controller (or
 * null, or a promise of one), c being the render context page.js builds;
 * exportTitle(modelName, c); unavailable(): why this page cannot show it (its
 * tab is disabled), or null; drawHead(host, {li, h, t, filter, gamma}): one
 * head alone, for the model view's dialog (the head and matrix views);
 * attentionOnly: it explains the attention itself (the neuron view: softmax of
 * q·k), so the Attention / Norm-weighted switch (measure.js) does not apply;
 * allMeasures: it draws every measure itself (the Compare view), so a per-layer
 * measure does not set its heads aside.
 *
 * needs: 'MEMBER': the view draws that member of the document ('image': an
 * image run's picture; 'measures': a measure besides the attention, --measure),
 * so a page without it leaves the view's script out
 * (its tab is not there; as a diffOnly view's script is only on diff pages).
 *
 * The binary reads each file's `id: '...'`, `order: N`, `diffOnly: true` and
 * `needs: '...'` too, to check --view and to include only the views a page can
 * show (src/out/html.c: html_view_known, view_wanted): write them as literals,
 * id and order first in the entry. */
/* global Data */
/* exported Views */

const Views = (() => {
  const all = [];
  function register(v) {
    if (!v || typeof v.id !== 'string' || !/^[a-z][a-z0-9_-]*$/.test(v.id) || !(v.order > 0) ||
        typeof v.label !== 'string' || !v.uses || typeof v.draw !== 'function' || typeof v.picksHead !== 'function')
      throw new Error('Views.register: an entry needs id, order, label, uses, picksHead and draw' + (v && v.id ? ' (' + v.id + ')' : ''));
    const clash = all.find(o => o.id === v.id || o.order === v.order);
    if (clash) throw new Error('Views.register: ' + v.id + ' has the id or order of ' + clash.id);
    all.push(v);
  }
  /* this page's views in tab order (the diff-only ones on attnviz diff's pages) */
  function list() {
    return all.filter(v => !v.diffOnly || Data.second).sort((a, b) => a.order - b.order);
  }
  return { register, list };
})();
