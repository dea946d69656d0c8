// #/traces: the project's traces, newest first (ListTraces), filtered by the API: service, session, errors, a
// score range on one metric, labels and a start-time range. Every filter lives in the hash, so a filtered list is a
// link; pages follow the API's page tokens (the tokens already passed are kept in the hash too, for "Previous").
// Only the table's own filter box works in the browser, on the rows of the page shown.

import { fmtDuration, fmtNumber, fmtTime, h, table } from '../dom.js';
import { href } from '../routes.js';

const PAGE_SIZES = ['25', '50', '100', '200'];
const TEXT_FILTERS = [
  { key: 'service', label: 'Service', param: 'serviceName', placeholder: 'support-agent' },
  { key: 'session', label: 'Session', param: 'sessionId', placeholder: 'session id' },
  { key: 'labels', label: 'Labels', placeholder: 'team=a, env=prod' },
];
const SCORE_FILTERS = [
  { key: 'metric', label: 'Score metric', placeholder: 'e.g. polite' },
  { key: 'min', label: 'Min score', type: 'number' },
  { key: 'max', label: 'Max score', type: 'number' },
];
const ERRORS = [['', 'Any'], ['true', 'With errors'], ['false', 'Without errors']];
// Hash keys a filter change keeps; the paging keys (page, back) start over.
const FILTER_KEYS = ['service', 'session', 'labels', 'errors', 'metric', 'min', 'max', 'from', 'to', 'size'];

// "2026-12-02T18:05" (a datetime-local value, read as UTC) → the RFC 3339 time ListTraces takes.
function utc(value) {
  return value ? `${value.length === 16 ? `${value}:00` : value}Z` : '';
}

function filtersOf(query) {
  return Object.fromEntries(FILTER_KEYS.map((key) => [key, query.get(key) || '']));
}

function requestParams(filters, page) {
  const labels = filters.labels.split(',').map((item) => item.trim()).filter(Boolean);
  return {
    serviceName: filters.service,
    sessionId: filters.session,
    hasError: filters.errors,
    scoreMetric: filters.metric,
    minScore: filters.min,
    maxScore: filters.max,
    labels,
    startTime: utc(filters.from),
    endTime: utc(filters.to),
    pageSize: filters.size || PAGE_SIZES[0],
    pageToken: page,
  };
}

function field(filter, value) {
  const id = `traces-${filter.key}`;
  return h('label', { for: id }, filter.label,
    h('input', {
      id, name: filter.key, type: filter.type || 'text', value, placeholder: filter.placeholder || null,
      step: filter.type === 'number' ? 'any' : null, maxlength: filter.type ? null : 256, autocomplete: 'off',
    }));
}

// The sizes offered, and the one a link named when it is not among them, so the select shows what is used.
function pageSizes(size) {
  return size && !PAGE_SIZES.includes(size) ? [size, ...PAGE_SIZES] : PAGE_SIZES;
}

function filterForm(filters, ctx) {
  const form = h('form', { class: 'filters', 'aria-label': 'Trace filters' },
    TEXT_FILTERS.map((filter) => field(filter, filters[filter.key])),
    h('label', { for: 'traces-errors' }, 'Errors',
      h('select', { id: 'traces-errors', name: 'errors' },
        ERRORS.map(([value, text]) => h('option', { value, selected: value === filters.errors }, text)))),
    SCORE_FILTERS.map((filter) => field(filter, filters[filter.key])),
    h('label', { for: 'traces-from' }, 'Started from (UTC)',
      h('input', { id: 'traces-from', name: 'from', type: 'datetime-local', value: filters.from })),
    h('label', { for: 'traces-to' }, 'Started before (UTC)',
      h('input', { id: 'traces-to', name: 'to', type: 'datetime-local', value: filters.to })),
    h('label', { for: 'traces-size' }, 'Per page',
      h('select', { id: 'traces-size', name: 'size' }, pageSizes(filters.size).map((size) => h('option', {
        value: size, selected: size === (filters.size || PAGE_SIZES[0]),
      }, size)))),
    h('button', { type: 'submit', id: 'traces-apply' }, 'Search'),
    h('a', { href: '#/traces', class: 'button secondary' }, 'Clear'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = Object.fromEntries(FILTER_KEYS.map((key) => [key, String(data.get(key) || '').trim()]));
    if (next.size === PAGE_SIZES[0]) next.size = '';
    ctx.navigate(href('/traces', next));
  });
  return form;
}

function labelsText(labels) {
  return Object.entries(labels || {}).map(([key, value]) => `${key}=${value}`).join(', ');
}

const COLUMNS = [
  {
    key: 'root', label: 'Trace', value: (t) => `${t.rootName || ''} ${t.traceId}`,
    render: (t) => h('span', {}, h('a', { href: `#/traces/${encodeURIComponent(t.traceId)}` }, t.rootName || '(no root yet)'),
      h('br'), h('code', { class: 'muted' }, t.traceId)),
  },
  { key: 'serviceName', label: 'Service' },
  {
    key: 'sessionId', label: 'Session',
    render: (t) => (t.sessionId ? h('a', { href: href('/traces', { session: t.sessionId }) }, t.sessionId) : '\u2014'),
  },
  { key: 'startTime', label: 'Started', render: (t) => fmtTime(t.startTime) },
  { key: 'duration', label: 'Duration', numeric: true, value: (t) => Number(String(t.duration || '0s').replace(/s$/, '')),
    render: (t) => fmtDuration(t.duration) },
  { key: 'spanCount', label: 'Spans', numeric: true, value: (t) => Number(t.spanCount || 0), render: (t) => String(Number(t.spanCount || 0)) },
  {
    key: 'errorCount', label: 'Errors', numeric: true, value: (t) => Number(t.errorCount || 0),
    render: (t) => (t.errorCount ? h('span', { class: 'badge bad' }, String(t.errorCount)) : '0'),
  },
  {
    key: 'tokens', label: 'Tokens in / out', numeric: true,
    value: (t) => Number(t.inputTokens || 0) + Number(t.outputTokens || 0),
    render: (t) => `${fmtNumber(Number(t.inputTokens || 0))} / ${fmtNumber(Number(t.outputTokens || 0))}`,
  },
  {
    key: 'state', label: 'State', value: (t) => (t.completeTime ? 'complete' : 'open'),
    render: (t) => h('span', { class: `badge ${t.completeTime ? 'good' : 'state-running'}` }, t.completeTime ? 'complete' : 'open'),
  },
  { key: 'labels', label: 'Labels', value: (t) => labelsText(t.labels) },
];

export async function render(root, params, query, ctx) {
  ctx.setTitle('Traces');
  const filters = filtersOf(query);
  const page = query.get('page') || '';
  const back = (query.get('back') || '').split(',').filter(Boolean);
  root.append(h('h1', {}, 'Traces'), filterForm(filters, ctx));
  const status = h('p', { class: 'loading', role: 'status' }, 'Loading traces\u2026');
  root.append(status);
  let answer;
  try {
    answer = await ctx.api.get('/v1alpha1/traces', requestParams(filters, page), ctx.signal);
  } catch (err) {
    // A filter the API refuses (a bound without its metric, a range that ends before it starts): its message in
    // the banner, and the form stays to correct it.
    status.remove();
    if (err.name !== 'AbortError') ctx.showError(err);
    return;
  }
  const traces = answer.traces || [];
  status.remove();
  const filtered = FILTER_KEYS.some((key) => key !== 'size' && filters[key]);
  root.append(h('p', { class: 'muted', id: 'traces-count', 'aria-live': 'polite' },
    `${traces.length} trace${traces.length === 1 ? '' : 's'} on this page${filtered ? ', filtered' : ''}.`));
  root.append(table(COLUMNS, traces, {
    caption: 'Traces, newest first',
    filterLabel: 'Filter this page',
    emptyText: filtered ? 'No trace matches these filters.' : 'No traces yet: send some over OTLP (docs/watch.md).',
    rowLabel: (t) => `trace ${t.rootName || ''} ${t.traceId}`,
    onRowClick: (t) => ctx.navigate(`#/traces/${encodeURIComponent(t.traceId)}`),
  }));
  const keep = Object.fromEntries(FILTER_KEYS.map((key) => [key, filters[key]]));
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages of traces' });
  if (page) {
    const previous = back.length ? back[back.length - 1] : '-';
    pager.append(h('a', {
      href: href('/traces', { ...keep, page: previous === '-' ? '' : previous, back: back.slice(0, -1).join(',') }),
      id: 'traces-previous',
    }, 'Previous page'),
      h('a', { href: href('/traces', keep) }, 'First page'));
  }
  if (answer.nextPageToken) {
    // '-' stands for the first page (whose token is empty) in the trail of pages passed.
    const trail = [...back, page || '-'].join(',');
    pager.append(h('a', { href: href('/traces', { ...keep, page: answer.nextPageToken, back: trail }), id: 'traces-next' },
      'Next page'));
  }
  if (pager.childElementCount) root.append(pager);
}
