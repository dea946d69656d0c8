// What the runs, run and compare pages share: how a run's state, labels, scores and contents read.

import { fmtInterval, fmtNumber, h } from '../dom.js';

export const RUN_STATES = [
  'RUN_STATE_PENDING', 'RUN_STATE_RUNNING', 'RUN_STATE_SUCCEEDED', 'RUN_STATE_FAILED', 'RUN_STATE_CANCELLED',
  'RUN_STATE_BUDGET_EXCEEDED',
];
export const ACTIVE_STATES = new Set(['RUN_STATE_PENDING', 'RUN_STATE_RUNNING']);
// Labels the platform sets for itself (the dataset manifest's key, the project): not the user's to filter on.
const RESERVED_LABEL = /^evals\.si\//;

// RUN_STATE_BUDGET_EXCEEDED → "budget exceeded".
export function enumText(value, prefix) {
  if (!value) return 'unspecified';
  return String(value).replace(prefix, '').toLowerCase().replace(/_/g, ' ');
}

export function stateBadge(state) {
  const name = enumText(state, 'RUN_STATE_');
  return h('span', { class: `state state-${name.replace(/ /g, '_')}` }, name);
}

export function userLabels(labels) {
  return Object.entries(labels || {})
    .filter(([key]) => !RESERVED_LABEL.test(key))
    .sort(([a], [b]) => a.localeCompare(b));
}

export function labelsText(labels) {
  return userLabels(labels).map(([key, value]) => `${key}=${value}`).join(', ');
}

// A summary's mean with its interval, as text.
export function summaryText(summary) {
  if (!summary) return '';
  return fmtInterval(summary.mean, summary.ci?.low, summary.ci?.high);
}

// The score of `result` behind `metric` (DESIGN.md: the alias for a single-output evaluator, alias.output for
// several): the only score, or the one named after the alias.
export function scoreFor(result, metric) {
  const scores = result.scores || [];
  if (metric === result.evaluator) return scores.length === 1 ? scores[0] : scores.find((s) => s.name === metric);
  const prefix = `${result.evaluator}.`;
  if (!metric.startsWith(prefix)) return undefined;
  return scores.find((s) => s.name === metric.slice(prefix.length));
}

// A score as a number for charts and differences: numbers as they are, pass/fail as 1/0; labels and structured
// values have none. (A oneof member is in the JSON whenever it is set, even as 0 or false.)
export function scoreNumber(score) {
  if (!score) return null;
  if (typeof score.number === 'number') return score.number;
  if (typeof score.passed === 'boolean') return score.passed ? 1 : 0;
  return null;
}

export function scoreText(score) {
  if (!score) return '';
  if (typeof score.passed === 'boolean') return score.passed ? 'pass' : 'fail';
  if (typeof score.number === 'number') return fmtNumber(score.number);
  if (typeof score.label === 'string') return score.label;
  if (score.structured !== undefined) return JSON.stringify(score.structured);
  return '';
}

export function outcomeText(result) {
  const outcome = enumText(result.outcome, 'OUTCOME_');
  if (result.outcome === 'OUTCOME_ERROR' && result.errorKind) {
    return `${outcome} (${enumText(result.errorKind, 'ERROR_KIND_')})`;
  }
  return outcome;
}

// A Content message (record.proto) as elements: text, a conversation, JSON, a tabular row, a tensor or media.
export function contentView(content) {
  if (!content || Object.keys(content).length === 0) return h('p', { class: 'muted' }, 'none');
  if (typeof content.text === 'string') return h('pre', {}, content.text);
  if (content.messages) return messagesView(content.messages.messages || []);
  if ('json' in content) return h('pre', {}, JSON.stringify(content.json, null, 2));
  return h('pre', {}, JSON.stringify(content, null, 2));
}

export function messagesView(messages) {
  return h('div', { class: 'messages' }, messages.map((message) => h('div', { class: 'message' },
    h('div', { class: 'role' }, message.role || 'message', message.name ? ` (${message.name})` : ''),
    message.content ? h('div', {}, message.content) : null,
    (message.toolCalls || []).map(toolCallView))));
}

export function toolCallView(call) {
  return h('details', { class: 'tool-call' },
    h('summary', {}, `tool call: ${call.name || '?'}`,
      call.status ? ` \u2014 ${enumText(call.status, 'TOOL_CALL_STATUS_')}` : ''),
    h('h4', {}, 'Arguments'), h('pre', {}, JSON.stringify(call.arguments ?? null, null, 2)),
    call.result !== undefined ? [h('h4', {}, 'Result'), h('pre', {}, JSON.stringify(call.result, null, 2))] : null,
    call.error ? h('p', { class: 'bad' }, `error: ${call.error}`) : null,
    call.blockedBy ? h('p', { class: 'bad' }, `blocked by ${call.blockedBy}`) : null);
}
