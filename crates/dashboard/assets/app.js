// FerroMQ dashboard: a single-page app over rocketmq-dashboard's JSON API, served by the
// `ferromq` binary. Plain ES2020, no framework, no build step, nothing fetched from elsewhere.
// Pages are routed by the location hash (#/topic, #/message?msgId=...). Every element a
// browser test needs carries a `data-test` attribute.
'use strict';

// ---------------------------------------------------------------------------------------------
// DOM helpers

/** `h('div', {class: 'x', test: 'y', onclick: f}, child...)`: an element. */
function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

const SVG_NS = 'http://www.w3.org/2000/svg';
/** An SVG element, attributes and children as with `h`. */
function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'test') el.setAttribute('data-test', v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled') el[k] = v;
    else if (k === 'style') el.style.cssText = v; // through the CSSOM: allowed by a strict CSP
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// ---------------------------------------------------------------------------------------------
// Formatting

const NUM = new Intl.NumberFormat('en-US');
const pad2 = (n) => String(n).padStart(2, '0');

/** A count with thousands separators; '-' when not a number. */
function fmtNum(n) {
  const v = typeof n === 'string' ? Number(n) : n;
  return typeof v === 'number' && Number.isFinite(v) ? NUM.format(v) : '-';
}

/** A rate with two decimals at most. */
function fmtTps(v) {
  return Number.isFinite(v) ? (Math.round(v * 100) / 100).toString() : '-';
}

/** Milliseconds since the epoch (or an ISO string) as local `YYYY-MM-DD HH:MM:SS`; '-' if unset. */
function fmtTime(t) {
  const ms = typeof t === 'string' ? (/^\d+$/.test(t) ? Number(t) : Date.parse(t)) : t;
  if (!Number.isFinite(ms) || ms <= 0) return '-';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

function fmtClock(ms, seconds = true) {
  const d = new Date(ms);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}` + (seconds ? `:${pad2(d.getSeconds())}` : '');
}

/** The value of an `<input type=datetime-local>` for `ms`. */
function toLocalInput(ms) {
  return fmtTime(ms).replace(' ', 'T');
}

/** An `<input type=datetime-local>` value as ms (read as local time); NaN when blank. */
function fromLocalInput(v) {
  return v ? new Date(v).getTime() : NaN;
}

/** The first figure of a runtime TPS value (`"12.50 11.90 10.00"`: one per time window). */
function firstTps(v) {
  const n = parseFloat(String(v || '').trim().split(/\s+/)[0]);
  return Number.isFinite(n) ? n : 0;
}

/** `a - b` of two numeric strings, or null when either is missing. */
function diffKv(kv, a, b) {
  if (!kv || kv[a] === undefined || kv[b] === undefined) return null;
  const d = Number(kv[a]) - Number(kv[b]);
  return Number.isFinite(d) ? d : null;
}

function permText(perm) {
  const p = Number(perm);
  const t = (p & 4 ? 'R' : '') + (p & 2 ? 'W' : '');
  return `${p} (${t || 'none'})`;
}

/** `MessageQueue [topic=T, brokerName=broker-a, queueId=0]` as `{brokerName, queueId}`. */
function parseQueueKey(key) {
  const topic = /topic=([^,\]]*)/.exec(key);
  const broker = /brokerName=([^,\]]*)/.exec(key);
  const queue = /queueId=(\d+)/.exec(key);
  return { topic: topic ? topic[1] : '', brokerName: broker ? broker[1] : key, queueId: queue ? Number(queue[1]) : -1 };
}

const byQueue = (a, b) => String(a.brokerName).localeCompare(String(b.brokerName)) || a.queueId - b.queueId;

/** A message's tags and keys (they live in its properties). */
const msgTags = (m) => (m.properties && m.properties.TAGS) || '';
const msgKeys = (m) => (m.properties && m.properties.KEYS) || '';

/** Hex dump (offset, 16 bytes, ASCII) of the UTF-8 bytes of `text`. */
function hexDump(text, limit = 65536) {
  const bytes = new TextEncoder().encode(text);
  const lines = [];
  for (let i = 0; i < Math.min(bytes.length, limit); i += 16) {
    const chunk = Array.from(bytes.subarray(i, Math.min(i + 16, bytes.length)));
    const hex = chunk.map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = chunk.map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > limit) lines.push(`... ${fmtNum(bytes.length - limit)} more bytes`);
  return lines.join('\n') || '(empty)';
}

// ---------------------------------------------------------------------------------------------
// The API: `{"status":0,"data":...}`, failures `{"status":-1,"errMsg":...}` with HTTP 200.

class ApiError extends Error {}

/**
 * Calls `path`. `query` goes to the URL (also for POST, as @RequestParam wants), `body` is
 * sent as JSON (and makes the call a POST). Resolves to `data`; rejects with an ApiError
 * carrying `errMsg` (or what went wrong on the way).
 */
async function api(path, { query, body, method } = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) q.append(k, String(v));
    const qs = q.toString();
    if (qs) url += '?' + qs;
  }
  const init = { method: method || (body !== undefined ? 'POST' : 'GET'), headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (e) {
    throw new ApiError(`The dashboard server cannot be reached (${path}): ${e.message}`);
  }
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ApiError(`${path} answered HTTP ${response.status} without JSON: ${text.slice(0, 200)}`);
  }
  if (json && typeof json === 'object' && 'status' in json) {
    if (json.status !== 0) throw new ApiError(json.errMsg || `${path} failed (status ${json.status})`);
    return json.data;
  }
  throw new ApiError(`${path} answered HTTP ${response.status} with an unexpected body`);
}

/** Shows `error` to the user (and logs it as a warning, which the browser test watches). */
function showError(error, context) {
  const msg = (error && error.message) || String(error);
  const text = context ? `${context}: ${msg}` : msg;
  console.warn('FerroMQ dashboard error:', text);
  toast(text, 'error');
}

/** `api(...)`, with a failure shown to the user; resolves to undefined then. */
async function tryApi(path, options, context) {
  try {
    return await api(path, options);
  } catch (e) {
    showError(e, context);
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Toasts, dialogs, tables

/** A toast; the same text shown again while visible bumps a counter instead of stacking. */
function toast(text, kind = 'error') {
  const box = $('#toasts');
  const life = kind === 'error' ? 9000 : 4000;
  const existing = $$('.toast', box).find((t) => t.dataset.msg === text);
  if (existing) {
    existing.dataset.count = String(Number(existing.dataset.count || 1) + 1);
    $('.count', existing).textContent = ` (×${existing.dataset.count})`;
    clearTimeout(existing.timer);
    existing.timer = setTimeout(() => existing.remove(), life);
    return;
  }
  const el = h('div', { class: `toast ${kind}`, role: kind === 'error' ? 'alert' : 'status', test: `toast-${kind}` },
    h('div', { style: 'flex:1' }, text, h('span', { class: 'count' })),
    h('button', { class: 'icon-btn', 'aria-label': 'Dismiss', onclick: () => el.remove() }, '×'));
  el.dataset.msg = text;
  el.timer = setTimeout(() => el.remove(), life);
  box.append(el);
  while (box.children.length > 5) box.firstChild.remove();
}

/**
 * Opens a dialog. `body` is a node (or nodes); `actions` buttons go to its footer.
 * Returns `{el, body, close, setBody}`.
 */
const openDialogs = new Set();

function modal(title, body, { test, wide, actions, onClose } = {}) {
  const overlay = h('div', { class: 'overlay' });
  const bodyEl = h('div', { class: 'dialog-body' }, body);
  const close = () => {
    if (!openDialogs.delete(close)) return;
    overlay.remove();
    document.removeEventListener('keydown', onKey);
    if (onClose) onClose();
  };
  const onKey = (e) => {
    if (e.key === 'Escape' && $('#modals').lastElementChild === overlay) close();
  };
  const el = h('div', { class: 'dialog' + (wide ? ' wide' : ''), role: 'dialog', 'aria-modal': 'true', 'aria-label': title, test },
    h('div', { class: 'dialog-head' }, h('h2', null, title),
      h('button', { class: 'icon-btn', 'aria-label': 'Close', test: 'dialog-close', onclick: close }, '×')),
    bodyEl,
    actions && actions.length ? h('div', { class: 'dialog-foot' }, actions) : null);
  overlay.append(el);
  overlay.addEventListener('mousedown', (e) => {
    if (e.target === overlay) close();
  });
  document.addEventListener('keydown', onKey);
  openDialogs.add(close);
  $('#modals').append(overlay);
  return { el, body: bodyEl, close, setBody: (...nodes) => bodyEl.replaceChildren(...nodes.flat().filter(Boolean)) };
}

/**
 * A dialog whose content `load()` fetches: "Loading…" first, then its nodes, or the error
 * (also toasted). Marks the dialog `data-ready` once settled.
 */
function modalLoading(title, test, load, options = {}) {
  const dlg = modal(title, h('div', { class: 'loading' }, 'Loading…'), { test, ...options });
  const run = async () => {
    dlg.el.removeAttribute('data-ready');
    try {
      const content = await load(dlg);
      if (dlg.el.isConnected) dlg.setBody(content);
    } catch (e) {
      showError(e, title);
      if (dlg.el.isConnected) dlg.setBody(h('div', { class: 'error-box', test: 'dialog-error' }, e.message));
    }
    dlg.el.dataset.ready = '1';
  };
  dlg.reload = run;
  run();
  return dlg;
}

/** A yes/no dialog; resolves true when confirmed. */
function confirmDialog(title, message, { okText = 'Confirm', danger = true } = {}) {
  return new Promise((resolve) => {
    let answered = false;
    const ok = h('button', { class: 'btn ' + (danger ? 'btn-danger solid' : 'btn-primary'), test: 'confirm-ok',
      onclick: () => { answered = true; dlg.close(); resolve(true); } }, okText);
    const cancel = h('button', { class: 'btn', test: 'confirm-cancel', onclick: () => dlg.close() }, 'Cancel');
    const dlg = modal(title, h('p', null, message), { test: 'confirm-dialog', actions: [cancel, ok],
      onClose: () => { if (!answered) resolve(false); } });
    ok.focus();
  });
}

/**
 * A table. `cols`: `[{t: title, v: row => text|node, num: bool, cls}]`. Options: `test` on the
 * table, `rowTest` and `rowName(row)` (data-name) on rows, `onRow(row)` for clickable rows.
 */
function table(cols, rows, { test, rowTest, rowName, onRow, empty = 'No data', rowAttrs } = {}) {
  const head = h('tr', null, cols.map((c) => h('th', { class: c.num || /\bnum\b/.test(c.cls || '') ? 'num' : null }, c.t)));
  const body = h('tbody');
  if (!rows.length) body.append(h('tr', { class: 'empty' }, h('td', { colspan: cols.length }, empty)));
  for (const r of rows) {
    const tr = h('tr', { test: rowTest, 'data-name': rowName ? rowName(r) : null, class: onRow ? 'clickable' : null,
      ...(rowAttrs ? rowAttrs(r) : {}) },
    cols.map((c) => {
      const v = c.v(r);
      const shown = v === null || v === undefined || v === '' ? '-' : c.num && typeof v === 'number' ? fmtNum(v) : v;
      return h('td', { class: [c.num ? 'num' : '', c.cls || ''].join(' ').trim() || null, test: c.test,
        'data-value': c.dv ? c.dv(r) : c.num && typeof v === 'number' ? v : null }, shown);
    }));
    if (onRow) {
      tr.addEventListener('click', (e) => {
        if (!e.target.closest('button, a, input, label')) onRow(r);
      });
    }
    body.append(tr);
  }
  return h('div', { class: 'table-wrap' }, h('table', { class: 'grid', test }, h('thead', null, head), body));
}

/** A key/value table of a flat object, sorted by key, with a filter box when it is long. */
function kvTable(obj, test) {
  const entries = Object.entries(obj || {}).sort(([a], [b]) => a.localeCompare(b));
  const render = (filter) => table(
    [{ t: 'Key', v: ([k]) => k, cls: 'mono' }, { t: 'Value', v: ([, v]) => (typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)), cls: 'break mono' }],
    entries.filter(([k, v]) => !filter || k.toLowerCase().includes(filter) || String(v).toLowerCase().includes(filter)),
    { test, rowTest: 'kv-row', rowName: ([k]) => k });
  if (entries.length <= 15) return render('');
  const holder = h('div', null, render(''));
  const input = h('input', { type: 'search', placeholder: `Filter ${entries.length} entries`, test: 'kv-filter',
    oninput: () => holder.replaceChildren(render(input.value.trim().toLowerCase())) });
  return h('div', null, h('div', { class: 'toolbar' }, input), holder);
}

/** Label/value pairs laid out in a grid. */
function kvGrid(pairs, test) {
  return h('div', { class: 'kv-grid', test }, pairs.map(([k, v]) =>
    h('div', { 'data-name': k }, h('span', { class: 'k' }, k), h('span', { class: 'v' }, v === null || v === undefined || v === '' ? '-' : v))));
}

function button(text, onclick, { test, kind, small = true, title, disabled } = {}) {
  return h('button', { class: ['btn', small ? 'btn-sm' : '', kind ? `btn-${kind}` : ''].join(' ').trim(), test, title, disabled,
    type: 'button', onclick: async (e) => {
      const b = e.currentTarget;
      b.disabled = true;
      try {
        await onclick(e);
      } catch (err) {
        showError(err);
      } finally {
        b.disabled = false;
      }
    } }, text);
}

/** Checkboxes for `values`; `.selected()` lists the checked ones. */
function checkGroup(values, checked, { test, onchange, labels } = {}) {
  const boxes = values.map((v) => h('input', { type: 'checkbox', value: v, checked: checked.includes(v),
    test: typeof test === 'function' ? test(v) : test, onchange }));
  const el = h('div', { class: 'checks' }, boxes.map((b, i) => h('label', null, b, labels ? labels[i] : b.value)));
  el.selected = () => boxes.filter((b) => b.checked).map((b) => b.value);
  return el;
}

function selectBox(options, value, attrs = {}) {
  return h('select', attrs, options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value }, label);
  }));
}

function badge(text, kind) {
  return h('span', { class: `badge ${kind || ''}`.trim() }, text);
}

function statusBadge(ok, yes = 'success', no = 'failed') {
  return badge(ok ? yes : no, ok ? 'ok' : 'bad');
}

/** A datalist of topic names (for topic inputs that also accept free text). */
async function topicDatalist(id) {
  const list = h('datalist', { id });
  const data = await tryApi('/topic/list.query', { query: { skipSysProcess: true } }, 'Loading topics');
  if (data && data.topicList) {
    list.append(...data.topicList.slice().sort().map((t) => h('option', { value: t })));
  }
  return list;
}

// ---------------------------------------------------------------------------------------------
// Line chart (SVG): time on x, several series, grid, time labels, legend and a hover read-out.

const PALETTE = ['#2563eb', '#b7410e', '#16a34a', '#9333ea', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d', '#dc2626'];

function niceCeil(v) {
  if (v <= 0) return 1;
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * e >= v) return m * e;
  return 10 * e;
}

function fmtAxis(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(v % 1e6 ? 1 : 0) + 'M';
  if (v >= 1e4) return (v / 1e3).toFixed(v % 1e3 ? 1 : 0) + 'k';
  return String(Math.round(v * 100) / 100);
}

const TIME_STEPS = [5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5];

/**
 * Draws `series` (`[{name, points: [[ms, value], ...]}]`) into `holder`, replacing what it
 * held. Sets `data-points` (points drawn), `data-max` (largest value) and `data-last` (newest
 * time) on `holder`.
 */
function drawLineChart(holder, series, { unit = 'msg/s', height = 240, empty = 'No data yet' } = {}) {
  // Drawn at the holder's pixel width, so that text keeps its size (redrawn on every poll).
  const W = Math.max(320, Math.round(holder.clientWidth || 800)), H = height, M = { l: 50, r: 14, t: 12, b: 26 };
  let points = 0, max = 0, t0 = Infinity, t1 = -Infinity;
  for (const sr of series) {
    for (const [t, v] of sr.points) {
      points++;
      if (v > max) max = v;
      if (t < t0) t0 = t;
      if (t > t1) t1 = t;
    }
  }
  holder.classList.add('chart-box');
  holder.dataset.points = String(points);
  holder.dataset.max = String(max);
  holder.dataset.last = String(points ? t1 : 0);
  if (!points) {
    holder.replaceChildren(h('div', { class: 'chart-empty' }, empty));
    return;
  }
  if (t1 - t0 < 60000) t0 = t1 - 60000;
  const ymax = niceCeil(max);
  const x = (t) => M.l + ((t - t0) / (t1 - t0)) * (W - M.l - M.r);
  const y = (v) => H - M.b - (v / ymax) * (H - M.t - M.b);
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': `${series.map((x) => x.name).join(', ')} (${unit})` });
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    svg.append(s('line', { class: 'grid-line', x1: M.l, x2: W - M.r, y1: y(v), y2: y(v) }),
      s('text', { x: M.l - 6, y: y(v) + 4, 'text-anchor': 'end' }, fmtAxis(v)));
  }
  const step = TIME_STEPS.find((st) => (t1 - t0) / st <= Math.max(3, Math.floor(W / 110))) || 36e5 * 4;
  const offset = new Date().getTimezoneOffset() * 60000; // round ticks in local time
  for (let t = Math.ceil((t0 - offset) / step) * step + offset; t <= t1; t += step) {
    const at = x(t);
    const anchor = at > W - 30 ? 'end' : at < M.l + 25 ? 'start' : 'middle';
    svg.append(s('line', { class: 'axis', x1: at, x2: at, y1: H - M.b, y2: H - M.b + 4 }),
      s('text', { x: anchor === 'end' ? W - 2 : at, y: H - M.b + 16, 'text-anchor': anchor }, fmtClock(t, step < 60000)));
  }
  svg.append(s('line', { class: 'axis', x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b }),
    s('text', { x: 12, y: H / 2, 'text-anchor': 'middle', transform: `rotate(-90 12 ${H / 2})` }, unit));
  series.forEach((sr, i) => {
    const color = PALETTE[i % PALETTE.length];
    if (sr.points.length === 1) {
      const [t, v] = sr.points[0];
      svg.append(s('circle', { cx: x(t), cy: y(v), r: 3, fill: color }));
    } else {
      svg.append(s('polyline', { fill: 'none', stroke: color, 'stroke-width': 1.8, 'stroke-linejoin': 'round',
        points: sr.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ') }));
    }
  });
  // Hover: a cursor line and the values nearest in time.
  const cursor = s('line', { class: 'cursor', y1: M.t, y2: H - M.b, visibility: 'hidden' });
  const tip = h('div', { class: 'tip', hidden: true });
  svg.append(cursor);
  svg.addEventListener('mousemove', (e) => {
    const r = svg.getBoundingClientRect();
    const px = ((e.clientX - r.left) / r.width) * W;
    if (px < M.l || px > W - M.r) return hide();
    const t = t0 + ((px - M.l) / (W - M.l - M.r)) * (t1 - t0);
    const rows = series.map((sr, i) => [sr, i, nearest(sr.points, t)]).filter(([, , p]) => p);
    if (!rows.length) return hide();
    const at = rows[0][2][0];
    cursor.setAttribute('x1', x(at));
    cursor.setAttribute('x2', x(at));
    cursor.setAttribute('visibility', 'visible');
    tip.replaceChildren(h('div', null, h('b', null, fmtTime(at))),
      rows.map(([sr, i, p]) => h('div', null, h('i', { style: `background:${PALETTE[i % PALETTE.length]}` }), `${sr.name}: ${fmtTps(p[1])}`)));
    tip.hidden = false;
    const left = e.clientX - holder.getBoundingClientRect().left;
    tip.style.left = `${Math.min(left + 14, holder.clientWidth - tip.offsetWidth - 4)}px`;
    tip.style.top = '8px';
  });
  const hide = () => {
    cursor.setAttribute('visibility', 'hidden');
    tip.hidden = true;
  };
  svg.addEventListener('mouseleave', hide);
  const legend = h('div', { class: 'legend' }, series.map((sr, i) => {
    const last = sr.points.length ? sr.points[sr.points.length - 1][1] : 0;
    return h('span', null, h('i', { style: `background:${PALETTE[i % PALETTE.length]}` }), `${sr.name} `, h('b', null, fmtTps(last)));
  }));
  holder.replaceChildren(svg, tip, legend);
}

/** The point of a time-sorted series nearest to `t`. */
function nearest(points, t) {
  if (!points.length) return null;
  let lo = 0, hi = points.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (points[mid][0] < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(points[lo - 1][0] - t) < Math.abs(points[lo][0] - t)) lo--;
  return points[lo];
}

// ---------------------------------------------------------------------------------------------
// Router: `#/<page>?<params>`. A page renders into its root; `ctx.alive` turns false when the
// user leaves, `ctx.onLeave(f)` registers clean-ups, `ctx.poll(f, ms)` polls while alive.

const PAGES = {};
let current = null;

function route() {
  const m = /^#\/([a-z]+)(?:\?(.*))?$/.exec(location.hash);
  const name = m && PAGES[m[1]] ? m[1] : null;
  if (!name) {
    location.replace('#/dashboard'); // fires hashchange, which renders it
    return;
  }
  if (current) {
    current.alive = false;
    current.cleanups.forEach((f) => f());
  }
  for (const close of Array.from(openDialogs)) close();
  const ctx = {
    name, alive: true, cleanups: [], params: new URLSearchParams(m[2] || ''),
    onLeave(f) { this.cleanups.push(f); },
    ready() { root.dataset.ready = '1'; },
    poll(f, ms) {
      let timer = null;
      const tick = async () => {
        if (!ctx.alive) return;
        if (!document.hidden) await f();
        if (ctx.alive) timer = setTimeout(tick, ms);
      };
      ctx.onLeave(() => clearTimeout(timer));
      return tick();
    },
  };
  current = ctx;
  for (const a of $$('#nav a')) a.classList.toggle('active', a.getAttribute('href') === `#/${name}`);
  const root = h('section', { class: 'page', test: `page-${name}` });
  $('#main').replaceChildren(root);
  document.title = `${PAGES[name].title} · FerroMQ Dashboard`;
  Promise.resolve().then(() => PAGES[name].render(root, ctx)).catch((e) => showError(e, PAGES[name].title));
}

function pageHead(title, ...right) {
  return h('div', { class: 'page-head' }, h('h1', null, title), h('div', { class: 'toolbar', style: 'margin:0' }, right));
}

function updatedLabel() {
  const el = h('span', { class: 'updated', test: 'updated-at' });
  el.touch = () => { el.textContent = `Updated ${fmtClock(Date.now())} · refreshes every 5 s`; };
  return el;
}

// ---------------------------------------------------------------------------------------------
// Brokers from /cluster/list.query, one row per broker member.

function brokerMembers(data) {
  const info = (data && data.clusterInfo) || {};
  const addrTable = info.brokerAddrTable || {};
  const clusterTable = info.clusterAddrTable || {};
  const servers = (data && data.brokerServer) || {};
  const rows = [];
  const seen = new Set();
  const add = (cluster, brokerName) => {
    seen.add(brokerName);
    const addrs = (addrTable[brokerName] && addrTable[brokerName].brokerAddrs) || {};
    const ids = new Set([...Object.keys(addrs), ...Object.keys(servers[brokerName] || {})]);
    for (const id of Array.from(ids).sort((a, b) => Number(a) - Number(b))) {
      rows.push({ cluster, brokerName, id: Number(id), addr: addrs[id] || '', kv: (servers[brokerName] || {})[id] || {} });
    }
  };
  for (const c of Object.keys(clusterTable).sort()) for (const b of (clusterTable[c] || []).slice().sort()) add(c, b);
  for (const b of Object.keys(addrTable).sort()) if (!seen.has(b)) add(addrTable[b].cluster || '-', b);
  return rows;
}

const roleOf = (m) => (m.id === 0 ? badge('MASTER', 'info') : badge('SLAVE'));
const todayIn = (kv) => diffKv(kv, 'msgPutTotalTodayNow', 'msgPutTotalTodayMorning');
const todayOut = (kv) => diffKv(kv, 'msgGetTotalTodayNow', 'msgGetTotalTodayMorning');
const yesterdayIn = (kv) => diffKv(kv, 'msgPutTotalTodayMorning', 'msgPutTotalYesterdayMorning');
const yesterdayOut = (kv) => diffKv(kv, 'msgGetTotalTodayMorning', 'msgGetTotalYesterdayMorning');

// ---------------------------------------------------------------------------------------------
// Dashboard

PAGES.dashboard = { title: 'Dashboard', render: async (root, ctx) => {
  const updated = updatedLabel();
  const stats = h('div', { class: 'stats', test: 'dashboard-stats' });
  const brokerChart = h('div', { test: 'chart-broker-tps' });
  const topTopics = h('div', { test: 'top-topics' });
  const notCharted = h('p', { class: 'note' });
  const today = h('div', { test: 'broker-today' });
  const topicSelect = h('select', { test: 'topic-chart-select', onchange: () => { topicSelect.dataset.picked = '1'; drawTopic(); } });
  const topicChart = h('div', { test: 'chart-topic-tps' });
  root.append(pageHead('Dashboard', updated), stats,
    h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Broker TPS, last hour'),
      h('span', { class: 'hint' }, 'messages put (in) and got (out) per second, per broker')), brokerChart),
    h('div', { class: 'grid2' },
      h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Top 10 topics by put TPS')), topTopics, notCharted),
      h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Messages per broker')), today)),
    h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Topic TPS, last hour'),
      h('label', { class: 'hint' }, 'Topic ', topicSelect)), topicChart));

  let series = null;
  const drawTopic = () => {
    const name = topicSelect.value;
    const pts = (series && series.topics && series.topics[name]) || [];
    drawLineChart(topicChart, name ? [
      { name: `${name} in`, points: pts.map((p) => [p[0], p[1]]) },
      { name: `${name} out`, points: pts.map((p) => [p[0], p[2]]) },
    ] : [], { height: 220, empty: 'No topic traffic recorded yet' });
  };

  const drawSeries = (sr) => {
    series = sr;
    const brokers = Object.keys(sr.brokers || {}).sort();
    drawLineChart(brokerChart, brokers.flatMap((b) => [
      { name: `${b} in`, points: sr.brokers[b].map((p) => [p[0], p[1]]) },
      { name: `${b} out`, points: sr.brokers[b].map((p) => [p[0], p[2]]) },
    ]), { empty: 'No samples yet: the dashboard samples the brokers every few seconds' });

    const topics = Object.entries(sr.topics || {}).map(([name, pts]) => {
      const last = pts.length ? pts[pts.length - 1] : [0, 0, 0];
      return { name, in: last[1] || 0, out: last[2] || 0 };
    });
    const top = topics.filter((t) => t.in > 0 || t.out > 0)
      .sort((a, b) => b.in - a.in || b.out - a.out || a.name.localeCompare(b.name)).slice(0, 10);
    const maxIn = Math.max(0, ...top.map((t) => t.in));
    topTopics.replaceChildren(table([
      { t: '#', v: (t) => String(top.indexOf(t) + 1) },
      { t: 'Topic', v: (t) => h('a', { href: '#/dashboard', title: 'Chart this topic below',
        onclick: (e) => { e.preventDefault(); topicSelect.value = t.name; topicSelect.dataset.picked = '1'; drawTopic(); } }, t.name) },
      { t: 'Put TPS', v: (t) => fmtTps(t.in), num: true },
      { t: 'Get TPS', v: (t) => fmtTps(t.out), num: true },
      { t: '', v: (t) => h('div', { class: 'bar', style: 'width:120px' }, h('div', { style: `width:${maxIn ? (t.in / maxIn) * 100 : 0}%` })) },
    ], top, { test: 'top-topics-table', rowTest: 'top-topic-row', rowName: (t) => t.name, empty: 'No topic has traffic right now' }));
    notCharted.textContent = sr.topicsNotCharted > 0 ? `${sr.topicsNotCharted} more topics are not charted.` : '';

    const names = topics.map((t) => t.name).sort();
    const keep = topicSelect.value;
    if (topicSelect.dataset.names !== names.join('\n')) {
      topicSelect.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
      topicSelect.dataset.names = names.join('\n');
    }
    // Until the user picks a topic, the chart follows the busiest one.
    const busiest = top[0] ? top[0].name : names.includes(keep) ? keep : names.find((n) => !/^(%|rmq_sys_|RMQ_SYS_)/.test(n)) || names[0] || '';
    topicSelect.value = topicSelect.dataset.picked && names.includes(keep) ? keep : busiest;
    drawTopic();
  };

  const drawBrokers = (cl) => {
    const members = brokerMembers(cl);
    const sum = (f) => members.reduce((a, m) => a + (f(m.kv) || 0), 0);
    stats.replaceChildren(...[
      ['Brokers', String(members.length), 'stat-brokers'],
      ['Put TPS', fmtTps(sum((kv) => firstTps(kv.putTps))), 'stat-put-tps'],
      ['Get TPS', fmtTps(sum((kv) => firstTps(kv.getTransferredTps))), 'stat-get-tps'],
      ['Put today', fmtNum(sum(todayIn)), 'stat-put-today'],
      ['Got today', fmtNum(sum(todayOut)), 'stat-get-today'],
      ['Topics charted', series ? String(Object.keys(series.topics || {}).length) : '-', 'stat-topics'],
    ].map(([label, value, test]) => h('div', { class: 'stat', test }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value))));
    const maxToday = Math.max(0, ...members.map((m) => todayIn(m.kv) || 0));
    today.replaceChildren(table([
      { t: 'Broker', v: (m) => `${m.brokerName}:${m.id}`, cls: 'nowrap' },
      { t: 'Role', v: roleOf },
      { t: 'Put TPS', v: (m) => fmtTps(firstTps(m.kv.putTps)), num: true },
      { t: 'Get TPS', v: (m) => fmtTps(firstTps(m.kv.getTransferredTps)), num: true },
      { t: 'Put today', v: (m) => todayIn(m.kv), num: true, test: 'today-in' },
      { t: 'Got today', v: (m) => todayOut(m.kv), num: true, test: 'today-out' },
      { t: '', v: (m) => h('div', { class: 'bar', style: 'width:90px' }, h('div', { style: `width:${maxToday ? ((todayIn(m.kv) || 0) / maxToday) * 100 : 0}%` })) },
    ], members, { test: 'broker-today-table', rowTest: 'broker-today-row', rowName: (m) => `${m.brokerName}:${m.id}`, empty: 'No broker registered' }));
  };

  await ctx.poll(async () => {
    const [sr, cl] = await Promise.all([
      tryApi('/dashboard/series.query', {}, 'Loading the TPS series'),
      tryApi('/cluster/list.query', {}, 'Loading the brokers'),
    ]);
    if (!ctx.alive) return;
    if (sr) drawSeries(sr);
    if (cl) drawBrokers(cl);
    updated.touch();
    ctx.ready();
  }, 5000);
} };

// ---------------------------------------------------------------------------------------------
// Cluster

function haText(kv) {
  if (kv.haSlaveFallBehindBytes !== undefined && Number(kv.haSlaveCount) > 0) {
    const behind = Number(kv.haSlaveFallBehindBytes);
    return h('span', { title: `slaves connected: ${kv.haSlaveCount || 0}, in sync: ${kv.haInSyncSlaveNums || 0}` },
      badge(behind > 0 ? `${fmtNum(behind)} B behind` : 'in sync', behind > 0 ? 'warn' : 'ok'),
      ` ${kv.haInSyncSlaveNums || 0}/${kv.haSlaveCount || 0} slaves`);
  }
  if (kv.haSlaveConnected !== undefined) {
    const up = kv.haSlaveConnected === 'true';
    return h('span', { title: `master ${kv.haMasterAddress || '?'}` }, badge(up ? 'connected' : 'disconnected', up ? 'ok' : 'bad'),
      kv.haMasterAddress ? ` to ${kv.haMasterAddress}` : '');
  }
  if (kv.haSlaveCount !== undefined) return Number(kv.haSlaveCount) > 0 ? `${kv.haSlaveCount} slaves` : 'no slave';
  return '-';
}

function diskText(kv) {
  const r = Number(kv.commitLogDiskRatio);
  if (kv.commitLogDiskRatio === undefined || !Number.isFinite(r) || r < 0) return '-';
  const pct = Math.round(r * 1000) / 10;
  return h('span', { title: kv.commitLogDirCapacity || '' }, badge(`${pct}%`, pct >= 90 ? 'bad' : pct >= 75 ? 'warn' : 'ok'));
}

function brokerStatusDialog(m) {
  modal(`Broker ${m.brokerName}:${m.id} status (${m.addr})`, kvTable(m.kv, 'broker-status-table'), { test: 'broker-status-dialog', wide: true });
}

function brokerConfigDialog(m) {
  modalLoading(`Broker ${m.brokerName}:${m.id} configuration (${m.addr})`, 'broker-config-dialog',
    async () => kvTable(await api('/cluster/brokerConfig.query', { query: { brokerAddr: m.addr } }), 'broker-config-table'), { wide: true });
}

PAGES.cluster = { title: 'Cluster', render: async (root, ctx) => {
  const updated = updatedLabel();
  const body = h('div', { test: 'cluster-list' });
  root.append(pageHead('Cluster', updated), body);
  await ctx.poll(async () => {
    const data = await tryApi('/cluster/list.query', {}, 'Loading the cluster');
    if (!ctx.alive) return;
    if (data) {
      const members = brokerMembers(data);
      const clusters = Array.from(new Set(members.map((m) => m.cluster)));
      if (!clusters.length) clusters.push('(none)');
      body.replaceChildren(...clusters.map((c) => h('div', { class: 'card', test: 'cluster-card', 'data-name': c },
        h('div', { class: 'card-head' }, h('h2', null, `Cluster ${c}`)),
        table([
          { t: 'Broker', v: (m) => m.brokerName, cls: 'nowrap' },
          { t: 'No.', v: (m) => String(m.id) },
          { t: 'Role', v: roleOf },
          { t: 'Address', v: (m) => m.addr, cls: 'mono' },
          { t: 'Version', v: (m) => m.kv.brokerVersionDesc || '-' },
          { t: 'Put TPS', v: (m) => fmtTps(firstTps(m.kv.putTps)), num: true },
          { t: 'Get TPS', v: (m) => fmtTps(firstTps(m.kv.getTransferredTps)), num: true },
          { t: 'Put today', v: (m) => todayIn(m.kv), num: true },
          { t: 'Got today', v: (m) => todayOut(m.kv), num: true },
          { t: 'Put yesterday', v: (m) => yesterdayIn(m.kv), num: true },
          { t: 'Got yesterday', v: (m) => yesterdayOut(m.kv), num: true },
          { t: 'Disk', v: (m) => diskText(m.kv) },
          { t: 'HA', v: (m) => haText(m.kv) },
          { t: 'Operation', cls: 'nowrap', v: (m) => h('div', { class: 'actions nowrap' },
            button('STATUS', () => brokerStatusDialog(m), { test: 'broker-status-btn' }),
            button('CONFIG', () => brokerConfigDialog(m), { test: 'broker-config-btn', disabled: !m.addr })) },
        ], members.filter((m) => m.cluster === c), { test: 'cluster-table', rowTest: 'broker-row', rowName: (m) => `${m.brokerName}:${m.id}`,
          empty: 'No broker registered with the name server' }))));
    }
    updated.touch();
    ctx.ready();
  }, 5000);
} };

// ---------------------------------------------------------------------------------------------
// Shared form pieces

/** A `<form>` whose submit (button or Enter) runs `onsubmit`, errors shown. */
function formEl(attrs, onsubmit, ...children) {
  const f = h('form', { ...attrs, novalidate: true }, children);
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const submit = $('button[type=submit]', f);
    if (submit) submit.disabled = true;
    try {
      await onsubmit();
    } catch (err) {
      showError(err);
    } finally {
      if (submit) submit.disabled = false;
    }
  });
  return f;
}

function fld(label, input) {
  return h('label', { class: 'fld' }, label, input);
}

function required(value, what) {
  const v = String(value || '').trim();
  if (!v) throw new Error(`${what} is required`);
  return v;
}

function intField(value, what, min, max) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${what} must be a whole number from ${min} to ${max}`);
  return n;
}

/** Begin/end inputs for a time range; `end` follows the clock until the user edits it. */
function timeRange(testPrefix, hoursBack = 1) {
  const now = Date.now();
  const begin = h('input', { type: 'datetime-local', step: 1, value: toLocalInput(now - hoursBack * 3600e3), test: `${testPrefix}-begin` });
  const end = h('input', { type: 'datetime-local', step: 1, value: toLocalInput(now), test: `${testPrefix}-end` });
  end.dataset.auto = '1';
  end.addEventListener('input', () => delete end.dataset.auto);
  return {
    begin, end,
    read() {
      if (end.dataset.auto) end.value = toLocalInput(Date.now());
      const b = fromLocalInput(begin.value), e = fromLocalInput(end.value);
      if (!Number.isFinite(b) || !Number.isFinite(e)) throw new Error('Choose both the begin and the end time');
      if (b >= e) throw new Error('The begin time must be before the end time');
      return [b, e];
    },
  };
}

/** Cluster and broker choices (for topic and group creation) from /cluster/list.query. */
async function targetChooser(testPrefix, { clusters: pickClusters, brokers: pickBrokers } = {}) {
  const data = await api('/cluster/list.query');
  const info = data.clusterInfo || {};
  const clusters = Object.keys(info.clusterAddrTable || {}).sort();
  const brokers = Array.from(new Set([...Object.keys(info.brokerAddrTable || {}), ...Object.keys(data.brokerServer || {})])).sort();
  const clusterBox = checkGroup(clusters, pickClusters || clusters.slice(0, 1), { test: `${testPrefix}-cluster` });
  const brokerBox = checkGroup(brokers, pickBrokers || [], { test: `${testPrefix}-broker` });
  return {
    messageTypes: Object.keys(data.messageTypes || {}),
    fields: [h('label', null, 'Clusters'), clusters.length ? clusterBox : h('span', { class: 'muted' }, 'none registered'),
      h('label', null, 'Brokers'), brokers.length ? brokerBox : h('span', { class: 'muted' }, 'none registered')],
    read() {
      const c = clusterBox.selected(), b = brokerBox.selected();
      if (!c.length && !b.length) throw new Error('Choose at least one cluster or broker');
      return { clusterNameList: c, brokerNameList: b };
    },
  };
}

const queueStatCols = [
  { t: 'Broker', v: (q) => q.brokerName },
  { t: 'Queue', v: (q) => q.queueId, num: true },
  { t: 'Broker offset', v: (q) => q.brokerOffset, num: true },
  { t: 'Consumer offset', v: (q) => q.consumerOffset, num: true },
  { t: 'Diff', v: (q) => { const d = q.brokerOffset - q.consumerOffset; return h('span', { class: d > 0 ? 'lag' : null }, fmtNum(d)); },
    dv: (q) => q.brokerOffset - q.consumerOffset, cls: 'num' },
  { t: 'Client', v: (q) => q.clientInfo || '-', cls: 'break' },
  { t: 'Last consumed', v: (q) => fmtTime(q.lastTimestamp) },
];

function lagBadge(diff) {
  return badge(`lag ${fmtNum(diff)}`, diff > 0 ? 'warn' : 'ok');
}

// ---------------------------------------------------------------------------------------------
// Topic

const TOPIC_TYPES = ['NORMAL', 'FIFO', 'DELAY', 'TRANSACTION', 'MIXED', 'UNSPECIFIED', 'RETRY', 'DLQ', 'SYSTEM'];
const TOPIC_TYPES_SHOWN = ['NORMAL', 'FIFO', 'DELAY', 'TRANSACTION', 'MIXED', 'UNSPECIFIED'];
const MESSAGE_TYPES = ['NORMAL', 'FIFO', 'DELAY', 'TRANSACTION', 'MIXED', 'UNSPECIFIED'];
const realTopic = (name) => name.replace(/^%SYS%/, '');

async function topicFormDialog(cfg, onDone) {
  const update = !!cfg;
  const targets = await targetChooser('topic-form', update ? { clusters: cfg.clusterNameList || [], brokers: cfg.brokerNameList || [] } : {});
  const types = targets.messageTypes.length ? targets.messageTypes : MESSAGE_TYPES;
  const name = h('input', { type: 'text', test: 'topic-form-name', value: update ? cfg.topicName : '', readonly: update, placeholder: 'TopicName', autocomplete: 'off' });
  const write = h('input', { type: 'number', min: 1, max: 1024, test: 'topic-form-write', value: update ? cfg.writeQueueNums : 8 });
  const read = h('input', { type: 'number', min: 1, max: 1024, test: 'topic-form-read', value: update ? cfg.readQueueNums : 8 });
  const perms = [['6', '6 (read and write)'], ['4', '4 (read only)'], ['2', '2 (write only)']];
  const permNow = String(update ? cfg.perm : 6);
  if (!perms.some(([v]) => v === permNow)) perms.push([permNow, permText(permNow)]);
  const perm = selectBox(perms, permNow, { test: 'topic-form-perm' });
  const typeNow = update ? cfg.messageType || 'UNSPECIFIED' : 'NORMAL';
  const type = selectBox(types.includes(typeNow) ? types : [...types, typeNow], typeNow, { test: 'topic-form-type' });
  const submit = button(update ? 'Update' : 'Create', async () => {
    const topicName = required(name.value, 'The topic name');
    if (!/^[%|a-zA-Z0-9_-]{1,127}$/.test(topicName)) throw new Error('A topic name has at most 127 letters, digits, %, |, _ or -');
    const body = { ...targets.read(), topicName, writeQueueNums: intField(write.value, 'Write queues', 1, 1024),
      readQueueNums: intField(read.value, 'Read queues', 1, 1024), perm: Number(perm.value), order: false, messageType: type.value };
    await api('/topic/createOrUpdate.do', { body });
    toast(`Topic ${topicName} ${update ? 'updated' : 'created'}`, 'success');
    dlg.close();
    if (onDone) onDone(topicName);
  }, { test: 'topic-form-submit', kind: 'primary', small: false });
  const cancel = h('button', { class: 'btn', type: 'button', onclick: () => dlg.close() }, 'Cancel');
  const dlg = modal(update ? `Update topic ${cfg.topicName}` : 'Add topic', h('div', { class: 'form' },
    targets.fields,
    h('label', null, 'Topic name'), name,
    h('label', null, 'Write queues'), write,
    h('label', null, 'Read queues'), read,
    h('label', null, 'Permission'), perm,
    h('label', null, 'Message type'), type), { test: 'topic-form-dialog', actions: [cancel, submit] });
  if (!update) name.focus();
}

function topicStatusDialog(topic) {
  modalLoading(`Topic ${topic}: queue status`, 'topic-status-dialog', async () => {
    const st = await api('/topic/stats.query', { query: { topic } });
    const rows = Object.entries(st.offsetTable || {}).map(([k, v]) => ({ ...parseQueueKey(k), ...v })).sort(byQueue);
    const stored = rows.reduce((a, r) => a + Math.max(0, r.maxOffset - r.minOffset), 0);
    return [h('p', { class: 'hint' }, `${rows.length} queues, ${fmtNum(stored)} messages stored` +
      (st.topicPutTps !== undefined ? `, put TPS ${fmtTps(Number(st.topicPutTps))}` : '')),
    table([
      { t: 'Broker', v: (r) => r.brokerName },
      { t: 'Queue', v: (r) => r.queueId, num: true },
      { t: 'Min offset', v: (r) => r.minOffset, num: true },
      { t: 'Max offset', v: (r) => r.maxOffset, num: true },
      { t: 'Messages', v: (r) => Math.max(0, r.maxOffset - r.minOffset), num: true },
      { t: 'Last update', v: (r) => fmtTime(r.lastUpdateTimestamp) },
    ], rows, { test: 'topic-status-table', rowTest: 'topic-status-row' })];
  }, { wide: true });
}

function topicRouteDialog(topic) {
  modalLoading(`Topic ${topic}: route`, 'topic-router-dialog', async () => {
    const r = await api('/topic/route.query', { query: { topic } });
    return [h('h3', null, 'Brokers'),
      table([
        { t: 'Broker', v: (b) => b.brokerName },
        { t: 'Cluster', v: (b) => b.cluster },
        { t: 'Addresses', v: (b) => Object.entries(b.brokerAddrs || {}).map(([id, a]) => `${id === '0' ? 'master' : 'slave ' + id}: ${a}`).join(', '), cls: 'mono' },
      ], r.brokerDatas || [], { test: 'topic-route-brokers', rowTest: 'topic-route-broker-row', rowName: (b) => b.brokerName }),
      h('h3', null, 'Queues'),
      table([
        { t: 'Broker', v: (q) => q.brokerName },
        { t: 'Read queues', v: (q) => q.readQueueNums, num: true },
        { t: 'Write queues', v: (q) => q.writeQueueNums, num: true },
        { t: 'Permission', v: (q) => permText(q.perm) },
        { t: 'Sys flag', v: (q) => q.topicSysFlag, num: true },
      ], r.queueDatas || [], { test: 'topic-route-queues', rowTest: 'topic-route-queue-row', rowName: (q) => q.brokerName })];
  }, { wide: true });
}

function topicConsumersDialog(topic) {
  modalLoading(`Topic ${topic}: consumers`, 'topic-consumer-dialog', async () => {
    const data = await api('/topic/queryConsumerByTopic.query', { query: { topic } });
    const groups = Object.keys(data || {}).sort();
    if (!groups.length) return h('div', { class: 'empty-state' }, 'No consumer group consumes this topic.');
    return groups.map((g) => {
      const info = data[g] || {};
      return h('div', { test: 'topic-consumer-group', 'data-name': g },
        h('h3', null, `${g} `, lagBadge(info.diffTotal), h('span', { class: 'hint' }, `  last consumed ${fmtTime(info.lastTimestamp)}`)),
        table(queueStatCols, (info.queueStatInfoList || []).slice().sort(byQueue), { test: 'topic-consumer-table', rowTest: 'topic-consumer-row' }));
    });
  }, { wide: true });
}

function topicConfigDialog(topic, onDone) {
  modalLoading(`Topic ${topic}: configuration`, 'topic-config-dialog', async (dlg) => {
    const list = await api('/topic/examineTopicConfig.query', { query: { topic } });
    return table([
      { t: 'Broker', v: (c) => (c.brokerNameList || []).join(', ') },
      { t: 'Write queues', v: (c) => c.writeQueueNums, num: true },
      { t: 'Read queues', v: (c) => c.readQueueNums, num: true },
      { t: 'Permission', v: (c) => permText(c.perm) },
      { t: 'Order', v: (c) => String(!!c.order) },
      { t: 'Message type', v: (c) => c.messageType },
      { t: 'Operation', v: (c) => button('EDIT', async () => {
        dlg.close();
        await topicFormDialog({ ...c, topicName: c.topicName || topic, clusterNameList: c.clusterNameList || [] }, onDone);
      }, { test: 'topic-config-edit' }) },
    ], list || [], { test: 'topic-config-table', rowTest: 'topic-config-row', rowName: (c) => (c.brokerNameList || []).join(',') });
  }, { wide: true });
}

function sendMessageDialog(topic) {
  const tag = h('input', { type: 'text', test: 'send-tag', placeholder: 'TagA' });
  const key = h('input', { type: 'text', test: 'send-key', placeholder: 'order-1001' });
  const body = h('textarea', { test: 'send-body', placeholder: 'Message body' });
  const trace = h('input', { type: 'checkbox', test: 'send-trace' });
  const submit = button('Send', async () => {
    const messageBody = required(body.value, 'The message body');
    const res = await api('/topic/sendTopicMessage.do', { body: { topic, key: key.value.trim(), tag: tag.value.trim(), messageBody, traceEnabled: trace.checked } });
    dlg.close();
    sendResultDialog(res);
  }, { test: 'send-submit', kind: 'primary', small: false });
  const dlg = modal(`Send a message to ${topic}`, h('div', { class: 'form' },
    h('label', null, 'Topic'), h('input', { type: 'text', value: topic, readonly: true }),
    h('label', null, 'Tag'), tag, h('label', null, 'Key'), key,
    h('label', { class: 'wide' }, 'Body'), h('div', { class: 'wide' }, body),
    h('label', null, 'Trace'), h('label', null, trace, ' record a message trace')), { test: 'topic-send-dialog', actions: [submit] });
  tag.focus();
}

function sendResultDialog(res) {
  const flat = {};
  for (const [k, v] of Object.entries(res || {})) {
    flat[k] = k === 'messageQueue' && v ? `${v.topic} / ${v.brokerName} / queue ${v.queueId}` : v;
  }
  const ok = res && res.sendStatus === 'SEND_OK';
  const mq = (res && res.messageQueue) || {};
  modal('Send result', [h('p', { test: 'send-result-status', 'data-status': res && res.sendStatus }, statusBadge(ok, res && res.sendStatus, (res && res.sendStatus) || 'unknown'),
    res && res.msgId ? [' ', h('a', { href: `#/message?topic=${encodeURIComponent(mq.topic || '')}&msgId=${encodeURIComponent(res.msgId)}` }, 'View message')] : null),
  kvTable(flat, 'send-result-table')], { test: 'send-result-dialog' });
}

function resetOffsetDialog(topic, skip) {
  const title = skip ? `Skip the backlog of ${topic}` : `Reset consumer offsets of ${topic}`;
  modalLoading(title, skip ? 'topic-skip-dialog' : 'topic-reset-dialog', async (dlg) => {
    const gl = await api('/topic/queryTopicConsumerInfo.query', { query: { topic } });
    const groups = ((gl && gl.groupList) || []).slice().sort();
    if (!groups.length) return h('div', { class: 'empty-state', test: 'reset-no-groups' }, 'No consumer group subscribes to this topic.');
    const box = checkGroup(groups, groups.length === 1 ? groups : [], { test: 'reset-group' });
    const time = h('input', { type: 'datetime-local', step: 1, value: toLocalInput(Date.now()), test: 'reset-time' });
    const go = button(skip ? 'Skip backlog' : 'Reset offsets', async () => {
      const consumerGroupList = box.selected();
      if (!consumerGroupList.length) throw new Error('Choose at least one consumer group');
      let resetTime = -1;
      if (!skip) {
        resetTime = fromLocalInput(time.value);
        if (!Number.isFinite(resetTime)) throw new Error('Choose the time to reset to');
      }
      const res = await api(skip ? '/consumer/skipAccumulate.do' : '/consumer/resetOffset.do', { body: { consumerGroupList, topic, resetTime, force: true } });
      dlg.close();
      resetResultDialog(topic, res, skip);
    }, { test: 'reset-submit', kind: 'primary', small: false });
    return h('div', { class: 'form' }, h('label', null, 'Consumer groups'), box,
      skip ? h('p', { class: 'wide hint' }, 'Moves the chosen groups to the newest offset of every queue: their backlog is skipped.')
        : [h('label', null, 'Reset to'), time],
      h('div', { class: 'wide' }, go));
  });
}

function resetResultDialog(topic, res, skip) {
  const groups = Object.keys(res || {}).sort();
  const ok = groups.length > 0 && groups.every((g) => res[g] && res[g].status);
  modal(skip ? `Skipped the backlog of ${topic}` : `Reset offsets of ${topic}`, [
    h('p', { test: 'reset-result-summary', 'data-ok': String(ok) }, statusBadge(ok), ` ${groups.length} consumer group(s)`),
    groups.map((g) => {
      const r = res[g] || {};
      const stats = (r.rollbackStatsList || []).slice().sort(byQueue);
      // Only the legacy (offline consumer) reset fills the offsets before the change.
      const full = stats.some((x) => x.brokerOffset || x.consumerOffset || x.timestampOffset);
      return h('div', { test: 'reset-result-row', 'data-name': g, 'data-status': String(!!r.status) },
        h('h3', null, `${g} `, statusBadge(r.status)),
        r.errMsg ? h('div', { class: 'error-box' }, r.errMsg) : null,
        table([
          { t: 'Broker', v: (x) => x.brokerName },
          { t: 'Queue', v: (x) => x.queueId, num: true },
          full && { t: 'Broker offset', v: (x) => x.brokerOffset, num: true },
          full && { t: 'Consumer offset', v: (x) => x.consumerOffset, num: true },
          full && { t: 'Offset at time', v: (x) => x.timestampOffset, num: true },
          { t: 'New offset', v: (x) => x.rollbackOffset, num: true },
        ].filter(Boolean), stats, { test: 'reset-result-table', empty: 'No queue changed' }));
    })], { test: 'reset-result-dialog', wide: true });
}

PAGES.topic = { title: 'Topic', render: async (root, ctx) => {
  let rows = [];
  const count = h('span', { class: 'hint', test: 'topic-count' });
  const filter = h('input', { type: 'search', placeholder: 'Filter by name', test: 'topic-filter', value: ctx.params.get('filter') || '', oninput: () => draw() });
  const types = checkGroup(TOPIC_TYPES, TOPIC_TYPES_SHOWN, { test: (v) => `topic-type-${v}`, onchange: () => draw() });
  const holder = h('div');
  const load = async () => {
    const data = await tryApi('/topic/list.queryTopicType', {}, 'Loading topics');
    if (!ctx.alive) return;
    if (data) {
      const names = data.topicNameList || [], kinds = data.messageTypeList || [];
      rows = names.map((n, i) => ({ name: n, type: kinds[i] || 'UNSPECIFIED' })).sort((a, b) => a.name.localeCompare(b.name));
    }
    draw();
    ctx.ready();
  };
  const actions = (t) => {
    const name = realTopic(t.name);
    const userTopic = t.type !== 'SYSTEM';
    return h('div', { class: 'actions' },
      button('STATUS', () => topicStatusDialog(name), { test: 'topic-status-btn' }),
      button('ROUTER', () => topicRouteDialog(name), { test: 'topic-router-btn' }),
      button('CONSUMER MANAGE', () => topicConsumersDialog(name), { test: 'topic-consumer-btn' }),
      button('TOPIC CONFIG', () => topicConfigDialog(name, load), { test: 'topic-config-btn' }),
      userTopic && button('SEND MESSAGE', () => sendMessageDialog(name), { test: 'topic-send-btn' }),
      userTopic && button('RESET CONSUMER OFFSET', () => resetOffsetDialog(name, false), { test: 'topic-reset-btn' }),
      userTopic && button('SKIP MESSAGE ACCUMULATE', () => resetOffsetDialog(name, true), { test: 'topic-skip-btn' }),
      userTopic && button('DELETE', async () => {
        if (!await confirmDialog('Delete topic', `Delete topic ${name} from every cluster and the name servers? Its messages can no longer be consumed.`, { okText: 'Delete' })) return;
        await api('/topic/deleteTopic.do', { method: 'POST', query: { topic: name } });
        toast(`Topic ${name} deleted`, 'success');
        await load();
      }, { test: 'topic-delete-btn', kind: 'danger' }));
  };
  const draw = () => {
    const text = filter.value.trim().toLowerCase();
    const shown = types.selected();
    const list = rows.filter((t) => shown.includes(t.type) && (!text || t.name.toLowerCase().includes(text)));
    count.textContent = `${list.length} of ${rows.length} topics`;
    holder.replaceChildren(table([
      { t: 'Topic', v: (t) => t.name, cls: 'break' },
      { t: 'Type', v: (t) => badge(t.type, t.type === 'SYSTEM' ? '' : t.type === 'DLQ' ? 'bad' : t.type === 'RETRY' ? 'warn' : 'info') },
      { t: 'Operation', v: actions },
    ], list, { test: 'topic-table', rowTest: 'topic-row', rowName: (t) => t.name, empty: rows.length ? 'No topic matches the filter' : 'No topic' }));
  };
  root.append(pageHead('Topic',
    button('Add / Update', () => topicFormDialog(null, load), { test: 'topic-add-btn', kind: 'primary', small: false }),
    button('Refresh', load, { test: 'topic-refresh-btn', small: false })),
  h('div', { class: 'card' }, h('div', { class: 'toolbar' }, filter, types, h('span', { class: 'grow' }), count), holder));
  await load();
} };

// ---------------------------------------------------------------------------------------------
// Consumer

const GROUP_TYPES = ['NORMAL', 'FIFO', 'SYSTEM'];
const realGroup = (g) => g.replace(/^%SYS%/, '');
const addressParam = (g) => (g.address && g.address.length ? g.address.join(',') : undefined);
const CONSUME_TYPES = { CONSUME_PASSIVELY: 'PUSH', CONSUME_ACTIVELY: 'PULL', CONSUME_POP: 'POP' };

const subscriptionCols = [
  { t: 'Topic', v: (x) => x.topic },
  { t: 'Expression', v: (x) => x.subString, cls: 'mono' },
  { t: 'Type', v: (x) => x.expressionType },
  { t: 'Tags', v: (x) => (x.tagsSet || []).join(', ') },
  { t: 'Codes', v: (x) => (x.codeSet || []).join(', ') },
  { t: 'Version', v: (x) => (x.subVersion > 1e12 ? fmtTime(x.subVersion) : x.subVersion) },
];

function consumerClientDialog(g) {
  modalLoading(`Clients of ${g.group}`, 'consumer-client-dialog', async () => {
    if (!g.count) return h('div', { class: 'empty-state' }, 'No consumer of this group is online.');
    const cc = await api('/consumer/consumerConnection.query', { query: { consumerGroup: realGroup(g.group), address: addressParam(g) } });
    return [kvGrid([['Consume type', cc.consumeType], ['Message model', cc.messageModel], ['Consume from', cc.consumeFromWhere]], 'consumer-client-info'),
      h('h3', null, 'Connections'),
      table([
        { t: 'Client ID', v: (c) => c.clientId, cls: 'break mono' },
        { t: 'Address', v: (c) => c.clientAddr, cls: 'mono' },
        { t: 'Language', v: (c) => c.language },
        { t: 'Version', v: (c) => c.versionDesc || c.version },
        { t: 'Operation', v: (c) => button('RUNNING INFO', () => consumerRunningDialog(realGroup(g.group), c.clientId), { test: 'client-running-btn' }) },
      ], cc.connectionSet || [], { test: 'consumer-client-table', rowTest: 'consumer-client-row', rowName: (c) => c.clientId, empty: 'No consumer of this group is online' }),
      h('h3', null, 'Subscriptions'),
      table(subscriptionCols, Object.values(cc.subscriptionTable || {}), { test: 'consumer-sub-table', rowTest: 'consumer-sub-row', rowName: (x) => x.topic })];
  }, { wide: true });
}

function consumerRunningDialog(group, clientId) {
  modalLoading(`Running info of ${clientId}`, 'consumer-running-dialog', async () => {
    const ri = await api('/consumer/consumerRunningInfo.query', { query: { consumerGroup: group, clientId, jstack: false } });
    const status = Object.entries(ri.statusTable || {}).map(([topic, v]) => ({ topic, ...v }));
    const mqs = Object.entries(ri.mqTable || {}).map(([k, v]) => ({ ...parseQueueKey(k), ...v })).sort(byQueue);
    const pops = Object.entries(ri.mqPopTable || {}).map(([k, v]) => ({ ...parseQueueKey(k), ...v })).sort(byQueue);
    const num2 = (v) => (typeof v === 'number' ? fmtTps(v) : v);
    return [h('h3', null, 'Consume status'),
      table([
        { t: 'Topic', v: (x) => x.topic },
        { t: 'Pull RT (ms)', v: (x) => num2(x.pullRT), cls: 'num' },
        { t: 'Pull TPS', v: (x) => num2(x.pullTPS), cls: 'num' },
        { t: 'Consume RT (ms)', v: (x) => num2(x.consumeRT), cls: 'num' },
        { t: 'OK TPS', v: (x) => num2(x.consumeOKTPS), cls: 'num' },
        { t: 'Failed TPS', v: (x) => num2(x.consumeFailedTPS), cls: 'num' },
        { t: 'Failed (last hour)', v: (x) => x.consumeFailedMsgs, num: true },
      ], status, { test: 'running-status-table' }),
      h('h3', null, 'Queues held'),
      table([
        { t: 'Queue', v: (q) => `${q.topic} / ${q.brokerName} / ${q.queueId}`, cls: 'break' },
        { t: 'Commit offset', v: (q) => q.commitOffset, num: true },
        { t: 'Cached', v: (q) => q.cachedMsgCount, num: true },
        { t: 'Cached MiB', v: (q) => q.cachedMsgSizeInMiB, num: true },
        { t: 'Cached min', v: (q) => q.cachedMsgMinOffset, num: true },
        { t: 'Cached max', v: (q) => q.cachedMsgMaxOffset, num: true },
        { t: 'Locked', v: (q) => String(!!q.locked) },
        { t: 'Dropped', v: (q) => String(!!q.droped) },
        { t: 'Last pull', v: (q) => fmtTime(q.lastPullTimestamp) },
        { t: 'Last consume', v: (q) => fmtTime(q.lastConsumeTimestamp) },
      ], mqs, { test: 'running-mq-table' }),
      pops.length ? [h('h3', null, 'Pop queues'), table([
        { t: 'Queue', v: (q) => `${q.topic} / ${q.brokerName} / ${q.queueId}`, cls: 'break' },
        { t: 'Waiting ack', v: (q) => q.waitAckCount, num: true },
        { t: 'Dropped', v: (q) => String(!!q.droped) },
        { t: 'Last pop', v: (q) => fmtTime(q.lastPopTimestamp) },
      ], pops, { test: 'running-pop-table' })] : null,
      h('h3', null, 'Subscriptions'),
      table(subscriptionCols, ri.subscriptionSet || [], { test: 'running-sub-table' }),
      h('h3', null, 'Properties'),
      kvTable(ri.properties || {}, 'running-properties'),
      ri.jstack ? [h('h3', null, 'Threads'), h('pre', { class: 'body hex' }, ri.jstack)] : null];
  }, { wide: true });
}

function consumeDetailDialog(g) {
  modalLoading(`Consume detail of ${g.group}`, 'consumer-detail-dialog', async () => {
    const list = await api('/consumer/queryTopicByConsumer.query', { query: { consumerGroup: realGroup(g.group), address: addressParam(g) } });
    if (!list || !list.length) return h('div', { class: 'empty-state' }, 'This group has no consume progress on any topic.');
    return list.map((tc) => h('div', { test: 'consume-detail-topic', 'data-name': tc.topic },
      h('h3', null, `${tc.topic} `, lagBadge(tc.diffTotal), h('span', { class: 'hint' }, `  last consumed ${fmtTime(tc.lastTimestamp)}`)),
      table(queueStatCols, (tc.queueStatInfoList || []).slice().sort(byQueue), { test: 'consume-detail-table', rowTest: 'consume-detail-row' })));
  }, { wide: true });
}

const GROUP_DEFAULTS = { consumeEnable: true, consumeFromMinEnable: true, consumeBroadcastEnable: true, consumeMessageOrderly: false,
  notifyConsumerIdsChangedEnable: true, retryQueueNums: 1, retryMaxTimes: 16, brokerId: 0, whichBrokerWhenConsumeSlowly: 1, consumeTimeoutMinute: 15 };
const GROUP_FLAGS = [['consumeEnable', 'Consume enabled'], ['consumeMessageOrderly', 'Orderly (FIFO)'], ['consumeBroadcastEnable', 'Broadcast allowed'],
  ['consumeFromMinEnable', 'Consume from min offset'], ['notifyConsumerIdsChangedEnable', 'Notify client changes']];
const GROUP_NUMBERS = [['retryQueueNums', 'Retry queues', 0, 64], ['retryMaxTimes', 'Max retries', -1, 1000], ['brokerId', 'Consume from broker id', 0, 1024],
  ['whichBrokerWhenConsumeSlowly', 'Broker id when slow', 0, 1024], ['consumeTimeoutMinute', 'Consume timeout (min)', 1, 100000]];

/** The editable part of a SubscriptionGroupConfig; `.value()` merges the edits into `cfg`. */
function groupConfigForm(cfg, existing) {
  const name = h('input', { type: 'text', test: 'group-form-name', value: cfg.groupName || '', readonly: existing, placeholder: 'GroupName', autocomplete: 'off' });
  const flags = GROUP_FLAGS.map(([k]) => h('input', { type: 'checkbox', test: `group-form-${k}`, checked: !!cfg[k] }));
  const nums = GROUP_NUMBERS.map(([k, , min, max]) => h('input', { type: 'number', min, max, test: `group-form-${k}`, value: cfg[k] ?? GROUP_DEFAULTS[k] }));
  return {
    el: h('div', { class: 'form' }, h('label', null, 'Group name'), name,
      h('label', null, 'Flags'), h('div', { class: 'checks' }, GROUP_FLAGS.map(([, label], i) => h('label', null, flags[i], label))),
      GROUP_NUMBERS.map(([, label], i) => [h('label', null, label), nums[i]])),
    value() {
      const out = { ...cfg, groupName: required(name.value, 'The group name') };
      if (!/^[%|a-zA-Z0-9_-]{1,255}$/.test(out.groupName)) throw new Error('A group name has letters, digits, %, |, _ or - only');
      GROUP_FLAGS.forEach(([k], i) => { out[k] = flags[i].checked; });
      GROUP_NUMBERS.forEach(([k, label, min, max], i) => { out[k] = intField(nums[i].value, label, min, max); });
      return out;
    },
  };
}

function consumerConfigDialog(g, onDone) {
  modalLoading(`Configuration of ${g.group}`, 'consumer-config-dialog', async (dlg) => {
    const list = await api('/consumer/examineSubscriptionGroupConfig.query', { query: { consumerGroup: realGroup(g.group) } });
    if (!list || !list.length) return h('div', { class: 'empty-state' }, 'No broker holds this group.');
    return list.map((item) => {
      const brokers = item.brokerNameList || [];
      const form = groupConfigForm(item.subscriptionGroupConfig || {}, true);
      const save = button('Save', async () => {
        await api('/consumer/createOrUpdate.do', { body: { clusterNameList: null, brokerNameList: brokers, subscriptionGroupConfig: form.value() } });
        toast(`Group ${g.group} updated on ${brokers.join(', ')}`, 'success');
        dlg.reload();
        if (onDone) onDone();
      }, { test: 'consumer-config-save', kind: 'primary' });
      return h('div', { class: 'card', test: 'consumer-config-broker', 'data-name': brokers.join(',') },
        h('div', { class: 'card-head' }, h('h2', null, `Broker ${brokers.join(', ')}`), save), form.el);
    });
  }, { wide: true });
}

async function addGroupDialog(onDone) {
  const targets = await targetChooser('group-form');
  const form = groupConfigForm({ ...GROUP_DEFAULTS }, false);
  const submit = button('Create', async () => {
    const body = { ...targets.read(), subscriptionGroupConfig: form.value() };
    await api('/consumer/createOrUpdate.do', { body });
    toast(`Group ${body.subscriptionGroupConfig.groupName} created`, 'success');
    dlg.close();
    if (onDone) onDone();
  }, { test: 'group-form-submit', kind: 'primary', small: false });
  const dlg = modal('Add consumer group', [h('div', { class: 'form', style: 'margin-bottom:10px' }, targets.fields), form.el],
    { test: 'consumer-form-dialog', actions: [submit], wide: false });
}

function deleteGroupDialog(g, onDone) {
  const group = realGroup(g.group);
  modalLoading(`Delete consumer group ${group}`, 'consumer-delete-dialog', async (dlg) => {
    const brokers = ((await api('/consumer/fetchBrokerNameList.query', { query: { consumerGroup: group } })) || []).slice().sort();
    if (!brokers.length) return h('div', { class: 'empty-state' }, 'No broker holds this group.');
    const box = checkGroup(brokers, brokers, { test: 'delete-group-broker' });
    const go = button('Delete', async () => {
      const brokerNameList = box.selected();
      if (!brokerNameList.length) throw new Error('Choose at least one broker');
      await api('/consumer/deleteSubGroup.do', { body: { groupName: group, brokerNameList } });
      toast(`Group ${group} deleted from ${brokerNameList.join(', ')}`, 'success');
      dlg.close();
      if (onDone) onDone();
    }, { test: 'consumer-delete-confirm', kind: 'danger solid', small: false });
    return [h('p', null, `Delete ${group} (with its %RETRY% and %DLQ% topics) from these brokers:`), box, h('div', { style: 'margin-top:14px' }, go)];
  });
}

PAGES.consumer = { title: 'Consumer', render: async (root, ctx) => {
  let rows = [];
  const count = h('span', { class: 'hint', test: 'consumer-count' });
  const filter = h('input', { type: 'search', placeholder: 'Filter by group', test: 'consumer-filter', value: ctx.params.get('filter') || '', oninput: () => draw() });
  const types = checkGroup(GROUP_TYPES, ['NORMAL', 'FIFO'], { test: (v) => `consumer-type-${v}`, onchange: () => draw() });
  const holder = h('div');
  const load = async () => {
    const data = await tryApi('/consumer/groupList.query', { query: { skipSysGroup: false } }, 'Loading consumer groups');
    if (!ctx.alive) return;
    if (data) rows = data;
    draw();
    ctx.ready();
  };
  const draw = () => {
    const text = filter.value.trim().toLowerCase();
    const shown = types.selected();
    const list = rows.filter((g) => shown.includes(g.subGroupType || 'NORMAL') && (!text || g.group.toLowerCase().includes(text)));
    count.textContent = `${list.length} of ${rows.length} groups`;
    holder.replaceChildren(table([
      { t: 'Group', v: (g) => g.group, cls: 'break' },
      { t: 'Clients', v: (g) => g.count, num: true, test: 'consumer-count-cell' },
      { t: 'Version', v: (g) => g.version },
      { t: 'Type', v: (g) => (g.consumeType ? h('span', { title: g.consumeType }, CONSUME_TYPES[g.consumeType] || g.consumeType) : null) },
      { t: 'Model', v: (g) => g.messageModel },
      { t: 'TPS', v: (g) => g.consumeTps, num: true },
      { t: 'Lag', v: (g) => (g.diffTotal < 0 ? '-' : h('span', { class: g.diffTotal > 0 ? 'lag' : null }, fmtNum(g.diffTotal))),
        dv: (g) => g.diffTotal, cls: 'num', test: 'consumer-diff' },
      { t: 'Updated', v: (g) => fmtTime(g.updateTime) },
      { t: 'Operation', v: (g) => h('div', { class: 'actions' },
        button('CLIENT', () => consumerClientDialog(g), { test: 'consumer-client-btn' }),
        button('CONSUME DETAIL', () => consumeDetailDialog(g), { test: 'consumer-detail-btn' }),
        button('CONFIG', () => consumerConfigDialog(g, load), { test: 'consumer-config-btn' }),
        button('DELETE', () => deleteGroupDialog(g, load), { test: 'consumer-delete-btn', kind: 'danger' })) },
    ], list, { test: 'consumer-table', rowTest: 'consumer-row', rowName: (g) => g.group, empty: rows.length ? 'No group matches the filter' : 'No consumer group' }));
  };
  root.append(pageHead('Consumer',
    button('Add group', () => addGroupDialog(load), { test: 'consumer-add-btn', kind: 'primary', small: false }),
    button('Refresh', load, { test: 'consumer-refresh-btn', small: false })),
  h('div', { class: 'card' }, h('div', { class: 'toolbar' }, filter, types, h('span', { class: 'grow' }), count), holder));
  await load();
} };

// ---------------------------------------------------------------------------------------------
// Producer

PAGES.producer = { title: 'Producer', render: async (root, ctx) => {
  const topic = h('input', { type: 'text', list: 'producer-topics', test: 'producer-topic', placeholder: 'Topic', autocomplete: 'off', value: ctx.params.get('topic') || '' });
  const group = h('input', { type: 'text', test: 'producer-group', placeholder: 'Producer group', autocomplete: 'off', value: ctx.params.get('group') || '' });
  const out = h('div', { test: 'producer-result' });
  const form = formEl({ class: 'inline-form', test: 'producer-form' }, async () => {
    const t = required(topic.value, 'The topic'), g = required(group.value, 'The producer group');
    const data = await api('/producer/producerConnection.query', { query: { topic: t, producerGroup: g } });
    out.replaceChildren(h('h3', null, `Producers of ${g} on ${t}`), table([
      { t: 'Client ID', v: (c) => c.clientId, cls: 'break mono' },
      { t: 'Address', v: (c) => c.clientAddr, cls: 'mono' },
      { t: 'Language', v: (c) => c.language },
      { t: 'Version', v: (c) => c.versionDesc || c.version },
    ], (data && data.connectionSet) || [], { test: 'producer-table', rowTest: 'producer-row', rowName: (c) => c.clientId, empty: 'No producer of this group is online' }));
  }, fld('Topic', topic), fld('Producer group', group), h('button', { class: 'btn btn-primary', type: 'submit', test: 'producer-search' }, 'Search'));
  root.append(pageHead('Producer'), h('div', { class: 'card' }, form, out));
  root.append(await topicDatalist('producer-topics'));
  ctx.ready();
  if (topic.value && group.value) form.requestSubmit();
} };

// ---------------------------------------------------------------------------------------------
// Messages: result tables, detail dialog, paging

function bodyPreview(m) {
  if (m.messageBody === null || m.messageBody === undefined) return h('span', { class: 'muted' }, '-');
  const t = m.messageBody.length > 80 ? m.messageBody.slice(0, 80) + '…' : m.messageBody;
  return h('span', { class: 'mono break' }, t);
}

function messageTable(msgs, open, { test = 'message-table', select } = {}) {
  return table([
    select ? { t: select.all, v: (m) => select.box(m) } : null,
    { t: 'Message ID', v: (m) => m.msgId, cls: 'mono break' },
    { t: 'Tag', v: msgTags },
    { t: 'Key', v: msgKeys, cls: 'break' },
    { t: 'Store time', v: (m) => fmtTime(m.storeTimestamp) },
    { t: 'Body', v: bodyPreview },
    { t: 'Operation', v: (m) => h('div', { class: 'actions' }, button('DETAIL', () => open(m), { test: 'message-detail-btn' }), select ? select.extra(m) : null) },
  ].filter(Boolean), msgs, { test, rowTest: 'message-row', rowName: (m) => m.msgId, onRow: open, empty: 'No message found' });
}

const TRACK_KINDS = { CONSUMED: 'ok', CONSUMED_BUT_FILTERED: 'info', NOT_CONSUME_YET: 'warn', NOT_ONLINE: 'bad', PULL: 'info' };

/** The detail dialog of a message: fetched by id; `fallback` (a MessageView) shown if that fails. */
function messageDetailDialog(msgId, topic, fallback, preloaded) {
  modalLoading(`Message ${msgId}`, 'message-detail-dialog', async () => {
    let data = preloaded;
    if (!data) {
      try {
        data = await api('/message/viewMessage.query', { query: { msgId, topic: topic || undefined } });
      } catch (e) {
        if (!fallback) throw e;
        showError(e, 'Loading the message\'s consume status');
        data = { messageView: fallback, messageTrackList: null };
      }
    }
    return messageDetail(data);
  }, { wide: true });
}

function messageDetail(data) {
  const m = data.messageView || {};
  const p = m.properties || {};
  const body = m.messageBody;
  const pre = h('pre', { class: 'body', test: 'message-body' });
  let hex = false;
  const show = () => {
    pre.classList.toggle('hex', hex);
    pre.textContent = body === null || body === undefined ? '(no body)' : hex ? hexDump(body) : body.length > 262144 ? body.slice(0, 262144) + '\n… (truncated)' : body;
    toggle.textContent = hex ? 'Show as text' : 'Show as hex';
  };
  const toggle = h('button', { class: 'btn btn-sm', type: 'button', test: 'message-body-hex-toggle', onclick: () => { hex = !hex; show(); } });
  show();
  const tracks = data.messageTrackList;
  return [
    h('div', { class: 'toolbar' }, h('a', { href: `#/trace?msgId=${encodeURIComponent(m.msgId || '')}`, test: 'message-trace-link' }, 'View message trace →')),
    kvGrid([
      ['Topic', m.topic], ['Message ID', m.msgId], ['Tags', p.TAGS], ['Keys', p.KEYS], ['Queue ID', m.queueId], ['Queue offset', m.queueOffset],
      ['Store host', m.storeHost], ['Born host', m.bornHost], ['Store time', fmtTime(m.storeTimestamp)], ['Born time', fmtTime(m.bornTimestamp)],
      ['Store size', m.storeSize], ['Reconsume times', m.reconsumeTimes], ['Body CRC', m.bodyCRC], ['Sys flag', m.sysFlag], ['Flag', m.flag],
      ['Commit log offset', m.commitLogOffset], ['Prepared tx offset', m.preparedTransactionOffset],
    ], 'message-info'),
    h('h3', null, 'Body ', toggle),
    pre,
    h('h3', null, 'Properties'),
    table([{ t: 'Key', v: ([k]) => k, cls: 'mono' }, { t: 'Value', v: ([, v]) => v, cls: 'mono break', test: 'property-value' }],
      Object.entries(p).sort(([a], [b]) => a.localeCompare(b)), { test: 'message-properties', rowTest: 'property-row', rowName: ([k]) => k }),
    h('h3', null, 'Consume status'),
    tracks ? table([
      { t: 'Consumer group', v: (t) => t.consumerGroup },
      { t: 'Status', v: (t) => badge(t.trackType, TRACK_KINDS[t.trackType]) },
      { t: 'Exception', v: (t) => t.exceptionDesc, cls: 'break' },
      { t: 'Operation', v: (t) => button('RESEND', () => resendMessage(m, t.consumerGroup), { test: 'message-resend-btn',
        title: 'Have an online consumer of this group consume the message directly' }) },
    ], tracks, { test: 'message-tracks', rowTest: 'track-row', rowName: (t) => t.consumerGroup, empty: 'No consumer group subscribes to this topic' })
      : h('p', { class: 'muted' }, 'Consume status unavailable.'),
  ];
}

async function resendMessage(m, consumerGroup) {
  const p = m.properties || {};
  const res = await api('/message/consumeMessageDirectly.do', { method: 'POST',
    query: { topic: p.RETRY_TOPIC || m.topic, consumerGroup, msgId: p.ORIGIN_MESSAGE_ID || m.msgId } });
  const ok = res && res.consumeResult === 'CR_SUCCESS';
  modal(`Resent to ${consumerGroup}`, [h('p', { test: 'resend-result-status', 'data-ok': String(ok) }, statusBadge(ok, res && res.consumeResult, (res && res.consumeResult) || 'unknown')),
    kvTable(res || {}, 'resend-result-table')], { test: 'resend-result-dialog' });
}

/** Paged results of a stateless-or-not page query (`data.page`, `data.taskId`). */
function pagedResults(out, fetchPage, render, testPrefix) {
  let taskId = null;
  const go = async (n) => {
    const data = await fetchPage(n, taskId);
    taskId = (data && data.taskId) || null;
    const pg = (data && data.page) || {};
    const content = pg.content || [];
    const total = Number(pg.totalElements) || 0;
    const pages = Math.max(1, Number(pg.totalPages) || Math.ceil(total / 20) || 1);
    out.replaceChildren(render(content), h('div', { class: 'pager' },
      button('‹ Prev', () => go(n - 1), { test: `${testPrefix}-page-prev`, disabled: n <= 1 }),
      h('span', { test: `${testPrefix}-page-info`, 'data-total': total }, `Page ${n} of ${pages} · ${fmtNum(total)} messages`),
      button('Next ›', () => go(n + 1), { test: `${testPrefix}-page-next`, disabled: n >= pages })));
  };
  return { first: () => { taskId = null; return go(1); } };
}

PAGES.message = { title: 'Message', render: async (root, ctx) => {
  const tabs = { topic: 'Topic', key: 'Message Key', id: 'Message ID' };
  const tabBar = h('div', { class: 'tabs', test: 'message-tabs' });
  const panes = {};
  const select = (k) => {
    for (const b of tabBar.children) b.classList.toggle('active', b.dataset.tab === k);
    for (const [n, p] of Object.entries(panes)) p.hidden = n !== k;
  };
  for (const [k, label] of Object.entries(tabs)) tabBar.append(h('button', { class: 'tab', type: 'button', 'data-tab': k, test: `msg-tab-${k}`, onclick: () => select(k) }, label));
  const topicInput = (test) => h('input', { type: 'text', list: 'message-topics', test, placeholder: 'Topic', autocomplete: 'off', value: ctx.params.get('topic') || '' });
  const open = (m) => messageDetailDialog(m.msgId, m.topic, m);

  // by topic and time
  const t1 = topicInput('msg-topic-input');
  const range = timeRange('msg', 1);
  const out1 = h('div', { test: 'msg-topic-result' });
  let query1 = null;
  const paged = pagedResults(out1, (pageNum, taskId) => api('/message/queryMessagePageByTopic.query',
    { body: { ...query1, pageNum, pageSize: 20, taskId } }), (msgs) => messageTable(msgs, open), 'msg');
  panes.topic = h('div', null, formEl({ class: 'inline-form', test: 'msg-topic-form' }, async () => {
    const [begin, end] = range.read();
    query1 = { topic: required(t1.value, 'The topic'), begin, end };
    await paged.first();
  }, fld('Topic', t1), fld('Begin', range.begin), fld('End', range.end), h('button', { class: 'btn btn-primary', type: 'submit', test: 'msg-topic-search' }, 'Search')), out1);

  // by key
  const t2 = topicInput('msg-key-topic');
  const key = h('input', { type: 'text', test: 'msg-key-input', placeholder: 'Key', autocomplete: 'off', value: ctx.params.get('key') || '' });
  const out2 = h('div', { test: 'msg-key-result' });
  const keyForm = formEl({ class: 'inline-form', test: 'msg-key-form' }, async () => {
    const list = await api('/message/queryMessageByTopicAndKey.query', { query: { topic: required(t2.value, 'The topic'), key: required(key.value, 'The key') } });
    out2.replaceChildren(h('p', { class: 'hint' }, `${(list || []).length} message(s) (at most 64 are listed)`), messageTable(list || [], open));
  }, fld('Topic', t2), fld('Key', key), h('button', { class: 'btn btn-primary', type: 'submit', test: 'msg-key-search' }, 'Search'));
  panes.key = h('div', null, keyForm, out2);

  // by id
  const t3 = topicInput('msg-id-topic');
  const id = h('input', { type: 'text', test: 'msg-id-input', placeholder: 'Message ID', autocomplete: 'off', value: ctx.params.get('msgId') || '', style: 'min-width:340px' });
  const out3 = h('div', { test: 'msg-id-result' });
  const idForm = formEl({ class: 'inline-form', test: 'msg-id-form' }, async () => {
    const topic = required(t3.value, 'The topic');
    const msgId = required(id.value, 'The message ID');
    const data = await api('/message/viewMessage.query', { query: { msgId, topic } });
    out3.replaceChildren(messageTable([data.messageView], (m) => messageDetailDialog(m.msgId, m.topic, m, data)));
    messageDetailDialog(msgId, topic, data.messageView, data);
  }, fld('Topic', t3), fld('Message ID', id), h('button', { class: 'btn btn-primary', type: 'submit', test: 'msg-id-search' }, 'Search'));
  panes.id = h('div', null, idForm, out3);

  root.append(pageHead('Message'), h('div', { class: 'card' }, tabBar, Object.values(panes)));
  const start = ctx.params.get('msgId') ? 'id' : ctx.params.get('key') ? 'key' : 'topic';
  select(start);
  root.append(await topicDatalist('message-topics'));
  ctx.ready();
  if (start === 'id') idForm.requestSubmit();
  if (start === 'key' && t2.value) keyForm.requestSubmit();
} };

// ---------------------------------------------------------------------------------------------
// DLQ messages

PAGES.dlq = { title: 'DLQ Message', render: async (root, ctx) => {
  const group = h('input', { type: 'text', list: 'dlq-groups', test: 'dlq-group', placeholder: 'Consumer group', autocomplete: 'off', value: ctx.params.get('group') || '' });
  const range = timeRange('dlq', 3);
  const out = h('div', { test: 'dlq-result' });
  let query = null;
  let selected = new Map();
  const resend = async (msgs) => {
    if (!msgs.length) throw new Error('Select the messages to resend');
    const items = msgs.map((m) => {
      const p = m.properties || {};
      return { topicName: p.RETRY_TOPIC || m.topic, consumerGroup: query.group, msgId: p.ORIGIN_MESSAGE_ID || m.msgId };
    });
    const res = await api('/dlqMessage/batchResendDlqMessage.do', { body: items });
    modal('DLQ resend result', table([
      { t: 'Message ID', v: (r) => r.msgId, cls: 'mono break' },
      { t: 'Result', v: (r) => statusBadge(r.consumeResult === 'CR_SUCCESS', r.consumeResult, r.consumeResult || 'unknown') },
      { t: 'Remark', v: (r) => r.remark, cls: 'break' },
    ], res || [], { test: 'dlq-resend-result-table', rowTest: 'dlq-resend-result-row', rowName: (r) => r.msgId }), { test: 'dlq-resend-result-dialog', wide: true });
  };
  const render = (msgs) => {
    selected = new Map();
    const boxes = [];
    const all = h('input', { type: 'checkbox', test: 'dlq-select-all', title: 'Select all on this page', onchange: () => {
      boxes.forEach(([b, m]) => { b.checked = all.checked; if (all.checked) selected.set(m.msgId, m); else selected.delete(m.msgId); });
    } });
    const sel = {
      all,
      box: (m) => {
        const b = h('input', { type: 'checkbox', test: 'dlq-select', value: m.msgId, onchange: () => (b.checked ? selected.set(m.msgId, m) : selected.delete(m.msgId)) });
        boxes.push([b, m]);
        return b;
      },
      extra: (m) => button('RESEND', () => resend([m]), { test: 'dlq-resend-btn' }),
    };
    return h('div', null, h('div', { class: 'toolbar' },
      button('Resend selected', () => resend(Array.from(selected.values())), { test: 'dlq-resend-selected', small: false })),
    messageTable(msgs, (m) => messageDetailDialog(m.msgId, m.topic, m), { test: 'dlq-table', select: sel }));
  };
  const paged = pagedResults(out, (pageNum, taskId) => api('/dlqMessage/queryDlqMessageByConsumerGroup.query',
    { body: { topic: `%DLQ%${query.group}`, begin: query.begin, end: query.end, pageNum, pageSize: 20, taskId } }), render, 'dlq');
  const form = formEl({ class: 'inline-form', test: 'dlq-form' }, async () => {
    const [begin, end] = range.read();
    query = { group: realGroup(required(group.value, 'The consumer group')), begin, end };
    await paged.first();
  }, fld('Consumer group', group), fld('Begin', range.begin), fld('End', range.end), h('button', { class: 'btn btn-primary', type: 'submit', test: 'dlq-search' }, 'Search'));
  root.append(pageHead('DLQ Message'), h('div', { class: 'card' }, form,
    h('p', { class: 'note' }, 'Messages a group failed to consume too many times land in its dead-letter topic %DLQ%<group>.'), out));
  const groups = await tryApi('/consumer/groupList.query', { query: { skipSysGroup: true } }, 'Loading consumer groups');
  if (!ctx.alive) return;
  root.append(h('datalist', { id: 'dlq-groups' }, (groups || []).map((g) => g.group).sort().map((g) => h('option', { value: g }))));
  ctx.ready();
} };

// ---------------------------------------------------------------------------------------------
// Message trace

function traceNodeText(n) {
  const parts = [n.status ? `status ${n.status}` : null, n.costTime >= 0 ? `${n.costTime} ms` : null,
    n.retryTimes > 0 ? `retry ${n.retryTimes}` : null, n.clientHost ? `client ${n.clientHost}` : null,
    n.storeHost ? `store ${n.storeHost}` : null, n.beginTimestamp > 0 ? fmtTime(n.beginTimestamp) : null,
    n.transactionState ? `tx ${n.transactionState}` : null, n.msgType || null, n.fromTransactionCheck ? 'from check' : null];
  return parts.filter(Boolean).join(' · ');
}

function traceTimeline(g) {
  const rows = [];
  const pn = g.producerNode;
  if (pn && pn.traceNode) rows.push({ label: 'Producer', who: pn.groupName, node: pn.traceNode, kind: 'producer', test: 'trace-producer-node' });
  for (const tx of (pn && pn.transactionNodeList) || []) rows.push({ label: 'End transaction', who: tx.transactionState, node: tx, kind: 'tx', test: 'trace-transaction-node' });
  const subs = g.subscriptionNodeList || [];
  const times = [];
  for (const r of rows) times.push(r.node.beginTimestamp, r.node.endTimestamp);
  for (const sub of subs) for (const n of sub.consumeNodeList || []) times.push(n.beginTimestamp, n.endTimestamp);
  const valid = times.filter((t) => t > 0);
  const t0 = valid.length ? Math.min(...valid) : 0;
  const span = Math.max(1, (valid.length ? Math.max(...valid) : 0) - t0);
  const row = (label, who, n, kind, test, name) => {
    const begin = n.beginTimestamp > 0 ? n.beginTimestamp : null;
    const end = n.endTimestamp > 0 ? n.endTimestamp : begin;
    const bar = begin ? h('div', { class: `tl-bar ${kind === 'producer' ? 'producer' : String(n.status || 'unknown').toLowerCase()}`,
      style: `left:${((begin - t0) / span) * 100}%;width:${Math.max(0.4, ((end - begin) / span) * 100)}%`, title: traceNodeText(n) }) : null;
    return h('div', { class: 'tl-row', test, 'data-name': name || who || '', 'data-status': n.status || '' },
      h('div', { class: 'tl-label' }, h('b', null, label), who || ''),
      h('div', null, h('div', { class: 'tl-track' }, bar), h('div', { class: 'tl-text' }, traceNodeText(n))));
  };
  return h('div', { class: 'timeline', test: 'trace-graph' },
    valid.length ? h('div', { class: 'tl-axis' }, h('span', null, fmtTime(t0)), h('span', null, `+${fmtNum(span)} ms`)) : null,
    rows.map((r) => row(r.label, r.who, r.node, r.kind, r.test)),
    pn ? null : h('p', { class: 'muted', test: 'trace-no-producer' }, 'No producer trace was recorded for this message.'),
    subs.map((sub) => h('div', { test: 'trace-group', 'data-name': sub.subscriptionGroup },
      h('div', { class: 'tl-group' }, `Consumer group ${sub.subscriptionGroup}`),
      (sub.consumeNodeList || []).slice().sort((a, b) => a.beginTimestamp - b.beginTimestamp)
        .map((n, i) => row(`Consume #${i + 1}`, n.clientHost, n, 'consume', 'trace-consume-node', sub.subscriptionGroup)))),
    subs.length ? null : h('p', { class: 'muted' }, 'No consume trace was recorded for this message.'));
}

PAGES.trace = { title: 'Message Trace', render: async (root, ctx) => {
  const msgId = h('input', { type: 'text', test: 'trace-msgid', placeholder: 'Message ID', autocomplete: 'off', value: ctx.params.get('msgId') || '', style: 'min-width:340px' });
  const traceTopic = h('input', { type: 'text', list: 'trace-topics', test: 'trace-topic', autocomplete: 'off', value: ctx.params.get('traceTopic') || 'RMQ_SYS_TRACE_TOPIC' });
  const out = h('div', { test: 'trace-result' });
  const form = formEl({ class: 'inline-form', test: 'trace-form' }, async () => {
    const id = required(msgId.value, 'The message ID');
    const g = await api('/messageTrace/viewMessageTraceGraph.query', { query: { msgId: id, traceTopic: traceTopic.value.trim() || undefined } });
    const views = (g && g.messageTraceViews) || [];
    if (!g || (!g.producerNode && !(g.subscriptionNodeList || []).length && !views.length)) {
      out.replaceChildren(h('div', { class: 'empty-state', test: 'trace-empty' }, `No trace of ${id} in ${traceTopic.value.trim() || 'RMQ_SYS_TRACE_TOPIC'}.`));
      return;
    }
    const pn = g.producerNode;
    out.replaceChildren(
      pn ? kvGrid([['Topic', pn.topic], ['Message ID', pn.msgId], ['Tags', pn.tags], ['Keys', pn.keys], ['Offset msg ID', pn.offSetMsgId], ['Producer group', pn.groupName]], 'trace-message-info') : null,
      h('h3', null, 'Timeline'), traceTimeline(g),
      h('h3', null, 'Trace records'),
      table([
        { t: 'Type', v: (v) => v.traceType },
        { t: 'Time', v: (v) => fmtTime(v.timeStamp) },
        { t: 'Group', v: (v) => v.groupName },
        { t: 'Client host', v: (v) => v.clientHost, cls: 'mono' },
        { t: 'Store host', v: (v) => v.storeHost, cls: 'mono' },
        { t: 'Cost (ms)', v: (v) => v.costTime, num: true },
        { t: 'Status', v: (v) => (v.status ? badge(v.status, v.status === 'success' ? 'ok' : v.status === 'failed' ? 'bad' : '') : null) },
        { t: 'Retries', v: (v) => v.retryTimes, num: true },
        { t: 'Msg type', v: (v) => v.msgType },
        { t: 'Tx state', v: (v) => v.transactionState },
        { t: 'Topic', v: (v) => v.topic },
        { t: 'Tags', v: (v) => v.tags },
        { t: 'Keys', v: (v) => v.keys, cls: 'break' },
      ], views.slice().sort((a, b) => a.timeStamp - b.timeStamp), { test: 'trace-table', rowTest: 'trace-row', rowName: (v) => v.traceType }));
  }, fld('Message ID', msgId), fld('Trace topic', traceTopic), h('button', { class: 'btn btn-primary', type: 'submit', test: 'trace-search' }, 'Search'));
  root.append(pageHead('Message Trace'), h('div', { class: 'card' }, form, h('p', { class: 'note' },
    'Traces are recorded by clients with message trace enabled, in RMQ_SYS_TRACE_TOPIC unless they chose another topic.'), out));
  root.append(await topicDatalist('trace-topics'));
  ctx.ready();
  if (msgId.value) form.requestSubmit();
} };

// ---------------------------------------------------------------------------------------------
// ACL 2.0: users and policies on the brokers a cluster or broker name selects (all when none)

const ACL_ACTIONS = ['Pub', 'Sub', 'Create', 'Update', 'Delete', 'Get', 'List', 'All'];
const splitList = (text) => String(text || '').split(/[\s,;]+/).map((x) => x.trim()).filter(Boolean);

function aclUserDialog(target, user, onDone) {
  const update = !!user;
  const name = h('input', { type: 'text', test: 'acl-user-name', value: update ? user.username : '', readonly: update, autocomplete: 'off' });
  const password = h('input', { type: 'password', test: 'acl-user-password', autocomplete: 'new-password',
    placeholder: update ? 'unchanged when left blank' : '' });
  const type = selectBox(['Normal', 'Super'], update ? user.userType || 'Normal' : 'Normal', { test: 'acl-user-type' });
  const status = selectBox(['enable', 'disable'], update ? user.userStatus || 'enable' : 'enable', { test: 'acl-user-status' });
  const submit = button(update ? 'Update' : 'Create', async () => {
    const userInfo = { username: required(name.value, 'The username'), userType: type.value, userStatus: status.value };
    if (password.value) userInfo.password = password.value;
    else if (!update) throw new Error('The password is required');
    await api(update ? '/acl/updateUser.do' : '/acl/createUser.do', { body: { ...target(), userInfo } });
    toast(`User ${userInfo.username} ${update ? 'updated' : 'created'}`, 'success');
    dlg.close();
    onDone();
  }, { test: 'acl-user-submit', kind: 'primary', small: false });
  const dlg = modal(update ? `Update user ${user.username}` : 'Add user', h('form', { class: 'form', onsubmit: (e) => e.preventDefault() },
    h('label', null, 'Username'), name, h('label', null, 'Password'), password,
    h('label', null, 'Type'), type, h('label', null, 'Status'), status), { test: 'acl-user-dialog', actions: [submit] });
}

function aclPolicyDialog(target, entry, users, onDone) {
  const update = !!entry;
  const subject = h('input', { type: 'text', list: 'acl-subjects', test: 'acl-policy-subject', value: update ? entry.subject : '',
    readonly: update, placeholder: 'User:alice', autocomplete: 'off' });
  const subjects = h('datalist', { id: 'acl-subjects' }, users.map((u) => h('option', { value: `User:${u.username}` })));
  const policyType = selectBox(['Custom', 'Default'], update ? entry.policyType || 'Custom' : 'Custom', { test: 'acl-policy-type' });
  const resources = h('textarea', { test: 'acl-policy-resources', placeholder: 'Topic:orders\nGroup:g*', style: 'min-height:70px' });
  resources.value = update ? entry.resource || '' : '';
  const actions = checkGroup(ACL_ACTIONS, update ? entry.actions || [] : ['Pub', 'Sub'], { test: 'acl-policy-action' });
  const ips = h('input', { type: 'text', test: 'acl-policy-ips', value: update ? (entry.sourceIps || []).join(', ') : '', placeholder: 'any; or 10.0.0.0/8, 192.168.1.2' });
  const decision = selectBox(['Allow', 'Deny'], update ? entry.decision || 'Allow' : 'Allow', { test: 'acl-policy-decision' });
  const submit = button(update ? 'Update' : 'Create', async () => {
    const subj = required(subject.value, 'The subject');
    if (!/^User:.+/.test(subj)) throw new Error('A subject is written User:<name>');
    const resource = splitList(resources.value);
    if (!resource.length) throw new Error('Give at least one resource (Topic:name, Group:name, Cluster:name or *)');
    if (!actions.selected().length) throw new Error('Choose at least one action');
    await api(update ? '/acl/updateAcl.do' : '/acl/createAcl.do', { body: { ...target(), subject: subj, policies: [{ policyType: policyType.value,
      entries: [{ resource, actions: actions.selected(), sourceIps: splitList(ips.value), decision: decision.value }] }] } });
    toast(`Policy of ${subj} ${update ? 'updated' : 'created'}`, 'success');
    dlg.close();
    onDone();
  }, { test: 'acl-policy-submit', kind: 'primary', small: false });
  const dlg = modal(update ? `Update a policy of ${entry.subject}` : 'Add policy', [subjects, h('div', { class: 'form' },
    h('label', null, 'Subject'), subject, h('label', null, 'Policy type'), policyType,
    h('label', null, 'Resources (one a line)'), resources, h('label', null, 'Actions'), actions,
    h('label', null, 'Source IPs'), ips, h('label', null, 'Decision'), decision)], { test: 'acl-policy-dialog', actions: [submit], wide: false });
}

PAGES.acl = { title: 'ACL', render: async (root, ctx) => {
  const clusterSel = h('select', { test: 'acl-cluster', onchange: () => load() }, h('option', { value: '' }, 'every cluster'));
  const brokerSel = h('select', { test: 'acl-broker', onchange: () => load() }, h('option', { value: '' }, 'every broker'));
  const target = () => ({ clusterName: clusterSel.value || undefined, brokerName: brokerSel.value || undefined });
  const search = h('input', { type: 'search', test: 'acl-search', placeholder: 'Subject or resource contains…' });
  const usersBox = h('div', { test: 'acl-users' });
  const policiesBox = h('div', { test: 'acl-policies' });
  let users = [];
  const load = async () => {
    const [us, acls] = await Promise.all([
      tryApi('/acl/users.query', { query: target() }, 'Loading ACL users'),
      tryApi('/acl/acls.query', { query: { ...target(), searchParam: search.value.trim() || undefined } }, 'Loading ACL policies'),
    ]);
    if (!ctx.alive) return;
    if (us) {
      users = us;
      usersBox.replaceChildren(table([
        { t: 'Username', v: (u) => u.username },
        { t: 'Password', v: (u) => {
          const span = h('span', { class: 'mono' }, '••••••');
          return h('span', null, span, ' ', h('a', { href: '#/acl', onclick: (e) => { e.preventDefault(); span.textContent = span.textContent === '••••••' ? u.password || '(none)' : '••••••'; } }, 'show'));
        } },
        { t: 'Type', v: (u) => badge(u.userType || '-', u.userType === 'Super' ? 'warn' : 'info') },
        { t: 'Status', v: (u) => badge(u.userStatus || '-', u.userStatus === 'disable' ? 'bad' : 'ok') },
        { t: 'Operation', v: (u) => h('div', { class: 'actions' },
          button('EDIT', () => aclUserDialog(target, u, load), { test: 'acl-user-edit' }),
          button('DELETE', async () => {
            if (!await confirmDialog('Delete user', `Delete user ${u.username} from the selected brokers?`, { okText: 'Delete' })) return;
            await api('/acl/deleteUser.do', { method: 'POST', query: { ...target(), username: u.username } });
            toast(`User ${u.username} deleted`, 'success');
            await load();
          }, { test: 'acl-user-delete', kind: 'danger' })) },
      ], users, { test: 'acl-user-table', rowTest: 'acl-user-row', rowName: (u) => u.username, empty: 'No ACL 2.0 user' }));
    }
    if (acls) {
      const entries = acls.flatMap((a) => (a.policies || []).flatMap((p) => (p.entries || []).map((e) => ({ subject: a.subject, policyType: p.policyType, ...e }))));
      policiesBox.replaceChildren(table([
        { t: 'Subject', v: (e) => e.subject },
        { t: 'Policy type', v: (e) => e.policyType },
        { t: 'Resource', v: (e) => e.resource, cls: 'mono break' },
        { t: 'Actions', v: (e) => (e.actions || []).join(', ') },
        { t: 'Source IPs', v: (e) => ((e.sourceIps || []).length ? e.sourceIps.join(', ') : 'any') },
        { t: 'Decision', v: (e) => badge(e.decision || '-', e.decision === 'Deny' ? 'bad' : 'ok') },
        { t: 'Operation', v: (e) => h('div', { class: 'actions' },
          button('EDIT', () => aclPolicyDialog(target, e, users, load), { test: 'acl-policy-edit' }),
          button('DELETE', async () => {
            if (!await confirmDialog('Delete policy', `Delete the policy of ${e.subject} on ${e.resource}?`, { okText: 'Delete' })) return;
            await api('/acl/deleteAcl.do', { method: 'POST', query: { ...target(), subject: e.subject, resource: e.resource } });
            toast(`Policy of ${e.subject} on ${e.resource} deleted`, 'success');
            await load();
          }, { test: 'acl-policy-delete', kind: 'danger' })) },
      ], entries, { test: 'acl-policy-table', rowTest: 'acl-policy-row', rowName: (e) => `${e.subject} ${e.resource}`, empty: 'No ACL 2.0 policy' }));
    }
    ctx.ready();
  };
  root.append(pageHead('ACL', h('label', { class: 'hint' }, 'Brokers: ', clusterSel, ' ', brokerSel),
    button('Refresh', load, { test: 'acl-refresh-btn', small: false })),
  h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Users'),
    button('Add user', () => aclUserDialog(target, null, load), { test: 'acl-add-user-btn', kind: 'primary', small: false })), usersBox),
  h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Policies'),
    h('div', { class: 'toolbar', style: 'margin:0' }, formEl({ class: 'toolbar', style: 'margin:0' }, load, search,
      h('button', { class: 'btn', type: 'submit', test: 'acl-search-btn' }, 'Search')),
    button('Add policy', () => aclPolicyDialog(target, null, users, load), { test: 'acl-add-policy-btn', kind: 'primary', small: false }))), policiesBox),
  h('p', { class: 'note' }, 'ACL 2.0 users and policies, as the brokers hold them (ACL 1.0 accounts of plain_acl.yml are not shown).'));
  const cl = await tryApi('/cluster/list.query', {}, 'Loading the brokers');
  if (cl) {
    const info = cl.clusterInfo || {};
    clusterSel.append(...Object.keys(info.clusterAddrTable || {}).sort().map((c) => h('option', { value: c }, c)));
    brokerSel.append(...Object.keys(info.brokerAddrTable || {}).sort().map((b) => h('option', { value: b }, b)));
  }
  await load();
} };

// ---------------------------------------------------------------------------------------------
// Controller: the controller group and each broker group's master and SyncStateSet

const replicaList = (list) => (list || []).length ? h('div', { class: 'actions' }, list.map((r) =>
  h('span', { title: r.brokerAddress || '' }, badge(`${r.brokerId}${r.brokerAddress ? ' @ ' + r.brokerAddress : ''}`, r.alive === false ? 'bad' : 'ok')))) : '-';

PAGES.controller = { title: 'Controller', render: async (root, ctx) => {
  const updated = updatedLabel();
  const body = h('div', { test: 'controller-state' });
  root.append(pageHead('Controller', updated), body);
  await ctx.poll(async () => {
    const st = await tryApi('/controller/state.query', {}, 'Loading the controller state');
    if (!ctx.alive) return;
    if (st && !st.enabled) {
      body.replaceChildren(h('div', { class: 'card empty-state', test: 'controller-disabled' },
        'No broker runs in controller mode (enableControllerMode=true), so there is no controller to show.'));
      body.dataset.enabled = 'false';
    } else if (st) {
      body.dataset.enabled = 'true';
      const table2 = (st.syncStateData && st.syncStateData.replicasInfoTable) || {};
      body.replaceChildren(
        h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Controllers')),
          table([
            { t: 'Address', v: (c) => c.addr, cls: 'mono' },
            { t: 'Role', v: (c) => (c.error ? badge('unreachable', 'bad') : c.isLeader ? badge('LEADER', 'info') : badge('follower')) },
            { t: 'Group', v: (c) => c.group },
            { t: 'Leader', v: (c) => (c.leaderId ? `${c.leaderId}${c.leaderAddr ? ' @ ' + c.leaderAddr : ''}` : c.leaderAddr) },
            { t: 'Peers', v: (c) => c.peers, cls: 'mono break' },
            { t: 'Error', v: (c) => c.error, cls: 'break' },
          ], st.controllers || [], { test: 'controller-table', rowTest: 'controller-row', rowName: (c) => c.addr })),
        h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Broker groups')),
          st.syncStateError ? h('div', { class: 'error-box' }, st.syncStateError) : null,
          table([
            { t: 'Broker group', v: ([name]) => name },
            { t: 'Master', v: ([, r]) => (r.masterBrokerId !== null && r.masterBrokerId !== undefined ? `${r.masterBrokerId}${r.masterAddress ? ' @ ' + r.masterAddress : ''}` : badge('none', 'bad')) },
            { t: 'Master epoch', v: ([, r]) => r.masterEpoch, num: true },
            { t: 'SyncStateSet epoch', v: ([, r]) => r.syncStateSetEpoch, num: true },
            { t: 'In sync', v: ([, r]) => replicaList(r.inSyncReplicas) },
            { t: 'Not in sync', v: ([, r]) => replicaList(r.notInSyncReplicas) },
          ], Object.entries(table2).sort(([a], [b]) => a.localeCompare(b)), { test: 'controller-sync-table', rowTest: 'controller-sync-row', rowName: ([n]) => n,
            empty: 'The controller holds no broker group' })));
    }
    updated.touch();
    ctx.ready();
  }, 5000);
} };

// ---------------------------------------------------------------------------------------------
// Ops: name servers

PAGES.ops = { title: 'Ops', render: async (root, ctx) => {
  const current = h('div', { test: 'ops-current' });
  const list = h('div');
  const update = h('input', { type: 'text', test: 'ops-update-input', placeholder: '127.0.0.1:9876;127.0.0.2:9876', style: 'min-width:320px' });
  const add = h('input', { type: 'text', test: 'ops-add-input', placeholder: 'host:port', style: 'min-width:220px' });
  const use = async (addr) => {
    await api('/ops/updateNameSvrAddr.do', { method: 'POST', query: { nameSvrAddrList: addr } });
    toast(`Name server set to ${addr}`, 'success');
    await load();
  };
  const load = async () => {
    const data = await tryApi('/ops/homePage.query', {}, 'Loading name servers');
    if (!ctx.alive) return;
    if (data) {
      current.replaceChildren(kvGrid([['Current name server', data.currentNamesrv], ['VIP channel', String(!!data.useVIPChannel)], ['TLS', String(!!data.useTLS)]], 'ops-info'));
      if (!update.matches(':focus')) update.value = data.currentNamesrv || '';
      list.replaceChildren(table([
        { t: 'Name server', v: (a) => a, cls: 'mono' },
        { t: 'In use', v: (a) => (String(data.currentNamesrv || '').split(';').includes(a) ? badge('current', 'ok') : '') },
        { t: 'Operation', v: (a) => button('USE', () => use(a), { test: 'ops-use-btn' }) },
      ], data.namesvrAddrList || [], { test: 'ops-namesrv-table', rowTest: 'ops-namesrv-row', rowName: (a) => a, empty: 'No name server known' }));
    }
    ctx.ready();
  };
  root.append(pageHead('Ops', button('Refresh', load, { test: 'ops-refresh-btn', small: false })),
    h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Name servers')), current, list),
    h('div', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', null, 'Change the name server')),
      formEl({ class: 'inline-form', test: 'ops-update-form' }, () => use(required(update.value, 'The name server address')),
        fld('Name server addresses (separated by ;)', update), h('button', { class: 'btn btn-primary', type: 'submit', test: 'ops-update-btn' }, 'Update')),
      h('div', { style: 'height:14px' }),
      formEl({ class: 'inline-form', test: 'ops-add-form' }, async () => {
        const addr = required(add.value, 'The name server address');
        await api('/ops/addNameSvrAddr.do', { method: 'POST', query: { newNamesrvAddr: addr } });
        toast(`Name server ${addr} added`, 'success');
        add.value = '';
        await load();
      }, fld('Add a name server', add), h('button', { class: 'btn', type: 'submit', test: 'ops-add-btn' }, 'Add'))));
  await load();
} };

// ---------------------------------------------------------------------------------------------

window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (e) => {
  e.preventDefault();
  showError(e.reason, 'Unexpected error');
});
route();
