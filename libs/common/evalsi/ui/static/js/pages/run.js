// #/runs/:id: one run: its state and progress (live from WatchRun while it runs), metrics with intervals drawn as
// error bars, each metric's distribution, gates, budget use, the manifest, and the record table drilling down
// to a record's scores with their explanations (run_record.js).

import { errorBars, histogram } from '../charts.js';
import { fmtDuration, fmtInterval, fmtNumber, fmtTime, h, secondsBetween, table } from '../dom.js';
import { href } from '../routes.js';
import {
  ACTIVE_STATES, enumText, outcomeText, scoreFor, scoreText, stateBadge, userLabels,
} from './run_format.js';
import { recordDetail } from './run_record.js';
import { evaluatorAliases, RunResults } from './run_results.js';

// The record table's outcome filter (`show=` in the hash), over the rows loaded.
const RECORD_FILTERS = {
  all: { label: 'any outcome', keep: () => true },
  failed: { label: 'a failed check', keep: (row) => Object.values(row.results).some((result) =>
    result.outcome === 'OUTCOME_SCORED' && (result.scores || []).some((score) => score.passed === false)) },
  unscored: { label: 'a skip, error or cancel', keep: (row) => Object.values(row.results).some((result) =>
    result.outcome !== 'OUTCOME_SCORED') },
};

function overview(run) {
  const seconds = run.startTime ? secondsBetween(run.startTime, run.endTime) : null;
  const labels = userLabels(run.labels);
  return h('dl', { class: 'kv', id: 'run-overview' },
    h('dt', {}, 'Id'), h('dd', { class: 'mono' }, run.id),
    h('dt', {}, 'Project'), h('dd', {}, run.project || 'default'),
    h('dt', {}, 'Created'), h('dd', {}, fmtTime(run.createTime)),
    h('dt', {}, 'Duration'), h('dd', {}, seconds === null ? '\u2014' : fmtDuration(seconds)),
    h('dt', {}, 'Labels'), h('dd', {}, labels.length
      ? labels.map(([k, v]) => h('a', { class: 'badge', href: href('/runs', { labels: `${k}=${v}` }) }, `${k}=${v}`))
      : '\u2014'),
    run.createdBy ? [h('dt', {}, 'Started by'), h('dd', {}, run.createdBy)] : null,
    run.message ? [h('dt', {}, 'Message'), h('dd', {}, run.message)] : null);
}

function progressView(run) {
  const p = run.progress || {};
  const total = Number(p.totalTasks || 0);
  const done = Number(p.completed || 0);
  return h('div', { id: 'run-progress' },
    h('label', { for: 'run-progress-bar' }, `Tasks ${done} of ${total}`),
    h('progress', { id: 'run-progress-bar', max: Math.max(total, 1), value: done }),
    h('p', { class: 'muted' }, `Evaluations scored ${Number(p.scored || 0)}, skipped ${Number(p.skipped || 0)}, `
      + `errors ${Number(p.errors || 0)}, cancelled ${Number(p.cancelled || 0)}.`));
}

function metricsView(summaries) {
  if (!summaries.length) return [h('p', { class: 'empty' }, 'No metrics yet.')];
  const rows = summaries.map((s) => ({ ...s, n: Number(s.n || 0), skipped: Number(s.skipped || 0),
    errors: Number(s.errors || 0) }));
  const proportions = summaries.filter((s) => s.kind === 'VALUE_KIND_BOOLEAN' || /pass[@^]/.test(s.metric));
  const others = summaries.filter((s) => !proportions.includes(s));
  const item = (s) => ({ label: s.metric, mean: s.mean, lo: s.ci?.low, hi: s.ci?.high });
  const charts = [];
  if (proportions.length) {
    charts.push(h('figure', {}, errorBars(proportions.map(item), { domain: [0, 1], title: 'Pass rates with intervals' }),
      h('figcaption', {}, 'Pass rates: mean and interval, on 0 to 1.')));
  }
  for (const s of others) {
    charts.push(h('figure', {}, errorBars([item(s)], { title: `${s.metric} with its interval` }),
      h('figcaption', {}, `${s.metric}: mean and interval.`)));
  }
  return [
    table([
      { key: 'metric', label: 'Metric' },
      { key: 'n', label: 'n', numeric: true },
      { key: 'mean', label: 'Mean [interval]', numeric: true, value: (s) => s.mean,
        render: (s) => fmtInterval(s.mean, s.ci?.low, s.ci?.high) },
      { key: 'method', label: 'Interval', value: (s) => (s.ci?.method ? `${Math.round((s.ci.level || 0.95) * 100)}% ${s.ci.method}` : '') },
      { key: 'skipped', label: 'Skipped', numeric: true },
      { key: 'errors', label: 'Errors', numeric: true },
      { key: 'direction', label: 'Better', value: (s) => (s.higherIsBetter ? 'higher' : '') },
    ], rows, { caption: 'Metrics', filter: false }),
    h('div', { class: 'chart-row', id: 'metric-charts' }, charts),
  ];
}

function gatesView(gates) {
  if (!gates.length) return h('p', { class: 'empty' }, 'No gates.');
  return h('ul', { id: 'run-gates' }, gates.map((gate) => h('li', {},
    h('span', { class: gate.passed ? 'badge passed' : 'badge failed' }, gate.passed ? 'passed' : 'failed'), ' ',
    h('code', {}, gate.expression), gate.message ? h('div', { class: 'muted' }, gate.message) : null)));
}

function budgetView(run) {
  const budget = run.spec?.budget || {};
  const usage = run.progress?.usage || {};
  const tokens = Number(usage.totalTokens || 0) || Number(usage.inputTokens || 0) + Number(usage.outputTokens || 0);
  const seconds = run.startTime ? secondsBetween(run.startTime, run.endTime) : null;
  const row = (what, used, limit, fmt) => h('tr', {}, h('th', { scope: 'row' }, what),
    h('td', { class: 'num' }, fmt(used)), h('td', { class: 'num' }, limit ? fmt(limit) : 'no limit'),
    h('td', { class: 'num' }, limit && used !== null ? `${Math.round((100 * used) / limit)}%` : '\u2014'));
  const wall = budget.wallClock ? Number(String(budget.wallClock).replace(/s$/, '')) : 0;
  return h('table', { id: 'run-budget' }, h('caption', {}, 'Budget use (target and judge calls)'),
    h('thead', {}, h('tr', {}, ['Budget', 'Used', 'Limit', 'Share'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {},
      row('Tokens', tokens, Number(budget.tokens || 0), (v) => fmtNumber(v)),
      row('Cost (USD)', usage.costUsd ?? null, Number(budget.usd || 0), (v) => (v === null ? 'unknown' : `$${fmtNumber(v, 4)}`)),
      row('Wall clock', seconds, wall, (v) => fmtDuration(v))));
}

function manifestView(manifest) {
  if (!manifest || !Object.keys(manifest).length) return h('p', { class: 'empty' }, 'The manifest is written when the run ends.');
  const entry = (label, value) => (value ? [h('dt', {}, label), h('dd', {}, value)] : null);
  return h('div', { id: 'run-manifest' },
    h('dl', { class: 'kv' },
      entry('Dataset', manifest.dataset), entry('Dataset version', manifest.datasetVersion),
      entry('Target', manifest.target), entry('Spec hash', manifest.specHash), entry('Seed', manifest.seed),
      entry('Evals.si', manifest.evalsiVersion), entry('Created by', manifest.createdBy),
      entry('Not pinned', (manifest.unpinned || []).join(', '))),
    table([
      { key: 'alias', label: 'Evaluator' }, { key: 'ref', label: 'Reference' },
      { key: 'params', label: 'Parameters', value: (e) => (e.params ? JSON.stringify(e.params) : '') },
      { key: 'judge', label: 'Judge' },
    ], manifest.evaluators || [], { caption: 'Evaluators, pinned', filter: false }),
    h('details', {}, h('summary', {}, 'Package versions and judges'),
      h('pre', {}, JSON.stringify({ packages: manifest.packageVersions || {}, judges: manifest.judges || {},
        isolation: manifest.isolation || [] }, null, 2))));
}

function distributionsView(summaries, results) {
  const figures = [];
  for (const summary of summaries) {
    if (/pass[@^]/.test(summary.metric)) continue; // per-record estimates, not scores
    const { numbers, labels } = results.values(summary);
    if (numbers.length) {
      figures.push(h('figure', { class: 'distribution' }, histogram(numbers, { title: summary.metric }),
        h('figcaption', {}, `${summary.metric}: ${numbers.length} scored values`)));
    } else if (labels.size) {
      figures.push(h('figure', { class: 'distribution' }, table(
        [{ key: 'label', label: 'Label' }, { key: 'count', label: 'Count', numeric: true }],
        [...labels].map(([label, count]) => ({ label, count })), { caption: summary.metric, filter: false })));
    }
  }
  if (figures.length) return figures;
  // Every row read and none scored (a run whose target calls all failed, or cancelled before it scored): there is
  // nothing to draw, and "yet" would promise more.
  const text = results.complete
    ? 'No record was scored: errors, skips and cancellations carry no value to draw.'
    : 'No scored values loaded yet.';
  return [h('p', { class: 'empty', id: 'distributions-empty' }, text)];
}

export async function render(root, params, query, ctx) {
  const runPath = `/v1alpha1/runs/${encodeURIComponent(params.id)}`;
  let run = await ctx.api.get(runPath, undefined, ctx.signal);
  ctx.setTitle(`Run ${run.name || run.id}`);
  const badge = h('span', { id: 'run-state' }, stateBadge(run.state));
  const sections = {
    progress: h('section', { 'aria-labelledby': 'h-progress' }),
    metrics: h('section', { 'aria-labelledby': 'h-metrics' }),
    gates: h('section', { 'aria-labelledby': 'h-gates' }),
    budget: h('section', { 'aria-labelledby': 'h-budget' }),
  };
  const live = h('p', { class: 'muted', id: 'run-live', 'aria-live': 'polite' });

  function drawLive() {
    sections.progress.replaceChildren(h('h2', { id: 'h-progress' }, 'Progress'), progressView(run), live);
    sections.metrics.replaceChildren(h('h2', { id: 'h-metrics' }, 'Metrics'), ...metricsView(run.summaries || []));
    sections.gates.replaceChildren(h('h2', { id: 'h-gates' }, 'Gates'), gatesView(run.gates || []));
    sections.budget.replaceChildren(h('h2', { id: 'h-budget' }, 'Budget'), budgetView(run));
    badge.replaceChildren(stateBadge(run.state));
  }

  const compareOther = h('a', { href: href('/runs', {}), class: 'button secondary' }, 'Compare with another run');
  compareOther.addEventListener('click', (event) => {
    event.preventDefault();
    ctx.navigate(href('/runs', { compare: run.id }));
  });
  root.append(
    h('p', {}, h('a', { href: '#/runs' }, '\u2190 Runs')),
    h('h1', {}, run.name || run.id, ' ', badge),
    overview(run),
    h('p', {}, compareOther),
    sections.progress, sections.metrics, sections.gates, sections.budget);
  drawLive();

  const manifestSection = h('section', { 'aria-labelledby': 'h-manifest' },
    h('h2', { id: 'h-manifest' }, 'Manifest'), manifestView(run.manifest));
  const distributions = h('div', { class: 'chart-row', id: 'distributions' });
  const recordsArea = h('div', { id: 'records' });
  const detail = h('div', { id: 'record-detail' });
  root.append(
    h('section', { 'aria-labelledby': 'h-distributions' }, h('h2', { id: 'h-distributions' }, 'Distributions'), distributions),
    h('section', { 'aria-labelledby': 'h-records' }, h('h2', { id: 'h-records' }, 'Records'), recordsArea, detail),
    manifestSection);

  const aliases = evaluatorAliases(run);
  const results = new RunResults(ctx.api, run.id, aliases, ctx.signal);
  const metricColumns = (run.summaries || []).filter((s) => !/pass[@^]/.test(s.metric));
  const columns = [
    { key: 'recordId', label: 'Record' },
    { key: 'trial', label: 'Trial', numeric: true },
    ...metricColumns.map((summary) => ({
      key: `m:${summary.metric}`, label: summary.metric,
      value: (row) => {
        const result = row.results[summary.evaluator];
        if (!result) return '';
        return result.outcome === 'OUTCOME_SCORED' ? scoreText(scoreFor(result, summary.metric)) : outcomeText(result);
      },
    })),
  ];
  const selectedRecord = query.get('record');
  let show = RECORD_FILTERS[query.get('show')] ? query.get('show') : 'all';
  const runHash = (extra) => href(`/runs/${encodeURIComponent(run.id)}`, { show: show === 'all' ? '' : show, ...extra });
  // A record opens below the table without drawing the page again (the rows loaded stay); the hash still
  // names it, so the view is a link.
  function openRecord(recordId, trial) {
    window.history.replaceState(null, '', runHash({ record: recordId, trial: trial || '' }));
    recordDetail(detail, run, recordId, trial, results, ctx, () => window.history.replaceState(null, '', runHash({})))
      .catch(ctx.showError);
  }
  const recordTable = table(columns, [], {
    caption: 'One row per record and trial; choose a row for its scores, explanations and contents',
    onRowClick: (row) => openRecord(row.recordId, row.trial),
    rowLabel: (row) => `Record ${row.recordId}${row.trial ? `, trial ${row.trial}` : ''}`,
    filterLabel: 'Filter records',
    emptyText: 'No records to show (none loaded yet, or none with that outcome).',
  });
  const status = h('span', { class: 'muted', 'aria-live': 'polite' });
  const more = h('button', { type: 'button', id: 'records-more', class: 'secondary' }, 'Load more records');
  const drawRows = () => recordTable.setRows(results.records().filter((row) => RECORD_FILTERS[show].keep(row)));
  const showSelect = h('select', { id: 'records-show', onChange: (event) => {
    show = event.target.value;
    window.history.replaceState(null, '', runHash({}));
    drawRows();
  } }, Object.entries(RECORD_FILTERS).map(([value, filter]) => h('option', { value, selected: value === show }, filter.label)));
  recordsArea.append(h('div', { class: 'filters' }, h('label', { for: 'records-show' }, 'Show records with', showSelect)),
    recordTable, h('div', { class: 'pager' }, more, status));

  async function loadPage() {
    more.disabled = true;
    await results.loadMore();
    drawRows();
    distributions.replaceChildren(...distributionsView(run.summaries || [], results));
    more.hidden = results.complete;
    more.disabled = false;
    status.textContent = `${results.records().length} record rows loaded${results.complete ? ' (all)' : ''}.`
      + (results.complete ? '' : ' Distributions show the rows loaded.');
  }
  more.addEventListener('click', () => loadPage().catch(ctx.showError));
  await loadPage();
  if (selectedRecord !== null) openRecord(selectedRecord, Number(query.get('trial') || 0));

  if (!ACTIVE_STATES.has(run.state)) return undefined;
  // While it runs: WatchRun's events update the state, progress, metrics and gates in place; when it ends the page
  // is drawn again to read the final results and manifest.
  live.textContent = 'Live: watching the run.';
  const watch = new AbortController();
  const stop = () => watch.abort();
  ctx.signal.addEventListener('abort', stop);
  ctx.api.stream(`${runPath}:watch`, (event) => {
    run = { ...run, state: event.state || run.state, progress: event.progress || run.progress,
      summaries: event.summaries?.length ? event.summaries : run.summaries,
      gates: event.gates?.length ? event.gates : run.gates };
    drawLive();
    live.textContent = `Live: ${enumText(run.state, 'RUN_STATE_')} at ${fmtTime(event.time)}.`;
  }, watch.signal).then(() => {
    if (!watch.signal.aborted && !ctx.signal.aborted) ctx.navigate(window.location.hash);
  }).catch((err) => {
    if (!watch.signal.aborted) ctx.showError(err);
  });
  return stop;
}
