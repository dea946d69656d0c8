// Building the page: elements, formatting, a sortable and filterable table, loading and empty states, the banner.
//
// Text always goes in as text (textContent or text nodes), never as markup: strings from the API are data.

// h('a', {href: '#/runs', class: 'x', onClick: fn}, 'text', child, [more]) → an element. Attributes: `class`,
// `on<Event>` (a listener), `dataset` (an object), boolean true (present) / false, null or undefined (absent);
// anything else is set as an attribute. Children: nodes, strings and numbers (as text), arrays (flattened);
// null, undefined and false are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs);
  append(el, children);
  return el;
}

export function setAttributes(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key === 'value' && 'value' in el) {
      el.value = value;
    } else if (key === 'checked' && 'checked' in el) {
      el.checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

const DASH = '\u2014';

// 0.8 → "0.800"; integers as integers ("1,250", "0", "1"); null/undefined/NaN → an em dash.
export function fmtNumber(value, digits = 3) {
  if (value === null || value === undefined || value === '') return DASH;
  const number = Number(value);
  if (!Number.isFinite(number)) return DASH;
  if (Number.isInteger(number)) return number.toLocaleString('en-US');
  if (number !== 0 && Math.abs(number) < 10 ** -digits) return number.toExponential(1);
  return number.toFixed(digits);
}

// A statistic with fixed decimals whatever its value ("1.000" beside "0.975"), large ones grouped, and one too
// small for them in three significant digits ("9.21e-6": a cost per record of a cheap model is not "0.000").
export function fmtStat(value, digits = 3) {
  if (value === null || value === undefined || value === '') return DASH;
  const number = Number(value);
  if (!Number.isFinite(number)) return DASH;
  if (Math.abs(number) >= 1000) return number.toLocaleString('en-US', { maximumFractionDigits: 1 });
  if (number !== 0 && Math.abs(number) < 0.5 * 10 ** -digits) return number.toExponential(2);
  return number.toFixed(digits);
}

// mean with its interval: "0.800 [0.444, 0.975]"; the bracket is left out when the interval is unknown.
export function fmtInterval(mean, lo, hi, digits = 3) {
  const centre = fmtStat(mean, digits);
  if (lo === null || lo === undefined || hi === null || hi === undefined) return centre;
  return `${centre} [${fmtStat(lo, digits)}, ${fmtStat(hi, digits)}]`;
}

// An RFC 3339 time (the protobuf JSON of a Timestamp) → "2026-12-02 18:22:44 UTC": one zone for every reader of a
// shared link.
export function fmtTime(value) {
  if (!value) return DASH;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return `${date.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

// Seconds, or a protobuf JSON Duration ("1.500s") → "1.5 s", "2 min 3 s", "1 h 4 min".
export function fmtDuration(value) {
  if (value === null || value === undefined || value === '') return DASH;
  const seconds = typeof value === 'string' ? Number(value.replace(/s$/, '')) : Number(value);
  if (!Number.isFinite(seconds)) return String(value);
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${Number(seconds.toFixed(seconds < 10 ? 2 : 1))} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

// The whole seconds between two RFC 3339 times (end defaults to now).
export function secondsBetween(start, end) {
  if (!start) return null;
  const to = end ? new Date(end) : new Date();
  return (to.getTime() - new Date(start).getTime()) / 1000;
}

export function loading(root, text = 'Loading\u2026') {
  clear(root);
  root.append(h('p', { class: 'loading', role: 'status' }, text));
}

export function empty(root, text) {
  const note = h('p', { class: 'empty' }, text);
  root.append(note);
  return note;
}

// The error banner under the top bar (role=alert, so a screen reader announces it).
export function showBanner(message) {
  const banner = document.getElementById('banner');
  document.getElementById('banner-text').textContent = message;
  banner.hidden = false;
}

export function clearBanner() {
  document.getElementById('banner').hidden = true;
}

let tableCount = 0;

// A sortable, filterable table.
//   columns: [{key, label, value?(row) → the sort and filter value, render?(row) → node or text, numeric?,
//              sortable? (default true)}]
//   rows: plain objects.
//   options: {caption, onRowClick(row, event), rowLabel(row) → the row's accessible name, filter (default true),
//             filterLabel, emptyText}
// Returns the wrapper element; wrapper.setRows(rows) replaces the rows, keeping the sort and the filter.
export function table(columns, rows, options = {}) {
  const id = `table-${++tableCount}`;
  const state = { rows: rows.slice(), sortKey: null, descending: false, filter: '' };
  const valueOf = (column, row) => (column.value ? column.value(row) : row[column.key]);
  const tbody = h('tbody');
  const countNote = h('span', { class: 'muted', 'aria-live': 'polite' });
  const headers = columns.map((column) => {
    const th = h('th', { scope: 'col', class: column.numeric ? 'num' : null });
    if (column.sortable === false) {
      th.textContent = column.label;
    } else {
      th.append(h('button', { type: 'button', class: 'sort', onClick: () => sortBy(column, th) }, column.label));
    }
    return th;
  });

  function sortBy(column, th) {
    state.descending = state.sortKey === column.key ? !state.descending : false;
    state.sortKey = column.key;
    for (const other of headers) other.removeAttribute('aria-sort');
    th.setAttribute('aria-sort', state.descending ? 'descending' : 'ascending');
    draw();
  }

  function visible() {
    const needle = state.filter.toLowerCase();
    let out = state.rows;
    if (needle) {
      out = out.filter((row) => columns.some((column) => {
        const value = valueOf(column, row);
        return value !== null && value !== undefined && String(value).toLowerCase().includes(needle);
      }));
    }
    if (state.sortKey !== null) {
      const column = columns.find((c) => c.key === state.sortKey);
      const sign = state.descending ? -1 : 1;
      out = out.slice().sort((a, b) => sign * compare(valueOf(column, a), valueOf(column, b)));
    }
    return out;
  }

  function draw() {
    const shown = visible();
    tbody.replaceChildren(...shown.map(rowElement));
    if (shown.length === 0) {
      tbody.append(h('tr', {}, h('td', { colspan: columns.length, class: 'empty' },
        state.rows.length ? 'No rows match the filter.' : options.emptyText || 'Nothing to show.')));
    }
    countNote.textContent = state.filter ? `${shown.length} of ${state.rows.length} shown` : '';
  }

  function rowElement(row) {
    const cells = columns.map((column, index) => {
      const content = column.render ? column.render(row) : fmtCell(valueOf(column, row));
      const attrs = { class: column.numeric ? 'num' : null };
      return index === 0 ? h('th', { ...attrs, scope: 'row' }, content) : h('td', attrs, content);
    });
    const tr = h('tr', {}, cells);
    if (options.onRowClick) {
      tr.classList.add('clickable');
      tr.tabIndex = 0;
      if (options.rowLabel) tr.setAttribute('aria-label', options.rowLabel(row));
      tr.addEventListener('click', (event) => {
        if (event.target.closest('a, button, input, select, summary')) return;
        options.onRowClick(row, event);
      });
      tr.addEventListener('keydown', (event) => {
        if (event.target !== tr) return;
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          options.onRowClick(row, event);
        } else if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
          event.preventDefault();
          const next = event.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling;
          if (next && next.tabIndex === 0) next.focus();
        }
      });
    }
    return tr;
  }

  const parts = [];
  if (options.filter !== false) {
    const input = h('input', {
      id: `${id}-filter`, type: 'search', maxlength: 200,
      onInput: (event) => { state.filter = event.target.value; draw(); },
    });
    parts.push(h('div', { class: 'table-filter' },
      h('label', { for: `${id}-filter` }, options.filterLabel || 'Filter rows'), input, countNote));
  }
  const tableEl = h('table', { id },
    options.caption ? h('caption', {}, options.caption) : null,
    h('thead', {}, h('tr', {}, headers)),
    tbody);
  parts.push(h('div', { class: 'table-wrap' }, tableEl));
  const wrapper = h('div', { class: 'data-table' }, parts);
  wrapper.setRows = (next) => { state.rows = next.slice(); draw(); };
  wrapper.table = tableEl;
  draw();
  return wrapper;
}

function fmtCell(value) {
  if (typeof value === 'number') return fmtNumber(value);
  if (value === null || value === undefined || value === '') return DASH;
  return String(value);
}

function compare(a, b) {
  const missingA = a === null || a === undefined || a === '';
  const missingB = b === null || b === undefined || b === '';
  if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), 'en', { numeric: true });
}
