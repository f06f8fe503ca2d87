/* Arena battle page: countdown before Submit, keys 1-4 choose an outcome, Enter submits.
   The server refuses early answers anyway; this only makes the wait visible. */
(function () {
  "use strict";
  var form = document.querySelector(".arena-form");
  if (!form) return;
  var submit = document.getElementById("arena-submit");
  var status = document.getElementById("arena-countdown");
  var remaining = parseFloat(form.getAttribute("data-remaining")) || 0;
  var readyAt = Date.now() + remaining * 1000;
  var keys = { "1": "a", "2": "b", "3": "tie", "4": "bothbad" };

  function tick() {
    var left = (readyAt - Date.now()) / 1000;
    if (left <= 0) {
      submit.disabled = false;
      status.textContent = "You can submit your verdict now.";
      return;
    }
    status.textContent = "Read both captions: you can submit in " + Math.ceil(left) + " s.";
    setTimeout(tick, Math.min(250, left * 1000));
  }
  if (remaining > 0) { submit.disabled = true; tick(); } else { submit.disabled = false; }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    // Inside a criterion group the digits are the browser's own radio keys, not outcomes.
    if (event.target.name && event.target.name !== "outcome" && event.target.type === "radio") {
      if (event.key !== "Enter") return;
    }
    var value = keys[event.key];
    var radio = value && form.querySelector('input[name="outcome"][value="' + value + '"]');
    if (radio) {
      radio.checked = true;
      radio.focus();
      // Set by a key, not a click: tell the shared draft (drafts.js), which saves on change.
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      event.preventDefault();
    } else if (event.key === "Enter" && event.target.type === "radio") {
      event.preventDefault();
      if (!submit.disabled) form.requestSubmit(submit);
    }
  });
})();
