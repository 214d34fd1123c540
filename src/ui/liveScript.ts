/**
 * The live page's script: follows `/events` and swaps in each rendered view. It inserts only
 * what the server rendered with the report's escaping (the same markup as the static report),
 * keeps the tasks the reader opened open, and says when the stream is lost (EventSource retries).
 */
export const LIVE_SCRIPT = `
(function () {
  'use strict';
  var main = document.querySelector('main');
  var badge = document.createElement('div');
  badge.id = 'live';
  badge.textContent = 'connecting';
  document.body.appendChild(badge);
  var es = new EventSource('/events' + location.search);
  var seen = 0;
  es.addEventListener('run', function () { seen++; });
  es.addEventListener('view', function (m) {
    var data = JSON.parse(m.data);
    var open = [];
    var details = main.querySelectorAll('details[open]');
    for (var i = 0; i < details.length; i++) open.push(details[i].id);
    var boxes = ['.tl-plot', '.dag-wrap'], scroll = [];
    for (var b = 0; b < boxes.length; b++) { var e = main.querySelector(boxes[b]); scroll.push(e ? [e.scrollLeft, e.scrollTop] : null); }
    main.innerHTML = data.html;
    for (var j = 0; j < open.length; j++) { var d = document.getElementById(open[j]); if (d) d.open = true; }
    ssTimeline();
    for (var c = 0; c < boxes.length; c++) { var f = main.querySelector(boxes[c]); if (f && scroll[c]) { f.scrollLeft = scroll[c][0]; f.scrollTop = scroll[c][1]; } }
    badge.className = '';
    badge.textContent = (data.done ? 'finished' : 'live') + ' \\u00b7 ' + data.events + ' events';
    badge.setAttribute('data-events', String(data.events));
    badge.setAttribute('data-seen', String(seen));
  });
  es.addEventListener('error', function () { badge.className = 'off'; badge.textContent = 'disconnected, retrying'; });
})();
`;
