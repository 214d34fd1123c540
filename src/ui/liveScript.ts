/**
 * The live page's script: follows `/events` and swaps in each rendered view. It inserts only
 * what the server rendered with the report's escaping (the same markup as the static report),
 * keeps the tasks the reader opened open (and a note being typed), and says when the stream is
 * lost (EventSource retries). An approval's buttons post the decision to `/approve` (the page's
 * token in the query, JSON body); the answer, or the refusal's message, shows at the bottom.
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
    var notes = {}, active = document.activeElement, focus = null;
    var areas = main.querySelectorAll('.approve-form textarea');
    for (var n = 0; n < areas.length; n++) notes[areas[n].getAttribute('data-note')] = areas[n].value;
    if (active && active.tagName === 'TEXTAREA' && main.contains(active)) focus = [active.getAttribute('data-note'), active.selectionStart, active.selectionEnd];
    main.innerHTML = data.html;
    areas = main.querySelectorAll('.approve-form textarea');
    for (var q = 0; q < areas.length; q++) {
      // A note is kept for its own round: the next round asks afresh.
      var key = areas[q].getAttribute('data-note');
      if (Object.prototype.hasOwnProperty.call(notes, key)) areas[q].value = notes[key];
      if (focus && focus[0] === key) { areas[q].focus(); areas[q].setSelectionRange(focus[1], focus[2]); }
    }
    for (var j = 0; j < open.length; j++) { var d = document.getElementById(open[j]); if (d) d.open = true; }
    ssTimeline();
    for (var c = 0; c < boxes.length; c++) { var f = main.querySelector(boxes[c]); if (f && scroll[c]) { f.scrollLeft = scroll[c][0]; f.scrollTop = scroll[c][1]; } }
    badge.className = '';
    badge.textContent = (data.done ? 'finished' : 'live') + ' \\u00b7 ' + data.events + ' events';
    badge.setAttribute('data-events', String(data.events));
    badge.setAttribute('data-seen', String(seen));
  });
  es.addEventListener('error', function () { badge.className = 'off'; badge.textContent = 'disconnected, retrying'; });
  var msg = document.createElement('div');
  msg.id = 'approval-msg';
  msg.hidden = true;
  document.body.appendChild(msg);
  function say(text, bad) { msg.textContent = text; msg.className = bad ? 'bad' : ''; msg.hidden = false; }
  main.addEventListener('click', function (ev) {
    var button = ev.target.closest ? ev.target.closest('.approve-btn') : null;
    if (!button) return;
    var form = button.closest('.approve-form');
    var taskId = form.getAttribute('data-task');
    var approved = button.getAttribute('data-approved') === 'true';
    var area = form.querySelector('textarea');
    var body = { taskId: taskId, approved: approved };
    if (area && area.value.trim() !== '') body.note = area.value;
    var buttons = form.querySelectorAll('button');
    for (var i = 0; i < buttons.length; i++) buttons[i].disabled = true;
    fetch('/approve' + location.search, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
      .then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
      .then(function (a) {
        if (a[0]) say((approved ? 'approved ' : 'rejected ') + taskId, false);
        else { say(a[1].error || 'refused', true); for (var k = 0; k < buttons.length; k++) buttons[k].disabled = false; }
      })
      .catch(function () { say('the decision could not be sent', true); for (var k = 0; k < buttons.length; k++) buttons[k].disabled = false; });
  });
})();
`;
