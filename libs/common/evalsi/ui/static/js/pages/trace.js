// #/traces/:id: one trace (GetTrace): its summary, its steps as a tree with timing, tokens, cost and tool calls, the
// online scores the policies stored, and the feedback joined to it, with a form that adds feedback
// (AddFeedback, POST /v1alpha1/feedback) and shows it once stored.

import { fmtDuration, fmtNumber, fmtTime, h, table } from '../dom.js';
import { href } from '../routes.js';
import { contentNode, seconds, stepTree } from './trace_tree.js';

const FEEDBACK_NAMES = ['thumbs', 'rating', 'label', 'comment', 'resolved'];

function summaryList(trace) {
  const s = trace.summary || {};
  const usage = trace.record?.usage || {};
  const labels = Object.entries(s.labels || {});
  const rows = [
    ['Trace id', h('code', {}, s.traceId)],
    ['Service', s.serviceName || '\u2014'],
    ['Session', s.sessionId ? h('a', { href: href('/traces', { session: s.sessionId }) }, s.sessionId) : '\u2014'],
    ['Started', fmtTime(s.startTime)],
    ['Duration', fmtDuration(s.duration)],
    ['Spans', String(s.spanCount || 0)],
    ['Errors', s.errorCount ? h('span', { class: 'badge bad' }, String(s.errorCount)) : '0'],
    ['Tokens', `${fmtNumber(Number(s.inputTokens || 0))} in / ${fmtNumber(Number(s.outputTokens || 0))} out`],
    // An unset cost is unknown (no step reported one), not zero.
    ['Cost', usage.costUsd !== undefined ? `$${fmtNumber(usage.costUsd, 4)}` : 'unknown (no step reported a cost)'],
    ['Completed', s.completeTime ? fmtTime(s.completeTime) : 'not yet (spans may still arrive)'],
    ['Revision', String(s.revision || 0)],
    labels.length ? ['Labels', labels.map(([k, v]) => `${k}=${v}`).join(', ')] : null,
  ].filter(Boolean);
  return h('dl', { class: 'kv', id: 'trace-summary' }, rows.map(([key, value]) => [h('dt', {}, key), h('dd', {}, value)]));
}

function scoreValue(score) {
  if (score.outcome !== 'scored') return '\u2014';
  if (score.passed !== undefined) return h('span', { class: `badge ${score.passed ? 'passed' : 'failed'}` }, score.passed ? 'pass' : 'fail');
  if (score.label) return score.label;
  return fmtNumber(score.value);
}

const SCORE_COLUMNS = [
  { key: 'metric', label: 'Metric' },
  { key: 'policy', label: 'Policy', render: (s) => h('a', { href: `#/policies/${encodeURIComponent(s.policy)}` }, s.policy) },
  { key: 'outcome', label: 'Outcome', render: (s) => h('span', { class: `badge ${s.outcome === 'error' ? 'bad' : ''}` }, s.outcome) },
  { key: 'value', label: 'Value', numeric: true, value: (s) => s.value, render: scoreValue },
  { key: 'reason', label: 'Reason' },
  { key: 'evaluator', label: 'Evaluator' },
  { key: 'stage', label: 'Stage' },
  { key: 'revision', label: 'Revision', numeric: true, value: (s) => Number(s.revision || 0), render: (s) => String(Number(s.revision || 0)) },
  { key: 'scoreTime', label: 'Scored', render: (s) => fmtTime(s.scoreTime) },
];

const FEEDBACK_COLUMNS = [
  { key: 'name', label: 'Name' },
  { key: 'value', label: 'Value', numeric: true, value: (f) => f.value },
  { key: 'label', label: 'Label' },
  { key: 'comment', label: 'Comment' },
  { key: 'source', label: 'Source' },
  { key: 'negative', label: 'Negative', value: (f) => (f.negative ? 'yes' : 'no') },
  { key: 'scope', label: 'Joined by', value: (f) => (f.traceId ? 'trace' : `session ${f.sessionId}`) },
  { key: 'createTime', label: 'Time', render: (f) => fmtTime(f.createTime) },
];

function feedbackForm(traceId, onStored, ctx) {
  const note = h('p', { id: 'feedback-status', role: 'status', class: 'muted' });
  const form = h('form', { class: 'filters', id: 'feedback-form', 'aria-label': 'Add feedback' },
    h('label', { for: 'feedback-name' }, 'Name',
      h('input', { id: 'feedback-name', name: 'name', list: 'feedback-names', value: 'thumbs', required: true, maxlength: 128 })),
    h('datalist', { id: 'feedback-names' }, FEEDBACK_NAMES.map((name) => h('option', { value: name }))),
    h('label', { for: 'feedback-value' }, 'Value (negative is bad)',
      h('input', { id: 'feedback-value', name: 'value', type: 'number', step: 'any' })),
    h('label', { for: 'feedback-label' }, 'Label', h('input', { id: 'feedback-label', name: 'label', maxlength: 256 })),
    h('label', { for: 'feedback-comment' }, 'Comment',
      h('textarea', { id: 'feedback-comment', name: 'comment', rows: 2, maxlength: 4096 })),
    h('label', { class: 'check', for: 'feedback-negative' },
      h('input', { id: 'feedback-negative', name: 'negative', type: 'checkbox' }), 'Negative'),
    h('button', { type: 'submit', id: 'feedback-submit' }, 'Add feedback'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const feedback = { traceId, name: String(data.get('name')).trim(), source: 'ui' };
    const value = String(data.get('value') || '').trim();
    if (value) feedback.value = Number(value);
    for (const key of ['label', 'comment']) {
      const text = String(data.get(key) || '').trim();
      if (text) feedback[key] = text;
    }
    if (data.get('negative')) feedback.negative = true;
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    note.textContent = 'Storing\u2026';
    try {
      const stored = await ctx.api.post('/v1alpha1/feedback', { feedback }, ctx.signal);
      note.textContent = `Stored feedback ${stored.name}${stored.negative ? ' (negative: the policies look at the trace again)' : ''}.`;
      form.reset();
      await onStored();
    } catch (err) {
      note.textContent = 'Not stored.';
      ctx.showError(err);
    } finally {
      button.disabled = false;
    }
  });
  return h('div', {}, form, note);
}

export async function render(root, params, query, ctx) {
  const id = params.id;
  ctx.setTitle(`Trace ${id.slice(0, 8)}`);
  const path = `/v1alpha1/traces/${encodeURIComponent(id)}`;
  const trace = await ctx.api.get(path, undefined, ctx.signal);
  const s = trace.summary || {};
  ctx.setTitle(`${s.rootName || 'Trace'} ${id.slice(0, 8)}`);
  const record = trace.record || {};
  const steps = record.trajectory?.steps || [];
  const tools = steps.filter((step) => step.toolCall).length;

  root.append(
    h('p', {}, h('a', { href: '#/traces' }, '\u2190 Traces')),
    h('h1', {}, s.rootName || 'Trace', ' ', h('code', { class: 'muted' }, id)),
    summaryList(trace),
    h('div', { class: 'grid-2' },
      h('section', { 'aria-labelledby': 'trace-input' }, h('h2', { id: 'trace-input' }, 'Input'), contentNode(record.input)),
      h('section', { 'aria-labelledby': 'trace-output' }, h('h2', { id: 'trace-output' }, 'Output'), contentNode(record.output))),
    h('section', { 'aria-labelledby': 'trace-steps' },
      h('h2', { id: 'trace-steps' }, 'Steps'),
      h('p', { class: 'muted' }, `${steps.length} step${steps.length === 1 ? '' : 's'}, ${tools} tool call${tools === 1 ? '' : 's'}; `
        + `the bars place each step on the trace's ${fmtDuration(stepsSpan(steps))}.`),
      stepTree(trace)),
    h('section', { 'aria-labelledby': 'trace-scores' },
      h('h2', { id: 'trace-scores' }, 'Online scores'),
      table(SCORE_COLUMNS, trace.scores || [], {
        caption: 'Scores the online policies stored for this trace', filter: false,
        emptyText: 'No online score: no policy selected this trace, or it is not evaluated yet.',
      })));

  const feedbackTable = table(FEEDBACK_COLUMNS, trace.feedback || [], {
    caption: 'Feedback on this trace and its session', filter: false, emptyText: 'No feedback yet.',
  });
  feedbackTable.table.id = 'feedback-table';
  const reload = async () => {
    const fresh = await ctx.api.get(path, undefined, ctx.signal);
    feedbackTable.setRows(fresh.feedback || []);
  };
  root.append(h('section', { 'aria-labelledby': 'trace-feedback' },
    h('h2', { id: 'trace-feedback' }, 'Feedback'), feedbackTable,
    h('h3', {}, 'Add feedback'), feedbackForm(id, reload, ctx)));
}

function stepsSpan(steps) {
  const starts = steps.map((step) => new Date(step.startTime).getTime() / 1000);
  const ends = steps.map((step, i) => starts[i] + seconds(step.duration));
  return steps.length ? Math.max(...ends) - Math.min(...starts) : 0;
}
