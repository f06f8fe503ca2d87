/* The context mode's item page (issue 43): keys, the announced minimum time, errors.
   The page works without it: native radio groups, a form that posts, the server refusing
   an answer sent too soon. This only adds:
   - keys 1-5 choose that answer of the question the focus is in (only there: a single-key
     shortcut elsewhere would take the keys a screen reader uses to move, WCAG 2.1.4);
     Enter on an answer sends the form;
   - the minimum reading time announced in the status region when the page is ready and
     when it is over (two announcements, not a countdown a screen reader would read out
     every second); an answer sent sooner waits and is sent then (static/capeval/drafts.js);
   - the focus moved to the list of errors of a refused answer, so it is read first. */
(function () {
  "use strict";
  var form = document.querySelector(".context-form");
  if (!form) return;
  var announce = document.getElementById("context-announce");
  var submit = document.getElementById("context-submit");

  function say(text) {
    // Emptied first, so the same sentence twice is announced twice.
    announce.textContent = "";
    setTimeout(function () { announce.textContent = text; }, 50);
  }

  var errors = document.getElementById("context-errors");
  if (errors) {
    errors.focus();
  }

  var remaining = parseInt(form.getAttribute("data-remaining"), 10) || 0;
  if (remaining > 0 && !errors) {
    say("You can send your ratings in " + remaining + " second" + (remaining === 1 ? "" : "s") + ".");
    setTimeout(function () { say("You can send your ratings now."); }, remaining * 1000);
  }

  form.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var target = event.target;
    if (!target || target.type !== "radio") return;
    if (/^[1-5]$/.test(event.key)) {
      var radio = form.querySelector('input[type="radio"][name="' + target.name + '"][value="' + event.key + '"]');
      if (radio) {
        radio.checked = true;
        radio.focus();
        // Set by a key, not a click: tell the shared draft (drafts.js), which saves on change.
        radio.dispatchEvent(new Event("change", { bubbles: true }));
        event.preventDefault();
      }
    } else if (event.key === "Enter") {
      event.preventDefault();
      form.requestSubmit(submit);
    }
  });
})();
