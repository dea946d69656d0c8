// SVG charts with no library: each returns an <svg role="img"> with a <title> and an aria-label saying what it
// shows in words, so a screen reader gets the figures a sighted reader sees. Colours come from the theme (CSS
// classes in app.css), never from style attributes (the page's CSP allows no inline styles).

import { fmtNumber } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';

export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function frame(width, height, label) {
  const root = svg('svg', {
    class: 'chart', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': label,
  });
  root.append(svg('title', {}, label));
  return root;
}

function finite(value) {
  return value !== null && value !== undefined && Number.isFinite(Number(value));
}

// A linear scale [d0, d1] → [r0, r1]; a degenerate domain maps to the middle of the range.
function scale(d0, d1, r0, r1) {
  if (d1 === d0) return () => (r0 + r1) / 2;
  return (value) => r0 + ((value - d0) / (d1 - d0)) * (r1 - r0);
}

function extent(values, pad = 0) {
  const finiteValues = values.filter(finite).map(Number);
  if (!finiteValues.length) return [0, 1];
  let lo = Math.min(...finiteValues);
  let hi = Math.max(...finiteValues);
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const margin = (hi - lo) * pad;
  return [lo - margin, hi + margin];
}

// Mean with its interval per metric, one row each: items [{label, mean, lo, hi}]. `domain` fixes the x axis
// ([0, 1] for proportions); otherwise it spans every interval, and zero when `zero` is set (differences).
export function errorBars(items, { domain, zero = false, title = 'Means with their intervals' } = {}) {
  const rowHeight = 26;
  const left = 170;
  const right = 20;
  const width = 560;
  const height = 30 + rowHeight * Math.max(items.length, 1);
  const values = items.flatMap((item) => [item.mean, item.lo, item.hi]);
  if (zero) values.push(0);
  const [d0, d1] = domain || extent(values, 0.05);
  const x = scale(d0, d1, left, width - right);
  const described = items.map((item) => `${item.label}: ${fmtNumber(item.mean)}`
    + (finite(item.lo) && finite(item.hi) ? ` (${fmtNumber(item.lo)} to ${fmtNumber(item.hi)})` : ''));
  const root = frame(width, height, `${title}. ${described.join('; ')}`);
  const axisY = height - 20;
  root.append(
    svg('line', { class: 'axis', x1: left, x2: width - right, y1: axisY, y2: axisY }),
    svg('text', { x: left, y: height - 6, 'text-anchor': 'start' }, fmtNumber(d0)),
    svg('text', { x: width - right, y: height - 6, 'text-anchor': 'end' }, fmtNumber(d1)),
  );
  if (zero && d0 < 0 && d1 > 0) {
    root.append(svg('line', { class: 'zero', x1: x(0), x2: x(0), y1: 4, y2: axisY }));
  }
  items.forEach((item, index) => {
    const y = 14 + index * rowHeight;
    const group = svg('g', { class: 'error-bar' });
    group.append(svg('text', { x: left - 8, y: y + 4, 'text-anchor': 'end' }, truncate(item.label, 26)));
    if (finite(item.lo) && finite(item.hi)) {
      group.append(
        svg('line', { class: 'whisker', x1: x(item.lo), x2: x(item.hi), y1: y, y2: y }),
        svg('line', { class: 'whisker', x1: x(item.lo), x2: x(item.lo), y1: y - 5, y2: y + 5 }),
        svg('line', { class: 'whisker', x1: x(item.hi), x2: x(item.hi), y1: y - 5, y2: y + 5 }),
      );
    }
    if (finite(item.mean)) group.append(svg('circle', { class: 'point', cx: x(item.mean), cy: y, r: 4.5 }));
    root.append(group);
  });
  return root;
}

// The distribution of numbers as a histogram (`bins` equal-width bins; a value set of only 0 and 1 gets two).
export function histogram(values, { bins = 10, title = 'Distribution' } = {}) {
  const numbers = values.filter(finite).map(Number);
  const width = 320;
  const height = 150;
  const pad = { left: 34, right: 10, top: 10, bottom: 28 };
  const binary = numbers.length > 0 && numbers.every((v) => v === 0 || v === 1);
  const count = binary ? 2 : Math.max(1, Math.min(bins, numbers.length || 1));
  const [lo, hi] = binary ? [0, 1] : extent(numbers);
  const step = binary ? 1 : (hi - lo) / count;
  const counts = new Array(count).fill(0);
  for (const value of numbers) {
    const index = binary ? value : Math.min(count - 1, Math.floor((value - lo) / step));
    counts[index] += 1;
  }
  const most = Math.max(1, ...counts);
  const edges = counts.map((_, i) => (binary ? String(i) : `${fmtNumber(lo + i * step)}\u2013${fmtNumber(lo + (i + 1) * step)}`));
  const label = `${title}: ${numbers.length} values; ${counts.map((c, i) => `${edges[i]}: ${c}`).join(', ')}`;
  const root = frame(width, height, label);
  const plotW = width - pad.left - pad.right;
  const barW = plotW / count;
  const y = scale(0, most, height - pad.bottom, pad.top);
  counts.forEach((c, i) => {
    const top = y(c);
    root.append(svg('rect', {
      class: 'bar', x: pad.left + i * barW + 1, y: top, width: Math.max(1, barW - 2), height: height - pad.bottom - top,
    }, svg('title', {}, `${edges[i]}: ${c}`)));
  });
  root.append(
    svg('line', { class: 'axis', x1: pad.left, x2: width - pad.right, y1: height - pad.bottom, y2: height - pad.bottom }),
    svg('text', { x: pad.left - 4, y: pad.top + 8, 'text-anchor': 'end' }, String(most)),
    svg('text', { x: pad.left - 4, y: height - pad.bottom, 'text-anchor': 'end' }, '0'),
    svg('text', { x: pad.left, y: height - 10, 'text-anchor': 'start' }, binary ? '0' : fmtNumber(lo)),
    svg('text', { x: width - pad.right, y: height - 10, 'text-anchor': 'end' }, binary ? '1' : fmtNumber(hi)),
  );
  return root;
}

// A time series with its interval band: points [{t (RFC 3339 or ms), mean, lo, hi}], in any order.
export function lineWithBand(points, { title = 'Over time', domain } = {}) {
  const width = 640;
  const height = 220;
  const pad = { left: 48, right: 12, top: 12, bottom: 30 };
  const rows = points
    .map((p) => ({ ...p, ms: typeof p.t === 'number' ? p.t : new Date(p.t).getTime() }))
    .filter((p) => Number.isFinite(p.ms))
    .sort((a, b) => a.ms - b.ms);
  const [t0, t1] = rows.length ? [rows[0].ms, rows[rows.length - 1].ms] : [0, 1];
  const [v0, v1] = domain || extent(rows.flatMap((p) => [p.mean, p.lo, p.hi]), 0.05);
  const x = scale(t0, t1, pad.left, width - pad.right);
  const y = scale(v0, v1, height - pad.bottom, pad.top);
  const last = rows[rows.length - 1];
  const label = `${title}: ${rows.length} points` + (last ? `; latest ${fmtNumber(last.mean)}`
    + (finite(last.lo) && finite(last.hi) ? ` (${fmtNumber(last.lo)} to ${fmtNumber(last.hi)})` : '') : '');
  const root = frame(width, height, label);
  const banded = rows.filter((p) => finite(p.lo) && finite(p.hi));
  if (banded.length) {
    const upper = banded.map((p) => `${x(p.ms)},${y(p.hi)}`);
    const lower = banded.slice().reverse().map((p) => `${x(p.ms)},${y(p.lo)}`);
    root.append(svg('path', { class: 'band', d: `M${upper.join('L')}L${lower.join('L')}Z` }));
  }
  const line = rows.filter((p) => finite(p.mean));
  if (line.length) {
    root.append(svg('path', { class: 'line', d: `M${line.map((p) => `${x(p.ms)},${y(p.mean)}`).join('L')}` }));
    for (const p of line) root.append(svg('circle', { class: 'point', cx: x(p.ms), cy: y(p.mean), r: 2.5 }));
  }
  const when = (ms) => new Date(ms).toISOString().slice(5, 16).replace('T', ' ');
  root.append(
    svg('line', { class: 'axis', x1: pad.left, x2: width - pad.right, y1: height - pad.bottom, y2: height - pad.bottom }),
    svg('line', { class: 'axis', x1: pad.left, x2: pad.left, y1: pad.top, y2: height - pad.bottom }),
    svg('text', { x: pad.left - 4, y: pad.top + 8, 'text-anchor': 'end' }, fmtNumber(v1)),
    svg('text', { x: pad.left - 4, y: height - pad.bottom, 'text-anchor': 'end' }, fmtNumber(v0)),
  );
  if (rows.length) {
    root.append(
      svg('text', { x: pad.left, y: height - 10, 'text-anchor': 'start' }, when(t0)),
      svg('text', { x: width - pad.right, y: height - 10, 'text-anchor': 'end' }, when(t1)),
    );
  }
  return root;
}

function truncate(text, length) {
  const value = String(text ?? '');
  return value.length > length ? `${value.slice(0, length - 1)}\u2026` : value;
}
