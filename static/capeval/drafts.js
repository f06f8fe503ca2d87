/* Every item page of every mode (issue 42): the answer in progress is kept in this browser
   until the server has it, and the page says where it stands.

   templates/_base.html renders the status region #draft-status with the lease's draft key,
   its expiry and the submit URL when the view gives a `draft` context; the item form is the
   form whose action is that URL. Nothing here names a mode: a mode script that keeps its
   answer in a hidden field fires "input" on it, and redraws its controls on the
   "capeval:draft-restored" event. Without JavaScript (or without fetch) the form posts as
   it always did, and the server stores a repeated submission once.

   - Draft: every named field, saved in localStorage under the lease key on each change and
     at submit; restored on load and when the page comes back from the back-forward cache;
     removed when the server acknowledges the answer or the lease has expired.
   - Submission: posted with fetch asking for JSON. A network error or a 502/503/504 keeps
     the answer and retries with capped, jittered backoff (and "Send now"); the server's
     lease token makes a resend safe ("already_stored"). */
(function () {
  "use strict";
  var PREFIX = "capeval-draft:";
  var region = document.getElementById("draft-status");
  if (!region || !window.fetch || !window.URLSearchParams) return;
  var submitUrl = new URL(region.getAttribute("data-submit-url"), location.href).href;
  var form = Array.prototype.filter.call(document.forms, function (f) {
    return f.action === submitUrl;
  })[0];
  if (!form) return;
  var storageKey = PREFIX + region.getAttribute("data-draft-key");
  var expiresAt = Date.parse(region.getAttribute("data-draft-expires")) || 0;

  var attempt = 0;     // failed sends of the waiting answer
  var timer = null;    // the scheduled resend
  var inFlight = false;
  var waiting = false; // an answer is kept and not yet acknowledged
  var finished = false;

  // ------------------------------------------------------------------ the draft
  function store() {
    try { return window.localStorage; } catch (e) { return null; } // storage blocked
  }
  function dropExpired() {
    var s = store();
    if (!s) return;
    var now = Date.now();
    for (var i = s.length - 1; i >= 0; i--) {
      var k = s.key(i);
      if (!k || k.indexOf(PREFIX) !== 0) continue;
      var draft = null;
      try { draft = JSON.parse(s.getItem(k)); } catch (e) { /* unreadable: drop it */ }
      if (!draft || !(draft.expires > now)) s.removeItem(k);
    }
  }
  function fields() {
    var data = {};
    new FormData(form).forEach(function (value, name) {
      if (name === "csrfmiddlewaretoken" || typeof value !== "string") return;
      (data[name] = data[name] || []).push(value);
    });
    return data;
  }
  function save() {
    var s = store();
    if (!s || finished) return;
    try {
      s.setItem(storageKey, JSON.stringify({ expires: expiresAt, fields: fields() }));
    } catch (e) { /* full: the form still holds the answer */ }
  }
  function clear() {
    var s = store();
    if (s) s.removeItem(storageKey);
  }
  function restore() {
    var s = store();
    if (!s) return false;
    var draft = null;
    try { draft = JSON.parse(s.getItem(storageKey)); } catch (e) { return false; }
    if (!draft || !draft.fields) return false;
    if (!(draft.expires > Date.now())) { clear(); return false; }
    var data = draft.fields, seen = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      var name = el.name;
      if (!name || name === "csrfmiddlewaretoken" || el.type === "submit" || el.type === "button" || el.type === "file") return;
      var values = data[name] || [];
      if (el.type === "radio" || el.type === "checkbox") {
        // A name absent from the draft is a box left unticked (FormData omits those).
        if (el.type === "checkbox" || values.length) el.checked = values.indexOf(el.value) >= 0;
      } else if (el.tagName === "SELECT" && el.multiple) {
        Array.prototype.forEach.call(el.options, function (o) { o.selected = values.indexOf(o.value) >= 0; });
      } else {
        var n = seen[name] || 0;
        seen[name] = n + 1;
        if (n < values.length) el.value = values[n];
      }
    });
    form.dispatchEvent(new CustomEvent("capeval:draft-restored", { bubbles: true, detail: { fields: data } }));
    return true;
  }

  // ------------------------------------------------------------------ the status
  function say(text, options) {
    options = options || {};
    region.textContent = "";
    var line = document.createElement("p");
    line.id = "draft-status-text";
    line.textContent = text;
    if (options.link) {
      line.appendChild(document.createTextNode(" "));
      var a = document.createElement("a");
      a.href = options.link;
      a.textContent = options.linkText || "Go on";
      line.appendChild(a);
    }
    if (options.sendNow) {
      line.appendChild(document.createTextNode(" "));
      var b = document.createElement("button");
      b.type = "button";
      b.id = "draft-send-now";
      b.textContent = "Send now";
      b.addEventListener("click", sendNow);
      line.appendChild(b);
    }
    region.appendChild(line);
    region.className = "draft-status" + (options.kind ? " draft-" + options.kind : "");
  }

  // Submit buttons are off while a request is out (no double submit); the ones a mode
  // script had turned off (a countdown) stay off afterwards.
  var turnedOff = [];
  function busy(on) {
    if (on) {
      turnedOff = Array.prototype.filter.call(form.querySelectorAll("button[type=submit], input[type=submit], button:not([type])"), function (b) {
        return !b.disabled;
      });
      turnedOff.forEach(function (b) { b.disabled = true; });
    } else {
      turnedOff.forEach(function (b) { b.disabled = false; });
      turnedOff = [];
    }
  }

  // ------------------------------------------------------------------ sending
  function body() {
    var params = new URLSearchParams();
    new FormData(form).forEach(function (value, name) {
      if (typeof value === "string") params.append(name, value);
    });
    return params;
  }
  function csrf() {
    var field = form.querySelector('input[name="csrfmiddlewaretoken"]');
    return field ? field.value : "";
  }
  // The server's own page: for answers it refuses (its errors shown beside the fields)
  // and for replies this script does not know. Nothing was stored, so posting is safe.
  function postNormally() {
    finished = true;
    HTMLFormElement.prototype.submit.call(form);
  }

  function backoff() {
    // 4, 8, 16, 30, 30 … seconds, each ±20 % so that many pages cut off together do not
    // all come back at the same instant.
    var base = Math.min(30, 4 * Math.pow(2, attempt));
    return Math.max(1, Math.round(base * (0.8 + Math.random() * 0.4)));
  }
  function schedule(seconds) {
    clearTimeout(timer);
    timer = setTimeout(send, seconds * 1000);
  }
  function retryLater(why) {
    waiting = true;
    if (!navigator.onLine) { offline(); return; }
    var seconds = backoff();
    attempt += 1;
    say("Not sent yet: " + why + " Your answer is kept in this browser. Retrying in " + seconds + " s\u2026", { sendNow: true, kind: "waiting" });
    schedule(seconds);
  }
  function sendNow() {
    clearTimeout(timer);
    send();
  }

  function send() {
    if (inFlight || finished) return;
    clearTimeout(timer);
    save();
    waiting = true;
    inFlight = true;
    busy(true);
    say("Sending your answer\u2026", { kind: "sending" });
    fetch(form.action, {
      method: "POST",
      body: body(),
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrf() }
    }).then(function (response) {
      var status = response.status;
      return response.json().then(function (reply) { return { status: status, reply: reply }; },
        function () { return { status: status, reply: null }; });
    }).then(function (answer) {
      inFlight = false;
      busy(false);
      handle(answer.status, answer.reply);
    }, function () {
      inFlight = false;
      busy(false);
      retryLater("the connection dropped.");
    });
  }

  function handle(status, reply) {
    var code = reply && reply.status;
    if (code === "stored" || code === "already_stored") {
      finished = true;
      waiting = false;
      clear();
      say("Saved.", { kind: "saved" });
      location.assign(reply.next_url || location.href);
    } else if (code === "too_fast") {
      var wait = Math.max(1, Math.ceil(Number(reply.retry_after) || 1));
      say("Sending in " + wait + " s: the minimum time for this item is not over yet.", { kind: "waiting" });
      schedule(wait);
    } else if (code === "lease_expired" || code === "study_closed" || code === "not_participant") {
      finished = true;
      waiting = false;
      // The lease is over either way: stored with the answer, or gone with its reason.
      clear();
      say(reply.message || "This item is no longer yours to answer.", {
        link: reply.next_url, linkText: "Go on", kind: "over"
      });
      var link = region.querySelector("a");
      if (link) link.focus();
    } else if (status === 502 || status === 503 || status === 504) {
      retryLater("the server did not answer.");
    } else {
      // "invalid" and anything unforeseen: the server's page says what to fix.
      postNormally();
    }
  }

  function offline() {
    if (finished) return;
    clearTimeout(timer);
    say("You are offline: keep working; your answer is kept and sent when the connection returns.", { kind: "offline" });
  }

  // ------------------------------------------------------------------ wiring
  function start() {
    dropExpired();
    // Next to the form's buttons, where the annotator is looking when they submit.
    form.appendChild(region);
    restore();
    form.addEventListener("input", save);
    form.addEventListener("change", save);
    form.addEventListener("submit", function (event) {
      // A mode script that holds the answer back (a missing choice, the minimum time)
      // has cancelled the event already.
      if (event.defaultPrevented) return;
      event.preventDefault();
      if (finished) return;
      attempt = 0;
      send();
    });
    window.addEventListener("offline", offline);
    window.addEventListener("online", function () {
      if (finished) return;
      if (waiting && !inFlight) { attempt = 0; send(); } else if (!waiting) region.textContent = "";
    });
    // A page restored from the back-forward cache (a phone waking, the Back button) runs no
    // script again: take the draft back as it is now.
    window.addEventListener("pageshow", function (event) {
      if (!event.persisted) return;
      finished = false;
      inFlight = false;
      busy(false);
      restore();
    });
    if (!navigator.onLine) offline();
  }

  // After the mode scripts (deferred too, and earlier in the page) have set up their controls.
  if (document.readyState === "complete") start();
  else document.addEventListener("DOMContentLoaded", start);
})();
