/**
 * The report's inline stylesheet and script. The page loads nothing: system fonts, no libraries.
 * The script only reads the JSON data block and writes with textContent, never innerHTML, so no
 * string from the stream can become markup.
 */
import type { Outcome } from './types.js';

/** Outcome colours: colour-blind-safe enough (hue and lightness both differ) and printable. */
export const OUTCOME_STYLE: Record<Outcome, { color: string; label: string }> = {
  ok: { color: '#3f9c62', label: 'ok' },
  rate_limited: { color: '#e3a21a', label: '429 rate limited' },
  server: { color: '#d64541', label: '5xx server error / overloaded' },
  timeout: { color: '#8a5ad1', label: 'timeout' },
  network: { color: '#2f7fc1', label: 'network' },
  other: { color: '#7d848e', label: 'other / no reply' },
  inflight: { color: '#9ec5f2', label: 'in flight' },
};

export const CSS = `
:root{--fg:#1d2430;--muted:#5f6b7a;--line:#e3e7ec;--bg:#fff;--panel:#f7f8fa;--accent:#2f6fdb}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1320px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 4px;font-weight:650;word-break:break-all}
h2{font-size:16px;margin:34px 0 10px;font-weight:650;border-bottom:1px solid var(--line);padding-bottom:6px}
h3{font-size:13px;margin:16px 0 6px;color:var(--muted);font-weight:600;text-transform:uppercase;letter-spacing:.04em}
.sub{color:var(--muted);font-size:13px}
.sub code{font-size:12px}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;background:#7d848e}
.badge.completed{background:#3f9c62}.badge.partial{background:#e3a21a}.badge.failed{background:#d64541}.badge.cancelled{background:#5f6b7a}.badge.budgetexceeded{background:#b5482a}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(135px,1fr));gap:10px;margin-top:16px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .k{font-size:12px;color:var(--muted)}
.card .v{font-size:20px;font-weight:650;font-variant-numeric:tabular-nums;margin-top:2px}
.card .d{font-size:12px;color:var(--muted);margin-top:2px}
.note{color:var(--muted);font-size:12px;margin:6px 0}
table{border-collapse:collapse;font-size:13px;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px;white-space:nowrap;background:var(--panel)}
td.n,th.n{text-align:right;white-space:nowrap}
tr.total td{font-weight:650;border-top:2px solid var(--line)}
td.id{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;white-space:nowrap}
td.msg{max-width:640px;word-break:break-word;color:#3b4451}
.scroll{overflow-x:auto}
.narrow{max-width:420px}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:8px 0 4px;font-size:12px;color:var(--muted)}
.legend span{display:inline-flex;align-items:center;gap:5px}
.sw{display:inline-block;width:14px;height:10px;border-radius:2px}
.tl-wrap{display:flex;border:1px solid var(--line);border-radius:8px;overflow:hidden;background:#fff}
.tl-labels{flex:none;border-right:1px solid var(--line);background:var(--panel)}
.tl-plot{flex:1;overflow-x:auto;overflow-y:hidden}
.tl-labels text{font-size:12px;fill:var(--fg);font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.tl-labels text.grp{font-family:inherit;font-weight:650;fill:var(--muted);font-size:11px;text-transform:uppercase;letter-spacing:.05em}
.tl-labels text.meta{fill:var(--muted);font-size:10px;font-family:inherit}
svg text.tick{font-size:11px;fill:var(--muted)}
svg line.grid{stroke:#e3e7ec;stroke-width:1}
#tl-axis{pointer-events:none}
svg rect[data-call]{rx:1.5px}
svg rect[data-call]:hover{stroke:#1d2430;stroke-width:1.5px;vector-effect:non-scaling-stroke}
.o-ok{fill:${OUTCOME_STYLE.ok.color}}.o-rate_limited{fill:${OUTCOME_STYLE.rate_limited.color}}.o-server{fill:${OUTCOME_STYLE.server.color}}
.o-timeout{fill:${OUTCOME_STYLE.timeout.color}}.o-network{fill:${OUTCOME_STYLE.network.color}}.o-other{fill:${OUTCOME_STYLE.other.color}}.o-inflight{fill:${OUTCOME_STYLE.inflight.color}}
.lane0{fill:#fff}.lane1{fill:#f7f8fa}.grp-bg{fill:#eef1f5}
.backoff{fill:url(#hatch-backoff)}.sat{fill:#c9d0d9}.revoked{fill:url(#hatch-revoked)}
.br-open{fill:#d64541;fill-opacity:.75}.br-half{fill:#e3a21a;fill-opacity:.75}
.tools{display:flex;gap:6px;align-items:center;margin:0 0 8px;font-size:12px;color:var(--muted)}
.tools button{font:inherit;border:1px solid var(--line);background:#fff;border-radius:6px;padding:2px 9px;cursor:pointer;color:var(--fg)}
.tools button:hover{background:var(--panel)}
#tip{position:fixed;z-index:10;pointer-events:none;background:#1d2430;color:#f4f6f8;font-size:12px;line-height:1.4;padding:8px 10px;border-radius:6px;max-width:440px;box-shadow:0 4px 14px rgba(0,0,0,.25)}
#tip div:first-child{font-weight:650;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;word-break:break-all}
#tip .m{color:#c9d1db;word-break:break-word}
.use{display:flex;align-items:center;gap:6px;white-space:nowrap;font-size:12px}
.meter{position:relative;height:8px;width:70px;background:#eef1f5;border-radius:4px;overflow:hidden}
.meter i{position:absolute;left:0;top:0;bottom:0;background:var(--accent);border-radius:4px}
.meter i.hot{background:#d64541}
.span{position:relative;height:10px;min-width:160px;background:#f1f3f6;border-radius:3px}
.span i{position:absolute;top:0;bottom:0;background:#8fb1e9;border-radius:3px;min-width:2px}
.pill{display:inline-block;min-width:22px;padding:0 6px;border-radius:9px;font-size:12px;text-align:center;color:#fff}
.pill.completed{background:#3f9c62}.pill.failed{background:#d64541}.pill.skipped{background:#e3a21a}.pill.cancelled{background:#5f6b7a}.pill.unfinished{background:#9aa3ae}
.zero{color:#b3bac3}
ul.tr{margin:0;padding-left:16px}
footer{margin-top:40px;color:var(--muted);font-size:12px}
.dag-wrap{border:1px solid var(--line);border-radius:8px;max-height:640px;overflow:auto;background:#fff}
.dag-edge,.ch-edge{fill:none;stroke:#a9b3bf;stroke-width:1.2}
.ch-edge.init{stroke-dasharray:3 3}
.dag-node{cursor:pointer}
.dag-node rect{stroke:#fff;stroke-width:1}
.dag-node text{font:11px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;fill:#fff;pointer-events:none}
.dag-node:hover rect{stroke:#1d2430;stroke-width:1.5}
.s-pending{fill:#c9d0d9;background:#c9d0d9}.dag-node.s-pending text{fill:#1d2430}
.s-running{fill:#2f7fc1;background:#2f7fc1}.s-completed{fill:#3f9c62;background:#3f9c62}.s-failed{fill:#d64541;background:#d64541}
.s-skipped{fill:#e3a21a;background:#e3a21a}.s-cancelled{fill:#5f6b7a;background:#5f6b7a}.s-unfinished{fill:#9aa3ae;background:#9aa3ae}
.dag-node.s-pending rect,.dag-node.s-running rect,.dag-node.s-completed rect,.dag-node.s-failed rect,.dag-node.s-skipped rect,.dag-node.s-cancelled rect{fill:inherit}
.cost-line{fill:none;stroke:var(--accent);stroke-width:2}
.budget-line{stroke:#d64541;stroke-dasharray:6 4;stroke-width:1.5}
details.task{border-bottom:1px solid var(--line);padding:4px 0}
details.task summary{cursor:pointer;font-size:13px}
details.task summary code{font-size:12px}
details.task .facts{color:var(--muted);font-size:12px}
details.task .pill{color:#fff}
pre.output{white-space:pre-wrap;word-break:break-word;background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 10px;font-size:12px;max-height:360px;overflow:auto;margin:6px 0}
.err{color:#d64541;font-size:13px}
.count{color:var(--muted);font-weight:400;font-size:12px}
.machine h3{text-transform:none;letter-spacing:0;font-size:14px;color:var(--fg)}
.ch-state rect{fill:#fff;stroke:#7d848e;stroke-width:1.2}
.ch-state.compound rect{fill:#f1f3f6}
.ch-state.final rect{stroke-width:2.5}
.ch-state.occupied rect{fill:#e3eefc;stroke:var(--accent);stroke-width:2}
.ch-state text{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;fill:var(--fg)}
.ch-state text.count{font-weight:700;fill:var(--accent)}
#live{position:fixed;top:8px;right:12px;font-size:12px;background:#1d2430;color:#fff;border-radius:10px;padding:2px 10px}
#live.off{background:#d64541}
.approval{border:1px solid var(--accent);border-radius:8px;padding:8px 12px;margin:8px 0}
.approval h3{text-transform:none;letter-spacing:0;font-size:14px;color:var(--fg);margin:2px 0 4px}
.approve-form textarea{display:block;width:100%;box-sizing:border-box;font:inherit;font-size:13px;margin:6px 0;border:1px solid var(--line);border-radius:6px;padding:4px 6px}
.approve-form button{font:inherit;border:1px solid var(--line);background:#fff;border-radius:6px;padding:3px 12px;cursor:pointer}
.approve-form button[data-approved="true"]{background:#2e9e5b;color:#fff;border-color:#2e9e5b}
#approval-msg{position:fixed;bottom:12px;right:12px;font-size:13px;background:#1d2430;color:#fff;border-radius:8px;padding:6px 12px;max-width:40em}
#approval-msg.bad{background:#d64541}
`;

/**
 * Hover tooltips and zoom for the timeline. Reads `#report-data`: { s: strings, d: domain ms,
 * w: plot width px, c: calls as arrays (see html.ts `callRow`) }.
 */
export const SCRIPT = `
function ssTimeline() {
  'use strict';
  var el = document.getElementById('report-data');
  if (!el) return;
  var data = JSON.parse(el.textContent);
  var S = data.s, C = data.c, W = data.w, D = data.d;
  var OUT = data.o, TICK_PX = data.p;
  var plot = document.getElementById('tl');
  var zoomG = plot ? plot.querySelectorAll('g.zoom') : [];
  var axisG = document.getElementById('tl-axis');
  var tip = document.getElementById('tip');
  if (!plot || !tip) return;
  var NS = 'http://www.w3.org/2000/svg';
  var k = 1;
  function secs(ms) { var s = ms / 1000; return (s < 10 ? s.toFixed(2) : s < 100 ? s.toFixed(1) : s.toFixed(0)) + ' s'; }
  function line(text, cls) { var d = document.createElement('div'); d.textContent = text; if (cls) d.className = cls; tip.appendChild(d); }
  function usd(x) { return x === null ? 'unknown (no price)' : '$' + (x >= 0.01 ? x.toFixed(4) : x.toPrecision(2)); }
  function show(ev) {
    var t = ev.target, i = t.getAttribute && t.getAttribute('data-call'), note = t.getAttribute && t.getAttribute('data-tip');
    if (i === null && !note) { tip.hidden = true; return; }
    tip.textContent = '';
    if (i !== null) {
      var c = C[+i];
      line(S[c[2]] + '  \\u00b7 attempt ' + c[3] + ', turn ' + c[4]);
      line((c[6] >= 0 ? S[c[6]] + ' \\u00b7 ' : '') + S[c[5]] + ' \\u00b7 key ' + S[c[7]]);
      line(secs(c[0]) + ' \\u2192 ' + secs(c[1]) + '  (' + (c[1] - c[0]) + ' ms)');
      line(OUT[c[8]] + (c[14] >= 0 ? ': ' + S[c[14]] : ''));
      if (c[15] >= 0) line(S[c[15]], 'm');
      if (c[8] === 0) {
        line('tokens: ' + c[9] + ' in, ' + c[10] + ' out, ' + c[11] + ' cache write, ' + c[12] + ' cache read');
        line('cost: ' + usd(c[13]));
      }
    } else {
      line(note);
    }
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14, r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - 14;
    if (y + r.height > window.innerHeight - 8) y = ev.clientY - r.height - 14;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  plot.addEventListener('mousemove', show);
  plot.addEventListener('mouseleave', function () { tip.hidden = true; });
  var STEPS = data.t;
  function step(min) {
    for (var j = 0; j < STEPS.length; j++) if (STEPS[j] >= min) return STEPS[j];
    return STEPS[STEPS.length - 1];
  }
  function axis() {
    if (!axisG) return;
    var h = +plot.getAttribute('height'), width = W * k, per = step(TICK_PX * D / (W * k));
    while (axisG.firstChild) axisG.removeChild(axisG.firstChild);
    for (var ms = 0; ms <= D + 1e-9; ms += per) {
      var x = ms / D * width;
      var g = document.createElementNS(NS, 'line');
      g.setAttribute('class', 'grid'); g.setAttribute('x1', x); g.setAttribute('x2', x); g.setAttribute('y1', 22); g.setAttribute('y2', h);
      axisG.appendChild(g);
      var tx = document.createElementNS(NS, 'text');
      tx.setAttribute('class', 'tick'); tx.setAttribute('x', Math.min(width - 2, x + 3)); tx.setAttribute('y', 15);
      if (x > width - 40) tx.setAttribute('text-anchor', 'end');
      tx.textContent = (per < 1000 ? (ms / 1000).toFixed(1) : Math.round(ms / 1000)) + ' s';
      axisG.appendChild(tx);
    }
  }
  function zoom(next, anchor) {
    var box = plot.parentNode, center = anchor === undefined ? box.scrollLeft + box.clientWidth / 2 : anchor;
    var frac = center / (W * k);
    k = Math.max(1, Math.min(256, next));
    window.ssZoom = k;
    plot.setAttribute('width', W * k);
    for (var z = 0; z < zoomG.length; z++) zoomG[z].setAttribute('transform', 'scale(' + k + ',1)');
    axis();
    box.scrollLeft = frac * W * k - box.clientWidth / 2;
    var lbl = document.getElementById('zoom-level');
    if (lbl) lbl.textContent = k + 'x';
  }
  function on(id, f) { var b = document.getElementById(id); if (b) b.addEventListener('click', f); }
  on('zoom-in', function () { zoom(k * 2); });
  on('zoom-out', function () { zoom(k / 2); });
  on('zoom-fit', function () { zoom(1); });
  // The live page renders the timeline again: it keeps the reader's zoom.
  if (window.ssZoom > 1) zoom(window.ssZoom, 0);
}
ssTimeline();
function ssOpenTask(ev) {
  if (ev.type === 'keydown' && ev.key !== 'Enter') return;
  var node = ev.target && ev.target.closest ? ev.target.closest('g.dag-node') : null;
  if (!node) return;
  var item = document.getElementById(node.getAttribute('data-anchor'));
  if (!item) return;
  item.open = true;
  item.scrollIntoView({ block: 'center' });
}
document.addEventListener('click', ssOpenTask);
document.addEventListener('keydown', ssOpenTask);
`;
