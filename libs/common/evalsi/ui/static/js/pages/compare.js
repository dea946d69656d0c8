// #/compare?a=:id&b=:id: two runs side by side. CompareRuns gives each metric's paired difference with its
// interval, test and verdict; the records whose pass/fail outcome flipped between the runs are found here from
// both runs' results (ListRunResults), paired by record and trial as the comparison pairs them.

import { errorBars } from '../charts.js';
import { fmtInterval, fmtTime, h, table } from '../dom.js';
import { href } from '../routes.js';
import { outcomeText, scoreFor, stateBadge, summaryText } from './run_format.js';
import { evaluatorAliases, RunResults } from './run_results.js';

// Results read per run for the flips; past it the page says the flips cover the records read.
const MAX_RESULT_PAGES = 50;
const RECENT_RUNS = 50;
const FLIPS = { all: 'every flip', worse: 'pass \u2192 fail', better: 'fail \u2192 pass', outcome: 'outcome changed' };

async function loadAll(api, run, signal) {
  const results = new RunResults(api, run.id, evaluatorAliases(run), signal);
  for (let page = 0; page < MAX_RESULT_PAGES && !results.complete; page += 1) await results.loadMore();
  return results;
}

// The pass/fail state of one metric in one result: 'pass', 'fail', or the outcome when it was not scored.
function passState(result, metric) {
  if (!result) return null;
  if (result.outcome !== 'OUTCOME_SCORED') return outcomeText(result);
  const score = scoreFor(result, metric);
  if (!score || typeof score.passed !== 'boolean') return null;
  return score.passed ? 'pass' : 'fail';
}

// Every (metric, record, trial) whose pass/fail state differs between A and B, for the pass/fail metrics.
export function flips(summaries, resultsA, resultsB) {
  const rowsB = new Map(resultsB.records().map((row) => [`${row.recordId}\u0000${row.trial}`, row]));
  const out = [];
  for (const summary of summaries) {
    if (summary.kind !== 'VALUE_KIND_BOOLEAN') continue;
    for (const rowA of resultsA.records()) {
      const rowB = rowsB.get(`${rowA.recordId}\u0000${rowA.trial}`);
      if (!rowB) continue;
      const a = passState(rowA.results[summary.evaluator], summary.metric);
      const b = passState(rowB.results[summary.evaluator], summary.metric);
      if (a === null || b === null || a === b) continue;
      const kind = a === 'pass' && b === 'fail' ? 'worse' : a === 'fail' && b === 'pass' ? 'better' : 'outcome';
      out.push({ metric: summary.metric, recordId: rowA.recordId, trial: rowA.trial, a, b, kind });
    }
  }
  return out;
}

function sideBySide(runA, runB) {
  const metrics = [...new Set([...(runA.summaries || []), ...(runB.summaries || [])].map((s) => s.metric))];
  const find = (run, metric) => (run.summaries || []).find((s) => s.metric === metric);
  const rows = metrics.map((metric) => ({ metric, a: find(runA, metric), b: find(runB, metric) }));
  const runCell = (run) => h('div', {},
    h('a', { href: `#/runs/${encodeURIComponent(run.id)}` }, run.name || run.id), ' ', stateBadge(run.state),
    h('div', { class: 'muted' }, `${run.id} \u00b7 ${fmtTime(run.createTime)}`),
    h('div', { class: 'muted' }, run.manifest?.dataset ? `${run.manifest.dataset} @ ${(run.manifest.datasetVersion || '').slice(0, 12)}` : ''));
  return [
    h('div', { class: 'grid-2', id: 'compare-runs' },
      h('div', { class: 'panel' }, h('h2', {}, 'A (baseline)'), runCell(runA)),
      h('div', { class: 'panel' }, h('h2', {}, 'B (candidate)'), runCell(runB))),
    table([
      { key: 'metric', label: 'Metric' },
      { key: 'a', label: 'A: mean [interval]', value: (row) => row.a?.mean, render: (row) => (row.a ? summaryText(row.a) : 'absent'), numeric: true },
      { key: 'b', label: 'B: mean [interval]', value: (row) => row.b?.mean, render: (row) => (row.b ? summaryText(row.b) : 'absent'), numeric: true },
    ], rows, { caption: 'Each run\u2019s own metrics (unpaired)', filter: false }),
  ];
}

function differences(comparison) {
  const metrics = comparison.metrics || [];
  const rows = metrics.map((m) => ({ ...m, nPairs: Number(m.nPairs || 0), unpaired: Number(m.unpaired || 0) }));
  const verdict = (m) => h('span', { class: `badge verdict-${(m.verdict || '').split(' ')[0]}` }, m.verdict || '\u2014');
  return [
    table([
      { key: 'metric', label: 'Metric' },
      { key: 'nPairs', label: 'Pairs', numeric: true },
      { key: 'meanA', label: 'Mean A', numeric: true },
      { key: 'meanB', label: 'Mean B', numeric: true },
      { key: 'diff', label: 'B \u2212 A [interval]', numeric: true, value: (m) => m.diff,
        render: (m) => fmtInterval(m.diff, m.ci?.low, m.ci?.high) },
      { key: 'pValue', label: 'p', numeric: true },
      { key: 'pValueAdjusted', label: `p (${comparison.adjust || 'holm'})`, numeric: true },
      { key: 'test', label: 'Test' },
      { key: 'verdict', label: 'Verdict', value: (m) => m.verdict || '', render: verdict },
      { key: 'mde', label: 'MDE', numeric: true },
      { key: 'unpaired', label: 'Unpaired', numeric: true },
    ], rows, { caption: 'Paired differences, B minus A', filter: false }),
    metrics.length ? h('figure', {}, errorBars(metrics.map((m) => ({ label: m.metric, mean: m.diff, lo: m.ci?.low, hi: m.ci?.high })),
      { zero: true, title: 'Differences B minus A with intervals' }),
    h('figcaption', {}, 'Each metric\u2019s difference with its interval; an interval clear of the dashed zero line is a difference.')) : null,
  ];
}

function flipsView(found, query, runA, runB, complete, ctx) {
  const metric = query.get('metric') || '';
  const kind = FLIPS[query.get('flip')] ? query.get('flip') : 'all';
  const shown = found.filter((f) => (!metric || f.metric === metric) && (kind === 'all' || f.kind === kind));
  const metrics = [...new Set(found.map((f) => f.metric))];
  const go = (extra) => ctx.navigate(href('/compare', {
    a: runA.id, b: runB.id, confidence: query.get('confidence'), adjust: query.get('adjust'),
    metric, flip: kind === 'all' ? '' : kind, ...extra }));
  const metricSelect = h('select', { id: 'flip-metric', onChange: (e) => go({ metric: e.target.value }) },
    h('option', { value: '' }, 'every pass/fail metric'),
    metrics.map((m) => h('option', { value: m, selected: m === metric }, m)));
  const kindSelect = h('select', { id: 'flip-kind', onChange: (e) => go({ flip: e.target.value === 'all' ? '' : e.target.value }) },
    Object.entries(FLIPS).map(([value, label]) => h('option', { value, selected: value === kind }, label)));
  const recordLink = (run, f) => h('a', { href: href(`/runs/${encodeURIComponent(run.id)}`, { record: f.recordId, trial: f.trial || '' }) }, f.recordId);
  return [
    h('div', { class: 'filters' },
      h('label', { for: 'flip-metric' }, 'Metric', metricSelect),
      h('label', { for: 'flip-kind' }, 'Flip', kindSelect)),
    table([
      { key: 'recordId', label: 'Record', render: (f) => recordLink(runB, f) },
      { key: 'trial', label: 'Trial', numeric: true },
      { key: 'metric', label: 'Metric' },
      { key: 'a', label: 'In A', render: (f) => h('span', { class: f.a === 'pass' ? 'passed' : 'failed' }, f.a) },
      { key: 'b', label: 'In B', render: (f) => h('span', { class: f.b === 'pass' ? 'passed' : 'failed' }, f.b) },
      { key: 'kind', label: 'Flip', value: (f) => FLIPS[f.kind] },
      { key: 'inA', label: 'Record in A', sortable: false, render: (f) => recordLink(runA, f) },
    ], shown, {
      caption: `${shown.length} of ${found.length} flipped outcomes` + (complete ? '' : ' (among the results read: the runs are larger)'),
      filterLabel: 'Filter flips', emptyText: 'No outcome flipped.',
    }),
  ];
}

// The form naming the two runs; its run fields suggest the project's recent runs (ListRuns' first page).
function pickForm(query, ctx, recent) {
  const runField = (id, name) => h('input', { id, name, required: true, value: query.get(name) || '', maxlength: 200,
    list: 'recent-runs', autocomplete: 'off' });
  const form = h('form', { class: 'filters', id: 'compare-form', 'aria-label': 'Runs to compare' },
    h('datalist', { id: 'recent-runs' }, recent.map((run) => h('option', { value: run.id }, `${run.name || run.id} · ${fmtTime(run.createTime)}`))),
    h('label', { for: 'compare-a' }, 'Run A (baseline)', runField('compare-a', 'a')),
    h('label', { for: 'compare-b' }, 'Run B (candidate)', runField('compare-b', 'b')),
    h('label', { for: 'compare-confidence' }, 'Confidence', h('select', { id: 'compare-confidence', name: 'confidence' },
      ['0.9', '0.95', '0.99'].map((c) => h('option', { value: c, selected: c === (query.get('confidence') || '0.95') }, c)))),
    h('label', { for: 'compare-adjust' }, 'Adjust p-values', h('select', { id: 'compare-adjust', name: 'adjust' },
      ['holm', 'bh', 'none'].map((a) => h('option', { value: a, selected: a === (query.get('adjust') || 'holm') }, a)))),
    h('button', { type: 'submit' }, 'Compare'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    ctx.navigate(href('/compare', { a: data.get('a').trim(), b: data.get('b').trim(),
      confidence: data.get('confidence') === '0.95' ? '' : data.get('confidence'),
      adjust: data.get('adjust') === 'holm' ? '' : data.get('adjust') }));
  });
  return form;
}

export async function render(root, params, query, ctx) {
  ctx.setTitle('Compare runs');
  const recent = await ctx.api.get('/v1alpha1/runs', { page_size: RECENT_RUNS }, ctx.signal);
  root.append(h('h1', {}, 'Compare runs'), pickForm(query, ctx, recent.runs || []));
  const a = query.get('a');
  const b = query.get('b');
  if (!a || !b) {
    root.append(h('p', { class: 'muted' }, 'Name two runs, or select two on the ', h('a', { href: '#/runs' }, 'runs page'), '.'));
    return;
  }
  const runPath = (id) => `/v1alpha1/runs/${encodeURIComponent(id)}`;
  const body = { runA: a, runB: b, confidence: Number(query.get('confidence') || 0.95), adjust: query.get('adjust') || '' };
  const [runA, runB, comparison] = await Promise.all([
    ctx.api.get(runPath(a), undefined, ctx.signal), ctx.api.get(runPath(b), undefined, ctx.signal),
    ctx.api.post('/v1alpha1/runs:compare', body, ctx.signal)]);
  ctx.setTitle(`Compare ${runA.name || a} and ${runB.name || b}`);
  const flipsSection = h('section', { 'aria-labelledby': 'h-flips' }, h('h2', { id: 'h-flips' }, 'Records whose outcome flipped'),
    h('p', { class: 'loading', role: 'status' }, 'Reading both runs\u2019 results\u2026'));
  root.append(
    ...sideBySide(runA, runB),
    h('section', { 'aria-labelledby': 'h-diff' }, h('h2', { id: 'h-diff' }, 'Differences'), ...differences(comparison)),
    flipsSection);
  const [resultsA, resultsB] = await Promise.all([loadAll(ctx.api, runA, ctx.signal), loadAll(ctx.api, runB, ctx.signal)]);
  const summaries = (runA.summaries || []).filter((s) => (runB.summaries || []).some((t) => t.metric === s.metric));
  const found = flips(summaries, resultsA, resultsB);
  flipsSection.replaceChildren(h('h2', { id: 'h-flips' }, 'Records whose outcome flipped'),
    ...flipsView(found, query, runA, runB, resultsA.complete && resultsB.complete, ctx));
}
