// The parts of a case report that only some runs have: `--trials N` (pass@k and pass^k per k over the cases, with
// their intervals, and each case's trials) and `--mode perf|both` (time to first byte and latency per turn).

import { fmtInterval, fmtNumber, h } from '../dom.js';
import { statusBadge } from './cases_format.js';

function aggregate(value) {
  if (!value || value.mean === null || value.mean === undefined) return 'n/a';
  return fmtInterval(value.mean, value.ci_low, value.ci_high);
}

export function trialsSection(trials) {
  const byK = trials.by_k || [];
  const cases = trials.cases || [];
  return h('section', { 'aria-labelledby': 'report-trials-heading', id: 'report-trials' },
    h('h2', { id: 'report-trials-heading' }, `Trials: ${trials.trials} per case`),
    h('p', { class: 'muted' }, trials.estimator || ''),
    h('table', { id: 'report-trials-by-k' },
      h('caption', {}, 'pass@k and pass^k over the cases with at least k graded trials [95% interval]'),
      h('thead', {}, h('tr', {}, ['k', 'Cases', 'pass@k', 'pass^k'].map((label) => h('th', { scope: 'col' }, label)))),
      h('tbody', {}, byK.map((row) => h('tr', {},
        h('th', { scope: 'row' }, String(row.k)),
        h('td', { class: 'num' }, `${row.cases}${row.left_out ? ` (${row.left_out} left out)` : ''}`),
        h('td', {}, aggregate(row.pass_at_k)),
        h('td', {}, aggregate(row.pass_hat_k)))))),
    h('table', { id: 'report-trials-cases' },
      h('caption', {}, 'Each case\u2019s trials'),
      h('thead', {}, h('tr', {}, ['Case', 'Passed of graded', 'Outcomes'].map((label) => h('th', { scope: 'col' }, label)))),
      h('tbody', {}, cases.map((entry) => h('tr', {},
        h('th', { scope: 'row' }, entry.case),
        h('td', { class: 'num' }, `${entry.c} / ${entry.n}`),
        h('td', {}, (entry.outcomes || []).flatMap((status, i) => (i ? [' ', statusBadge(status)] : [statusBadge(status)]))))))));
}

function timing(name, stats) {
  if (!stats || !stats.n) return h('li', {}, `${name}: not measured`);
  return h('li', {}, `${name}: p50 ${fmtNumber(stats.p50, 1)} ms, p95 ${fmtNumber(stats.p95, 1)} ms (n = ${stats.n})`);
}

export function perfSection(perf) {
  return h('section', { 'aria-labelledby': 'report-perf-heading', id: 'report-perf' },
    h('h2', { id: 'report-perf-heading' }, `Latency over ${perf.turns} turn(s)`),
    h('ul', {}, timing('Time to first byte', perf.ttfb_ms), timing('Whole answer', perf.latency_ms)));
}
