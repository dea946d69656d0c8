// #/policies/:name: one policy (GetPolicy), its window statistics over time (GetPolicyStats per window: each
// metric's mean per window drawn with its 95% interval band), the alerts it fired as evalsi-policy recorded them
// (ListPolicyAlerts), and the traces it promoted (each promotion is a new version of the dataset it names:
// ListDatasetVersions).

import { lineWithBand } from '../charts.js';
import { fmtDuration, fmtInterval, fmtNumber, fmtTime, h, table } from '../dom.js';
import { href } from '../routes.js';

const DEFAULT_WINDOWS = 48;
const MAX_WINDOWS = 2000;

function windowsWanted(query) {
  const text = query.get('windows');
  if (text === null || text === '') return DEFAULT_WINDOWS;
  const value = Number(text);
  return Number.isInteger(value) && value >= 0 ? Math.min(value, MAX_WINDOWS) : DEFAULT_WINDOWS;
}

function specList(stored) {
  const spec = stored.policy?.spec || {};
  const sampling = spec.sampling || {};
  const rows = [
    ['Selector', spec.selector ? h('code', {}, spec.selector) : 'every trace'],
    ['Sampling', `rate ${fmtNumber(sampling.rate ?? 0)}${(sampling.always || []).length ? `; always: ${sampling.always.join(', ')}` : ''}`],
    ['Window', fmtDuration(spec.window || '300s')],
    ['Generation', `${stored.generation || 0} (updated ${fmtTime(stored.updateTime)})`],
  ];
  return h('dl', { class: 'kv', id: 'policy-spec' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

const STAGE_COLUMNS = [
  { key: 'alias', label: 'Stage', value: (s) => s.alias || s.ref },
  { key: 'ref', label: 'Evaluator' },
  { key: 'when', label: 'Runs when', value: (s) => s.when || 'always' },
  { key: 'judge', label: 'Judge' },
  { key: 'params', label: 'Parameters', value: (s) => (s.params ? JSON.stringify(s.params) : '') },
];

const METRIC_COLUMNS = [
  { key: 'metric', label: 'Metric' },
  { key: 'n', label: 'n', numeric: true, value: (m) => Number(m.n || 0), render: (m) => String(Number(m.n || 0)) },
  { key: 'mean', label: 'Mean [95% interval]', numeric: true, value: (m) => m.mean, render: (m) => fmtInterval(m.mean, m.ciLow, m.ciHigh) },
  { key: 'method', label: 'Interval', value: (m) => m.method || 'none' },
  { key: 'skipped', label: 'Skipped (no content)', numeric: true, value: (m) => Number(m.skipped || 0),
    render: (m) => `${Number(m.skipped || 0)} (${Number(m.noContent || 0)})` },
  { key: 'errors', label: 'Errors', numeric: true, value: (m) => Number(m.errors || 0), render: (m) => String(Number(m.errors || 0)) },
  { key: 'evaluator', label: 'Evaluator' },
  {
    // ListTraces filters on a metric's stored scores (of any policy naming the metric so).
    key: 'traces', label: 'Traces', sortable: false,
    render: (m) => h('span', {}, h('a', { href: href('/traces', { metric: m.metric }) }, 'scored'),
      m.passFail ? [' \u00b7 ', h('a', { href: href('/traces', { metric: m.metric, max: '0' }) }, 'failed')] : null),
  },
];

// Each metric's series over the windows: {t, mean, lo, hi} per window that scored it.
function seriesByMetric(windows) {
  const series = new Map();
  for (const window of windows) {
    for (const metric of window.metrics || []) {
      if (!series.has(metric.metric)) series.set(metric.metric, { passFail: false, method: '', points: [] });
      const entry = series.get(metric.metric);
      entry.passFail = entry.passFail || Boolean(metric.passFail);
      entry.method = metric.method || entry.method;
      if (metric.mean !== undefined) {
        entry.points.push({ t: window.startTime, mean: metric.mean, lo: metric.ciLow, hi: metric.ciHigh, n: Number(metric.n || 0) });
      }
    }
  }
  return series;
}

function charts(windows) {
  const series = seriesByMetric(windows);
  if (!series.size) return h('p', { class: 'empty' }, 'No scored values in these windows.');
  return h('div', { class: 'chart-row', id: 'policy-charts' }, [...series].map(([metric, entry]) => h('figure', {
    class: 'metric-chart', dataset: { metric },
  },
  lineWithBand(entry.points, { title: `${metric}: mean per window`, domain: entry.passFail ? [0, 1] : undefined }),
  h('figcaption', {}, `${metric}: the mean of each window with its 95% interval (${entry.method || 'none'}) as the band; `
    + `${entry.points.length} window${entry.points.length === 1 ? '' : 's'}.`))));
}

function windowRows(windows) {
  return windows.slice().reverse().map((window) => ({
    start: window.startTime,
    traces: Number(window.tracesEvaluated || 0),
    metrics: (window.metrics || []).map((m) => `${m.metric} ${fmtInterval(m.mean, m.ciLow, m.ciHigh)} (n=${Number(m.n || 0)})`).join('; '),
    held: (window.alerts || []).filter((a) => a.held).map((a) => a.when).join('; '),
  }));
}

const WINDOW_COLUMNS = [
  { key: 'start', label: 'Window start', render: (w) => fmtTime(w.start) },
  { key: 'traces', label: 'Traces', numeric: true, render: (w) => String(w.traces) },
  { key: 'metrics', label: 'Metrics: mean [95% interval]' },
  { key: 'held', label: 'Alert rules held' },
];

// The newest alerts shown; `evalsi policies alerts NAME --limit N` lists more.
const ALERTS_SHOWN = 100;

const DELIVERY_WORDS = {
  ALERT_DELIVERY_DELIVERED: ['delivered', 'passed'],
  ALERT_DELIVERY_FAILED: ['failed', 'failed'],
  ALERT_DELIVERY_NOT_SENT: ['not sent', 'bad'],
};

function deliveryCell(alert) {
  const [word, badge] = DELIVERY_WORDS[alert.delivery] || ['unknown', ''];
  const detail = alert.error || (alert.httpStatus ? `HTTP ${alert.httpStatus}` : '');
  const attempts = Number(alert.attempts || 0);
  return h('span', {}, h('span', { class: `badge ${badge}` }, word),
    detail ? ` ${detail}` : '', attempts > 1 ? ` after ${attempts} attempts` : '');
}

function figures(values) {
  return Object.entries(values || {}).sort(([a], [b]) => a.localeCompare(b))
    .map(([key, value]) => `${key} = ${fmtNumber(value, 4)}`).join(', ');
}

const ALERT_COLUMNS = [
  { key: 'start', label: 'Window start', value: (a) => a.windowStartTime, render: (a) => fmtTime(a.windowStartTime) },
  { key: 'when', label: 'Rule', render: (a) => h('code', {}, a.when) },
  { key: 'values', label: 'Figures read', value: (a) => figures(a.values) },
  { key: 'fired', label: 'Fired at', value: (a) => a.fireTime, render: (a) => fmtTime(a.fireTime) },
  { key: 'delivery', label: 'Webhook', value: (a) => a.delivery, render: deliveryCell },
];

// The alerts evalsi-policy recorded as it fired them (ListPolicyAlerts), newest window first, with what became of
// each webhook; the rules as applied now above them.
async function alertsSection(stored, ctx) {
  const rules = stored.policy?.spec?.alerts || [];
  const section = h('section', { 'aria-labelledby': 'policy-alerts' }, h('h2', { id: 'policy-alerts' }, 'Alerts'));
  const answer = await ctx.api.get(`/v1alpha1/policies/${encodeURIComponent(stored.name)}/alerts`,
    { pageSize: ALERTS_SHOWN }, ctx.signal);
  const fired = answer.alerts || [];
  if (!rules.length && !fired.length) {
    section.append(h('p', { class: 'empty' }, 'This policy has no alert rules.'));
    return section;
  }
  section.append(rules.length
    ? h('ul', { id: 'policy-alert-rules' }, rules.map((rule) => h('li', {},
      h('code', {}, rule.when), ` \u2192 ${rule.notify} (at least ${Math.max(1, rule.minSamples || 0)} samples per metric)`)))
    : h('p', { class: 'empty' }, 'This policy has no alert rules now; the alerts below fired under earlier ones.'));
  const more = answer.nextPageToken ? ` The newest ${ALERTS_SHOWN} are shown; \`evalsi policies alerts ${stored.name} --limit N\` lists more.` : '';
  const alerts = table(ALERT_COLUMNS, fired, {
    caption: 'Alerts fired, newest window first', filter: false, emptyText: 'No alert fired yet.',
  });
  alerts.table.id = 'policy-alerts-table';
  section.append(
    h('p', { class: 'muted' }, 'A rule fires once per window, the first time it holds as scores arrive; evalsi-policy '
      + `records each alert with the figures it read and what became of its webhook.${more}`),
    alerts);
  return section;
}

const VERSION_COLUMNS = [
  { key: 'createTime', label: 'Promoted at', render: (v) => fmtTime(v.createTime) },
  { key: 'records', label: 'Records', numeric: true, value: (v) => Number(v.records || 0), render: (v) => String(Number(v.records || 0)) },
  { key: 'version', label: 'Version', render: (v) => h('code', { title: v.version }, (v.version || '').slice(0, 12)) },
  { key: 'ref', label: 'Use in a run as', render: (v) => h('code', {}, v.ref) },
];

async function promotionsSection(stored, ctx) {
  const promote = stored.policy?.spec?.promote;
  const section = h('section', { 'aria-labelledby': 'policy-promotions' }, h('h2', { id: 'policy-promotions' }, 'Promotions'));
  if (!promote?.dataset) {
    section.append(h('p', { class: 'empty' }, 'This policy promotes no traces.'));
    return section;
  }
  const name = promote.dataset.replace(/^datasets\//, '').replace(/@.*$/, '');
  section.append(h('p', {}, 'Traces where ', h('code', {}, promote.when), ' holds join the dataset ',
    h('code', {}, promote.dataset), ', each as a new version (the record id is the trace id).'));
  // A dataset nothing was promoted into yet has no versions (not a 404).
  const answer = await ctx.api.get(`/v1alpha1/datasets/${encodeURIComponent(name)}`, undefined, ctx.signal);
  const versions = answer.versions || [];
  const promotions = table(VERSION_COLUMNS, versions.slice().reverse(), {
    caption: `Versions of ${promote.dataset}, newest first`, filter: false, emptyText: 'No trace promoted yet.',
  });
  promotions.table.id = 'policy-promotions-table';
  section.append(promotions);
  return section;
}

export async function render(root, params, query, ctx) {
  const name = params.name;
  ctx.setTitle(`Policy ${name}`);
  const base = `/v1alpha1/policies/${encodeURIComponent(name)}`;
  const wanted = windowsWanted(query);
  const [stored, stats] = await Promise.all([
    ctx.api.get(base, undefined, ctx.signal),
    ctx.api.get(`${base}/stats`, { perWindow: true, lastWindows: wanted || '' }, ctx.signal),
  ]);
  const windows = stats.windows || [];
  const spec = stored.policy?.spec || {};

  const rangeForm = h('form', { class: 'filters', id: 'policy-range', 'aria-label': 'Windows shown' },
    h('label', { for: 'policy-windows' }, 'Last windows (0: all)',
      h('input', { id: 'policy-windows', name: 'windows', type: 'number', min: 0, max: MAX_WINDOWS, value: String(wanted) })),
    h('button', { type: 'submit' }, 'Show'));
  rangeForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const value = String(new FormData(rangeForm).get('windows') || '');
    ctx.navigate(href(`/policies/${encodeURIComponent(name)}`, { windows: value === String(DEFAULT_WINDOWS) ? '' : value }));
  });

  root.append(
    h('p', {}, h('a', { href: '#/policies' }, '\u2190 Policies')),
    h('h1', {}, 'Policy ', h('code', {}, name)),
    specList(stored),
    h('section', { 'aria-labelledby': 'policy-cascade' }, h('h2', { id: 'policy-cascade' }, 'Cascade'),
      table(STAGE_COLUMNS, spec.cascade || [], { caption: 'Stages, in order', filter: false })),
    h('section', { 'aria-labelledby': 'policy-stats' },
      h('h2', { id: 'policy-stats' }, 'Window statistics'),
      rangeForm,
      h('p', { class: 'muted', id: 'policy-range-text' }, `${stats.startTime ? `Since ${fmtTime(stats.startTime)}` : 'Every stored score'}: `
        + `${Number(stats.tracesEvaluated || 0)} traces evaluated in ${windows.length} window${windows.length === 1 ? '' : 's'} `
        + `of ${fmtDuration(stats.window || '300s')}.`),
      table(METRIC_COLUMNS, stats.metrics || [], { caption: 'Per metric over the range', filter: false, emptyText: 'No scores in this range.' }),
      charts(windows),
      h('details', {}, h('summary', {}, `Every window (${windows.length})`),
        table(WINDOW_COLUMNS, windowRows(windows), { caption: 'Windows, newest first', filter: false }))),
    await alertsSection(stored, ctx),
    await promotionsSection(stored, ctx));
}
