// One record of a run, drilled down from the record table: every evaluator's result with each score, its
// explanation (a judge's reasoning) and metadata; then the record as evaluated (ListRunRecords): input, output,
// reference, context, the agent's trajectory step by step, usage and metadata.

import { fmtDuration, fmtNumber, h } from '../dom.js';
import { contentView, enumText, outcomeText, scoreText, toolCallView } from './run_format.js';

function scoreRow(score) {
  return h('tr', {},
    h('th', { scope: 'row' }, score.name || '(score)'),
    h('td', {}, scoreText(score)),
    h('td', {}, score.explanation ? h('div', { class: 'explanation' }, score.explanation) : '\u2014'),
    h('td', { class: 'num' }, score.confidence === undefined ? '\u2014' : fmtNumber(score.confidence)),
    h('td', {}, score.metadata && Object.keys(score.metadata).length
      ? h('details', {}, h('summary', {}, 'metadata'), h('pre', {}, JSON.stringify(score.metadata, null, 2)))
      : '\u2014'));
}

function resultView(alias, result) {
  return h('div', { class: 'panel result' },
    h('h4', {}, alias, ' ', h('span', { class: `badge ${result.outcome === 'OUTCOME_SCORED' ? '' : 'bad'}` },
      outcomeText(result))),
    h('p', { class: 'muted' }, result.evaluatorRef || '', result.duration ? ` \u00b7 ${fmtDuration(result.duration)}` : ''),
    result.reason ? h('p', {}, h('strong', {}, 'Reason: '), result.reason) : null,
    (result.scores || []).length ? h('table', {},
      h('caption', {}, `Scores of ${alias}`),
      h('thead', {}, h('tr', {}, ['Score', 'Value', 'Explanation', 'Confidence', 'Metadata']
        .map((label) => h('th', { scope: 'col' }, label)))),
      h('tbody', {}, result.scores.map(scoreRow))) : null);
}

function stepView(step) {
  const usage = step.usage || {};
  const tokens = Number(usage.totalTokens || 0) || Number(usage.inputTokens || 0) + Number(usage.outputTokens || 0);
  return h('li', { class: 'step' },
    h('div', {}, h('strong', {}, enumText(step.type, 'STEP_TYPE_')), ' ', step.name || '',
      step.model ? ` \u00b7 ${step.model}` : '', step.duration ? ` \u00b7 ${fmtDuration(step.duration)}` : '',
      tokens ? ` \u00b7 ${tokens} tokens` : '',
      step.status === 'STEP_STATUS_ERROR' ? h('span', { class: 'badge bad' }, 'error') : null),
    step.error ? h('p', { class: 'bad' }, step.error) : null,
    step.toolCall ? toolCallView(step.toolCall) : null,
    step.input ? h('details', {}, h('summary', {}, 'Input'), contentView(step.input)) : null,
    step.output ? h('details', {}, h('summary', {}, 'Output'), contentView(step.output)) : null);
}

function recordView(record) {
  const part = (title, node) => h('section', { class: 'record-part', dataset: { part: title.split(' ')[0].toLowerCase() } },
    h('h4', {}, title), node);
  const steps = record.trajectory?.steps || [];
  return h('div', { class: 'record-contents' },
    h('div', { class: 'grid-2' },
      part('Input', contentView(record.input)),
      part('Output', contentView(record.output)),
      part('Reference', contentView(record.reference)),
      (record.context || []).length ? part('Context', h('div', {}, record.context.map(contentView))) : null),
    steps.length ? part(`Trajectory (${steps.length} steps)`, h('ol', { class: 'trajectory' }, steps.map(stepView))) : null,
    record.usage ? part('Usage', h('pre', {}, JSON.stringify(record.usage, null, 2))) : null,
    record.metadata && Object.keys(record.metadata).length
      ? part('Metadata', h('pre', {}, JSON.stringify(record.metadata, null, 2))) : null);
}

// Draw record `recordId` (trial `trial`) of `run` into `container`; results: the page's RunResults.
export async function recordDetail(container, run, recordId, trial, results, ctx, onClose) {
  const row = results.records().find((r) => r.recordId === recordId && r.trial === trial);
  const heading = h('h3', { tabindex: '-1', id: 'record-heading' },
    `Record ${recordId}${trial ? `, trial ${trial}` : ''}`);
  const close = h('button', { type: 'button', class: 'secondary', id: 'record-close' }, 'Close record');
  close.addEventListener('click', () => {
    container.replaceChildren();
    if (onClose) onClose();
  });
  const contents = h('div', { id: 'record-contents' }, h('p', { class: 'loading', role: 'status' }, 'Loading the record\u2026'));
  container.replaceChildren(h('div', { class: 'panel' }, heading, close,
    h('h4', {}, 'Results'),
    row ? Object.entries(row.results).map(([alias, result]) => resultView(alias, result))
      : h('p', { class: 'empty' }, 'Its results are not among the rows loaded; load more records.'),
    contents));
  heading.focus();
  const answer = await ctx.api.get(`/v1alpha1/runs/${encodeURIComponent(run.id)}/records`,
    { record_ids: recordId, trial }, ctx.signal);
  const record = (answer.records || [])[0];
  contents.replaceChildren(record ? recordView(record)
    : h('p', { class: 'empty' }, 'The record is not in the run\u2019s stored records.'));
}
