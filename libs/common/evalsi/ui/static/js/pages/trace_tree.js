// A trace's steps as a tree (GetTrace's `tree`: spans in depth-first order with their depth), each step a
// collapsible <details> with its timing bar, tokens, cost, tool call and content. Nested <ul>s carry the nesting,
// so the tree reads as a tree to a screen reader too, and no inline style is needed (the page's CSP has none).

import { svg } from '../charts.js';
import { fmtDuration, fmtNumber, fmtTime, h } from '../dom.js';

const STEP_TYPES = {
  STEP_TYPE_LLM: 'llm',
  STEP_TYPE_TOOL: 'tool',
  STEP_TYPE_RETRIEVAL: 'retrieval',
  STEP_TYPE_AGENT: 'agent',
  STEP_TYPE_CHAIN: 'chain',
  STEP_TYPE_EMBEDDING: 'embedding',
  STEP_TYPE_RERANK: 'rerank',
};
const BAR_WIDTH = 160;
const BAR_HEIGHT = 10;

// "1.5s" (a protobuf JSON Duration) → 1.5; absent → 0.
export function seconds(duration) {
  const value = Number(String(duration || '0s').replace(/s$/, ''));
  return Number.isFinite(value) ? value : 0;
}

export function stepType(step) {
  return STEP_TYPES[step.type] || 'step';
}

// A Content message (oneof text, messages, json, row, tensor, media) as something to read.
export function contentNode(content) {
  if (!content) return h('span', { class: 'muted' }, 'none');
  if (content.text !== undefined) return h('pre', {}, content.text);
  if (content.messages) {
    return h('div', {}, (content.messages.messages || []).map((message) => h('div', { class: 'message' },
      h('div', { class: 'role' }, message.role || 'message'),
      h('pre', {}, messageText(message)))));
  }
  const value = content.json ?? content.row ?? content.tensor ?? content.media;
  return h('pre', {}, JSON.stringify(value, null, 2));
}

function messageText(message) {
  const parts = [];
  if (message.content) parts.push(message.content);
  for (const call of message.toolCalls || []) parts.push(`→ ${call.name}(${JSON.stringify(call.arguments ?? {})})`);
  return parts.join('\n') || JSON.stringify(message);
}

// Where the step sits in the trace's time: an SVG bar from its start to its end, on the trace's whole span.
function timingBar(step, origin, total) {
  const start = new Date(step.startTime).getTime() / 1000 - origin;
  const duration = seconds(step.duration);
  const x = total > 0 ? Math.max(0, (start / total) * BAR_WIDTH) : 0;
  const width = total > 0 ? Math.max(1, (duration / total) * BAR_WIDTH) : BAR_WIDTH;
  const label = `starts at +${fmtDuration(Math.max(0, start))}, lasts ${fmtDuration(duration)}`;
  // Inline in the summary line (not a block like svg.chart), coloured by the text's colour so it follows the theme:
  // presentation attributes, which the CSP allows where it refuses style attributes.
  const root = svg('svg', {
    class: 'timing', viewBox: `0 0 ${BAR_WIDTH} ${BAR_HEIGHT}`, width: BAR_WIDTH, height: BAR_HEIGHT,
    role: 'img', 'aria-label': label,
  });
  root.append(svg('title', {}, label),
    svg('rect', { class: 'track', x: 0, y: 1, width: BAR_WIDTH, height: BAR_HEIGHT - 2, fill: 'currentColor', 'fill-opacity': 0.12 }),
    svg('rect', {
      class: 'bar', x: Math.min(x, BAR_WIDTH - 1), y: 1, width: Math.min(width, BAR_WIDTH), height: BAR_HEIGHT - 2,
      fill: 'currentColor', 'fill-opacity': 0.75,
    }));
  return root;
}

function usageText(usage) {
  if (!usage) return '';
  const parts = [];
  if (usage.inputTokens || usage.outputTokens) {
    parts.push(`${fmtNumber(Number(usage.inputTokens || 0))} in / ${fmtNumber(Number(usage.outputTokens || 0))} out tokens`);
  }
  if (usage.costUsd !== undefined) parts.push(`$${fmtNumber(usage.costUsd, 4)}`);
  return parts.join(', ');
}

function toolCallPanel(call) {
  const failed = call.status && call.status !== 'TOOL_CALL_STATUS_OK' && call.status !== 'TOOL_CALL_STATUS_UNSPECIFIED';
  return h('section', { class: 'panel tool-call', 'aria-label': `tool call ${call.name || ''}` },
    h('h4', {}, 'Tool call ', h('code', {}, call.name || '(unnamed)'), ' ',
      call.status ? h('span', { class: `badge ${failed ? 'bad' : 'good'}` }, call.status.replace('TOOL_CALL_STATUS_', '').toLowerCase()) : null),
    h('dl', { class: 'kv' },
      call.id ? [h('dt', {}, 'call id'), h('dd', {}, call.id)] : null,
      call.error ? [h('dt', {}, 'error'), h('dd', { class: 'bad' }, call.error)] : null,
      call.blockedBy ? [h('dt', {}, 'blocked by'), h('dd', {}, call.blockedBy)] : null),
    h('details', { class: 'tool-arguments', open: true },
      h('summary', {}, 'Arguments'),
      h('pre', {}, JSON.stringify(call.arguments ?? null, null, 2))),
    call.result !== undefined
      ? h('details', { class: 'tool-result' }, h('summary', {}, 'Result'), h('pre', {}, JSON.stringify(call.result, null, 2)))
      : null);
}

// The step's figures, content and attributes, folded: the tree stays readable, and a click shows them.
function stepDetails(step, origin) {
  const start = new Date(step.startTime).getTime() / 1000 - origin;
  const rows = [
    ['type', stepType(step)],
    ['span', step.spanId || step.id],
    ['started', `${fmtTime(step.startTime)} (+${fmtDuration(Math.max(0, start))})`],
    ['duration', fmtDuration(seconds(step.duration))],
    step.model ? ['model', step.model] : null,
    step.usage ? ['usage', usageText(step.usage) || '\u2014'] : null,
    step.error ? ['error', step.error] : null,
  ].filter(Boolean);
  const attributes = Object.entries(step.attributes || {});
  const details = h('details', { class: 'step-details' }, h('summary', {}, 'Details'));
  // Drawn when first opened: a trace of thousands of steps stays quick to show.
  details.addEventListener('toggle', () => {
    if (!details.open || details.childElementCount > 1) return;
    details.append(
      h('dl', { class: 'kv' }, rows.map(([key, value]) => [h('dt', {}, key), h('dd', {}, value)])),
      step.input ? h('details', {}, h('summary', {}, 'Input'), contentNode(step.input)) : '',
      step.output ? h('details', {}, h('summary', {}, 'Output'), contentNode(step.output)) : '',
      attributes.length ? h('details', {}, h('summary', {}, `Attributes (${attributes.length})`),
        h('dl', { class: 'kv mono' }, attributes.map(([key, value]) => [
          h('dt', {}, key), h('dd', {}, typeof value === 'string' ? value : JSON.stringify(value))]))) : '');
  });
  return details;
}

function stepItem(node, depth, step, origin, total) {
  const failed = step.status === 'STEP_STATUS_ERROR';
  const summary = h('summary', {},
    h('span', { class: 'badge' }, stepType(step)), ' ',
    h('span', { class: 'step-name' }, step.name || '(unnamed)'), ' ',
    timingBar(step, origin, total), ' ',
    h('span', { class: 'muted' }, fmtDuration(seconds(step.duration))),
    step.usage && usageText(step.usage) ? h('span', { class: 'muted' }, ` \u00b7 ${usageText(step.usage)}`) : null,
    step.toolCall ? h('span', { class: 'muted' }, ` \u00b7 ${step.toolCall.name}()`) : null,
    failed ? [' ', h('span', { class: 'badge bad' }, 'error')] : null,
    node.orphan ? [' ', h('span', { class: 'badge', title: 'its parent span never arrived' }, 'orphan')] : null);
  // Open down to a few levels, and wherever something failed or a tool was called; the rest is a click away.
  const open = depth < 3 || failed || Boolean(step.toolCall);
  const item = h('li', { class: 'step', dataset: { spanId: node.spanId, depth: String(depth) } });
  const details = h('details', { open }, summary,
    step.toolCall ? toolCallPanel(step.toolCall) : null,
    stepDetails(step, origin));
  item.append(details);
  return { item, children: details };
}

// The tree as nested lists: `tree` is depth-first, so a node's children follow it with depth + 1. (Protobuf JSON
// leaves zeros out: a root has no depth, the first step no stepIndex.)
export function stepTree(trace) {
  const steps = trace.record?.trajectory?.steps || [];
  const tree = trace.tree || [];
  const starts = steps.map((s) => new Date(s.startTime).getTime() / 1000).filter(Number.isFinite);
  const origin = starts.length ? Math.min(...starts) : 0;
  const end = Math.max(origin, ...steps.map((s) => new Date(s.startTime).getTime() / 1000 + seconds(s.duration))
    .filter(Number.isFinite));
  const total = end - origin;
  const root = h('ul', { class: 'step-tree', 'aria-label': 'Steps' });
  const stack = [root];
  for (const node of tree) {
    const depth = Number(node.depth || 0);
    const step = steps[Number(node.stepIndex || 0)] || { name: node.spanId };
    stack.length = Math.min(stack.length, depth + 1);
    const parent = stack[stack.length - 1];
    const { item, children: holder } = stepItem(node, depth, step, origin, total);
    parent.append(item);
    // A step's children sit inside its <details>: folding a step folds its subtree.
    const children = h('ul', {});
    holder.append(children);
    stack.push(children);
  }
  for (const list of root.querySelectorAll('ul:empty')) list.remove();
  return root;
}
