// One case of a report, drawn in full: its checks (each pass, fail, skipped or pending with its reason), the
// transcript turn by turn (the user's message, every tool call with how it ended and its arguments folded
// away, the UI shown, the reply) and the pairwise verdict when the run compared it with its reference.

import { fmtNumber, h } from '../dom.js';
import { caseHref, statusBadge } from './cases_format.js';

const END_CLASS = { ok: 'good', error: 'bad', blocked: 'state-pending' };

function checksTable(result) {
  const checks = result.checks || [];
  if (!checks.length) return h('p', { class: 'empty' }, 'No check ran (see the reason above).');
  return h('table', { class: 'checks' },
    h('caption', {}, `Checks of ${result.id || 'this case'}`),
    h('thead', {}, h('tr', {}, ['Check', 'Result', 'Reason'].map((label) => h('th', { scope: 'col' }, label)))),
    h('tbody', {}, checks.map((check) => h('tr', { dataset: { check: check.name, status: check.status } },
      h('th', { scope: 'row' }, h('code', {}, check.name)),
      h('td', {}, statusBadge(check.status)),
      h('td', {}, check.reason || '\u2014',
        check.detail ? h('details', {}, h('summary', {}, 'Detail'), h('pre', {}, JSON.stringify(check.detail, null, 2)))
          : null)))));
}

function toolCallItem(call) {
  const hasArguments = call.arguments !== undefined && call.arguments !== null;
  return h('li', { class: 'tool-call', dataset: { tool: call.name } },
    h('code', {}, call.name), ' ',
    call.end ? h('span', { class: `badge ${END_CLASS[call.end] || ''}`.trim() }, call.end)
      : h('span', { class: 'muted' }, '(end not reported)'),
    call.gate ? h('span', { class: 'muted' }, ` held by ${call.gate}`) : null,
    call.error ? h('span', { class: 'bad' }, ` ${call.error}`) : null,
    hasArguments ? h('details', { class: 'tool-arguments' }, h('summary', {}, `Arguments of ${call.name}`),
      h('pre', {}, JSON.stringify(call.arguments, null, 2))) : null);
}

function turnView(turn, index) {
  const calls = turn.tool_calls || [];
  const ui = turn.ui || [];
  const timing = turn.latency_ms !== undefined
    ? ` \u00b7 first byte ${fmtNumber(turn.ttfb_ms, 1)} ms, answer ${fmtNumber(turn.latency_ms, 1)} ms` : '';
  return h('li', { class: 'turn' },
    h('h5', {}, `Turn ${index + 1}`, h('span', { class: 'muted' }, timing)),
    h('div', { class: 'message' }, h('div', { class: 'role' }, 'user'), h('div', {}, turn.user || '')),
    calls.length ? h('div', { class: 'step' }, h('div', { class: 'role' }, `${calls.length} tool call(s)`),
      h('ul', { class: 'tool-calls' }, calls.map(toolCallItem))) : null,
    ui.length ? h('p', { class: 'muted' }, 'UI: ', ui.map((event) => `${event.component} (${event.items} item(s))`).join(', '))
      : null,
    h('div', { class: 'message' }, h('div', { class: 'role' }, 'agent'),
      h('div', {}, turn.reply || h('span', { class: 'muted' }, '(no reply)'))));
}

function transcriptView(transcript) {
  const turns = transcript?.turns || [];
  if (!turns.length) return h('p', { class: 'empty' }, 'No turn was replayed.');
  return h('ol', { class: 'transcript' }, turns.map(turnView));
}

function pairwiseView(pairwise) {
  return h('p', {}, h('strong', {}, 'Against the reference: '), String(pairwise.outcome || ''),
    pairwise.order_dependent ? ' (order-dependent)' : '', pairwise.vs ? ` \u00b7 vs ${pairwise.vs}` : '');
}

// The panel for `result` (a case of a report's `cases`); `tenant`: the report's.
export function caseDetail(result, tenant) {
  const heading = h('h3', { id: 'case-detail-heading', tabindex: '-1' }, 'Case ', h('code', {}, result.id || '(unreadable)'),
    result.trial ? `, trial ${result.trial}` : '', ' ', statusBadge(result.status));
  const facts = [
    ['Agent', result.agent || '\u2014'],
    ['Where', h('code', {}, result.where || '\u2014')],
    ['Conversation', result.conversation ? h('code', {}, result.conversation) : '\u2014'],
    ['Stored case', result.id ? h('a', { href: caseHref(result.id, tenant) }, result.id) : '\u2014'],
  ];
  return h('section', { class: 'panel', id: 'case-detail', 'aria-labelledby': 'case-detail-heading' },
    heading,
    result.reason ? h('p', {}, h('strong', {}, 'Reason: '), result.reason) : null,
    h('dl', { class: 'kv' }, facts.flatMap(([label, value]) => [h('dt', {}, label), h('dd', {}, value)])),
    h('h4', {}, 'Checks'), checksTable(result),
    h('h4', {}, result.transcript?.simulated ? 'Transcript (simulated user)' : 'Transcript'),
    transcriptView(result.transcript),
    result.pairwise ? pairwiseView(result.pairwise) : null);
}
