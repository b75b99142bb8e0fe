// holdfast-edit.js keeps the edit lock of an open edit page alive, releases
// it when the page is left, and tells the editor when and why the lock was
// lost, without ever reloading the page: unsaved input stays where it is.
// On a read-only page shown because others hold the record, it tells the
// reader when they no longer do.
// Include it with the tag that httplock's ScriptTag writes; no framework.
(function () {
  "use strict";
  var me = document.currentScript;
  if (!me) return;
  var cfg = me.dataset;
  // The edit page this tab last opened for a key, so that a page refused
  // because that page still holds the key can take over from it.
  var remembered = "holdfast-page:" + cfg.key;
  var visibleMs = Number(cfg.heartbeat) || 20000;
  var hiddenMs = Number(cfg.hiddenHeartbeat) || 60000;
  if (cfg.watch) {
    watch();
    return;
  }
  if (cfg.holderPage) {
    resume();
    return;
  }
  if (!cfg.page) return;
  try {
    sessionStorage.setItem(remembered, cfg.page);
  } catch (e) {
    // No storage (private mode, say): a reload then offers to take over.
  }

  // resume runs on a page refused because the person's own other page
  // holds the lock. When that page was this tab's own (the edit page was
  // reloaded, or left and opened again, before its release reached the
  // server), it takes over at once instead of offering the person to take
  // over from themselves.
  function resume() {
    var mine = null;
    try {
      mine = sessionStorage.getItem(remembered);
      if (mine === cfg.holderPage) sessionStorage.removeItem(remembered);
    } catch (e) {
      return;
    }
    var form = document.querySelector("form[data-holdfast-takeover]");
    if (mine === cfg.holderPage && form) form.submit();
  }

  // watch runs on a read-only page shown because others hold the record.
  // It asks who holds it, at the heartbeat's pace, and once none of those
  // who held it does, says so: the record is free to edit, or someone
  // else now holds it. Asking is not activity: it keeps no session alive.
  function watch() {
    var held = (cfg.locks || "").split(" ").filter(Boolean);
    var names = [];
    try {
      names = JSON.parse(cfg.names || "[]");
    } catch (e) {
      // Without the names the page still says that the record is free.
    }
    // News, not an alarm: set before anything is said, so that screen
    // readers announce it politely when it comes.
    var region = document.getElementById("holdfast-notice");
    if (region) region.setAttribute("role", "status");
    var watchTimer = null;
    var stopped = false;
    function next() {
      clearTimeout(watchTimer);
      if (!stopped) watchTimer = setTimeout(check, document.hidden ? hiddenMs : visibleMs);
    }
    function check() {
      fetch(cfg.prefix + "holders?key=" + encodeURIComponent(cfg.watch), { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.status === 403) stopped = true; // signed out: the page says nothing more
          if (!r.ok) return;
          return r.json().then(update);
        })
        .catch(function () {
          // Unreachable for now: the page keeps what it said, and asks again.
        })
        .then(next);
    }
    function update(h) {
      if (h.more) return; // too many locks below the key to tell
      var now = h.locks.map(function (l) { return l.key + "@" + l.token; });
      var remaining = held.filter(function (l) { return now.indexOf(l) >= 0; });
      var changed = remaining.length === 0 && (held.length > 0 || now.length > 0);
      var before = names;
      held = now;
      names = [];
      h.locks.forEach(function (l) {
        var who = l.mine ? "your other tab or window" : l.name;
        if (names.indexOf(who) < 0) names.push(who);
      });
      if (!changed) return;
      toggle("[data-holdfast-while-held]", true);
      var gone = capital(listed(before)) + (before.length === 1 ? " no longer holds" : " no longer hold") + " the edit lock";
      if (now.length === 0) {
        toggle("[data-holdfast-when-free]", false);
        show("free", "Free to edit now", (before.length ? gone : "The edit lock was released") + ", so you can edit this now.");
        return;
      }
      toggle("[data-holdfast-when-free]", true);
      var since = Math.min.apply(null, h.locks.map(function (l) { return Date.parse(l.acquired_at); }));
      var until = Math.max.apply(null, h.locks.map(function (l) { return Date.parse(l.expires_at); }));
      var by = "by " + listed(names) + ", since " + utc(since) + ", until " + utc(until) + " at the latest.";
      show("changed", "Someone is editing this now",
        before.length ? gone + ", but it is held again now: " + by : "It is held again now: " + by);
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) check();
      else next();
    });
    next();
  }

  function listed(names) {
    if (names.length <= 1) return names.join("");
    return names.slice(0, -1).join(", ") + " and " + names[names.length - 1];
  }

  function capital(s) {
    return s.charAt(0).toUpperCase() + s.slice(1);
  }

  // utc writes a time as the server writes every time on the page.
  function utc(t) {
    return new Date(t).toISOString().slice(11, 16) + " UTC";
  }

  function toggle(selector, hidden) {
    var els = document.querySelectorAll(selector);
    for (var i = 0; i < els.length; i++) els[i].hidden = hidden;
  }

  var state = "held"; // held → lost (told by the server, or released for disuse) or left (we released)
  var submitting = false;
  var failures = 0;
  var timer = null;
  var endingSoonSeconds = 10 * 60;

  function pageParams() {
    var p = new URLSearchParams();
    p.set("holdfast_page", cfg.page);
    p.set("holdfast_token", cfg.token);
    return p;
  }

  function schedule() {
    clearTimeout(timer);
    if (state !== "held") return;
    timer = setTimeout(beat, document.hidden ? hiddenMs : visibleMs);
  }

  // A page nobody uses is released after releaseInactiveMs, so that a
  // tab forgotten over lunch does not keep the record locked all
  // afternoon; the last quarter of that time (at most 5 minutes) warns.
  var releaseInactiveMs = Number(cfg.releaseInactive) || 0;
  var lastUsed = Date.now();
  ["keydown", "input", "pointerdown", "wheel", "touchstart"].forEach(function (t) {
    document.addEventListener(t, used, { capture: true, passive: true });
  });

  function used() {
    lastUsed = Date.now();
    var el = document.getElementById("holdfast-notice");
    if (state === "held" && el && el.classList.contains("holdfast-inactive")) el.hidden = true;
  }

  // unused releases the lock of a page unused too long, and warns before;
  // it reports whether it released.
  function unused() {
    if (!releaseInactiveMs) return false;
    var idle = Date.now() - lastUsed;
    if (idle >= releaseInactiveMs) {
      state = "lost";
      clearTimeout(timer);
      navigator.sendBeacon(cfg.prefix + "release", pageParams());
      show("lost", "Your edit lock was released",
        "Nobody typed or clicked on this page for " + minutesText(releaseInactiveMs) +
        ", so its edit lock was released for others to edit.",
        "Your unsaved changes are still in the form below; copy them, then open the record again to go on. Saving from this page is turned off.");
      disableSaving();
      return true;
    }
    if (idle >= releaseInactiveMs - Math.min(5 * 60000, releaseInactiveMs / 4)) {
      show("inactive", "Are you still editing?",
        "You have not used this page since " + utc(lastUsed) + ". Its edit lock will be released at " +
        utc(lastUsed + releaseInactiveMs) + ", for others to edit, unless you type or click here.");
    }
    return false;
  }

  function minutesText(ms) {
    var minutes = Math.round(ms / 60000);
    if (minutes < 1) return Math.round(ms / 1000) + " seconds";
    return minutes === 1 ? "a minute" : minutes + " minutes";
  }

  function beat() {
    if (state !== "held") return;
    if (unused()) return;
    var body = pageParams();
    body.append("key", cfg.key);
    body.set("lock_token", cfg.lockToken);
    fetch(cfg.prefix + "heartbeat", { method: "POST", body: body, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        return r.json().catch(function () { return { held: true, message: "" }; }).then(function (s) {
          if (r.status === 403) return lost(s);
          if (!r.ok) throw new Error(s.message || "HTTP " + r.status);
          failures = 0;
          if (!s.held) return lost(s);
          clearWarning();
          ending(s);
        });
      })
      .catch(function () {
        failures++;
        if (failures >= 2) {
          warn("Cannot reach the server to keep your edit lock. Retrying… Your changes are still here.");
        }
      })
      .then(schedule);
  }

  var explanations = {
    expired: function () {
      return "Your edit lock expired.";
    },
    session_expired: function () {
      return "You were away longer than the idle timeout, so your edit lock was released. Someone else may have changed this record since.";
    },
    session_ended: function () {
      return "Your editing session ended (you signed out, or left this page), so your edit lock was released.";
    },
    released: function () {
      return "Your edit lock was released.";
    },
    force_released: function (s) {
      var who = s.actor ? "An administrator, " + s.actor + "," : "An administrator";
      var why = s.force_reason ? ": \u201c" + s.force_reason + "\u201d" : ".";
      return who + " released your edit lock" + why;
    },
    taken_over: function () {
      return "You took over editing of this record in another tab or window, so this page no longer holds the edit lock.";
    },
    stale_token: function () {
      return "This record was opened for editing again elsewhere; this page no longer holds its edit lock.";
    },
    signed_out: function () {
      return "You are no longer signed in, so this page lost its edit lock.";
    },
    other_session: function () {
      return "This page was opened before you last signed in, so it no longer holds its edit lock. Open the record again to go on editing.";
    }
  };

  function lost(s) {
    state = "lost";
    clearTimeout(timer);
    var explain = explanations[s.reason];
    var text = explain ? explain(s) : (s.message || "This page no longer holds the edit lock.");
    show("lost", "Your edit lock is gone", text,
      "Your unsaved changes are still in the form below; copy them before you leave this page. Saving from this page is turned off.");
    disableSaving();
  }

  // disableSaving turns off the page's save buttons and hides what says
  // the page holds the lock; inputs stay as they are.
  function disableSaving() {
    var saves = document.querySelectorAll("[data-holdfast-save]");
    for (var i = 0; i < saves.length; i++) {
      saves[i].disabled = true;
      saves[i].title = "This page no longer holds the edit lock";
    }
    var held = document.querySelectorAll("[data-holdfast-held]");
    for (var j = 0; j < held.length; j++) held[j].hidden = true;
    document.documentElement.setAttribute("data-holdfast-state", state);
  }

  function notice() {
    var el = document.getElementById("holdfast-notice");
    if (!el) {
      el = document.createElement("div");
      el.id = "holdfast-notice";
      el.style.cssText = "margin:0 0 1em;padding:.75em 1em;border:2px solid #b00020;background:#fff4f4;color:#222;font:inherit";
      el.setAttribute("data-holdfast-styled", "");
      document.body.insertBefore(el, document.body.firstChild);
    }
    return el;
  }

  function show(kind, title, text, detail) {
    var el = notice();
    el.hidden = false;
    el.className = "holdfast-notice holdfast-" + kind;
    // News that a record is free, or held by someone else now, does not
    // interrupt; a lost lock or a failing connection does.
    var news = kind === "free" || kind === "changed";
    el.setAttribute("role", news ? "status" : "alert");
    if (el.hasAttribute("data-holdfast-styled")) {
      // The script's own element; a page's own is styled by the page.
      el.style.borderColor = kind === "free" ? "#1b6e35" : "#b00020";
      el.style.background = kind === "free" ? "#f1faf3" : "#fff4f4";
    }
    el.textContent = "";
    var h = document.createElement("strong");
    h.textContent = title;
    el.appendChild(h);
    [text, detail].forEach(function (t) {
      if (!t) return;
      var p = document.createElement("p");
      p.textContent = t;
      el.appendChild(p);
    });
    // A lost lock's banner offers the page's way back in, if it has one.
    var reopen = kind === "lost" && document.querySelector("a[data-holdfast-reopen]");
    if (reopen) {
      var link = reopen.cloneNode(true);
      link.removeAttribute("data-holdfast-reopen");
      link.removeAttribute("id");
      link.hidden = false;
      var p = document.createElement("p");
      p.appendChild(link);
      el.appendChild(p);
    }
  }

  // ending warns, in the last minutes of the lock's lifetime, that saving
  // will soon be refused: heartbeats keep the page's session alive, not
  // the lock past its expiry.
  function ending(s) {
    var el = document.getElementById("holdfast-notice");
    if (!s.expires_in || s.expires_in > endingSoonSeconds) {
      if (el && el.classList.contains("holdfast-ending")) el.hidden = true;
      return;
    }
    // In UTC, as the server writes every time on the page.
    var at = new Date(s.expires_at).toISOString().slice(11, 16) + " UTC";
    var minutes = Math.max(1, Math.round(s.expires_in / 60));
    show("ending", "Your edit lock ends soon",
      "Your edit lock ends at " + at + ", in " + minutes + (minutes === 1 ? " minute" : " minutes") +
      ". Save before then: after it, saving from this page is refused.");
  }

  function warn(text) {
    show("warning", "Connection problem", text);
  }

  function clearWarning() {
    var el = document.getElementById("holdfast-notice");
    if (el && el.classList.contains("holdfast-warning")) el.hidden = true;
  }

  // Submitting this page's own form (save, cancel) leaves the page through
  // the application, which releases the lock itself after saving; a beacon
  // then would race the save.
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f && f.elements && f.elements.holdfast_page && f.elements.holdfast_page.value === cfg.page) {
      submitting = true;
    }
  });

  // Leaving the page any other way (closing the tab, Back, another link)
  // releases the lock now, instead of after the idle timeout.
  window.addEventListener("pagehide", function () {
    if (submitting || state !== "held") return;
    state = "left";
    clearTimeout(timer);
    navigator.sendBeacon(cfg.prefix + "release", pageParams());
  });

  // Back to a page kept in the back/forward cache: its lock was released
  // when it was left.
  window.addEventListener("pageshow", function (e) {
    submitting = false;
    if (e.persisted && state === "left") {
      show("lost", "Your edit lock was released",
        "You left this page, so its edit lock was released. Open the record again to continue editing.",
        "Your unsaved changes are still in the form below. Saving from this page is turned off.");
      disableSaving();
    }
  });

  // A tab coming back into view checks at once instead of at the slow pace.
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && state === "held") beat();
    else schedule();
  });

  document.documentElement.setAttribute("data-holdfast-state", state);
  schedule();
})();
