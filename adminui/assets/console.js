// holdfast console: live updates of the locks table. Everything else is
// plain HTML forms; without this script the page works, it just does not
// update itself.
(function () {
  'use strict';
  var region = document.getElementById('locks-region');
  var status = document.getElementById('live-status');
  if (!region || !status) {
    return;
  }
  if (!window.EventSource) {
    status.textContent = 'Not live: reload to update';
    return;
  }
  var src = region.getAttribute('data-rows');
  var timer = null;
  var busy = false;
  var again = false;
  var lost = false;
  var stale = false; // the last refresh failed
  var retry = null; // the timer of the refresh after a failed one
  var drops = 0;

  function show(state, text) {
    status.setAttribute('data-state', state);
    status.textContent = text;
  }

  // refresh replaces the table with the server's current rendering,
  // keeping keyboard focus on the same control when it is still there.
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(src, {credentials: 'same-origin', headers: {'Accept': 'text/html'}})
      .then(function (res) {
        if (res.status === 401) {
          window.location.reload();
          return null;
        }
        if (!res.ok) {
          throw new Error('refresh failed: ' + res.status);
        }
        return res.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        if (stale) {
          stale = false;
          if (!lost) {
            show('live', 'Live');
          }
        }
        var focused = document.activeElement && region.contains(document.activeElement) ? document.activeElement.id : '';
        region.innerHTML = html;
        region.setAttribute('data-refreshed', String(Number(region.getAttribute('data-refreshed') || '0') + 1));
        if (focused && document.getElementById(focused)) {
          document.getElementById(focused).focus();
        }
      })
      .catch(function () {
        // An event said the list changed, and it could not be read (the
        // store may be down): the change will not be announced again, so
        // try again until it is read.
        stale = true;
        if (!lost) {
          show('lost', 'Not up to date · retrying…');
        }
        if (retry === null) {
          retry = window.setTimeout(function () {
            retry = null;
            schedule();
          }, 2000);
        }
      })
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          schedule();
        }
      });
  }

  // schedule coalesces a burst of events into one refresh.
  function schedule() {
    if (timer === null) {
      timer = window.setTimeout(function () {
        timer = null;
        refresh();
      }, 150);
    }
  }

  function connect() {
    var events = new EventSource('/console/events');
    events.addEventListener('hello', function () {
      if (lost) {
        lost = false;
        show('live', 'Live · reconnected');
        refresh(); // catch up on what happened while disconnected
      } else {
        show('live', 'Live');
      }
    });
    events.addEventListener('lock', schedule);
    events.addEventListener('resync', schedule);
    events.addEventListener('error', function () {
      if (!lost) {
        drops++;
        status.setAttribute('data-drops', String(drops));
      }
      lost = true;
      show('lost', 'Connection lost · reconnecting…');
      // The browser retries by itself unless the server answered with an
      // error (say, 503 while it restarts); then try again later.
      if (events.readyState === EventSource.CLOSED) {
        window.setTimeout(connect, 5000);
      }
    });
  }
  connect();
  // Relative times ("expires in 4 min") age between events.
  window.setInterval(schedule, 30000);
})();
