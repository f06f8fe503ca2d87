/* VICR item page: countdown before Submit, keys 1-5 and Enter, rating guide dialog.
   The server refuses early ratings anyway; this only makes the wait visible. */
(function () {
  "use strict";
  var form = document.querySelector(".vicr-form");
  if (!form) return;
  var submit = document.getElementById("vicr-submit");
  var status = document.getElementById("vicr-countdown");
  var dialog = document.getElementById("vicr-guide");
  var opener = document.getElementById("vicr-guide-open");
  var remaining = parseFloat(form.getAttribute("data-remaining")) || 0;
  var readyAt = Date.now() + remaining * 1000;

  function tick() {
    var left = (readyAt - Date.now()) / 1000;
    if (left <= 0) {
      submit.disabled = false;
      status.textContent = "You can submit your rating now.";
      return;
    }
    status.textContent = "Look carefully: you can submit in " + Math.ceil(left) + " s.";
    setTimeout(tick, Math.min(250, left * 1000));
  }
  if (remaining > 0) { submit.disabled = true; tick(); } else { submit.disabled = false; }

  if (dialog && typeof dialog.showModal === "function") {
    opener.hidden = false;
    opener.addEventListener("click", function () { dialog.showModal(); });
    dialog.addEventListener("close", function () { opener.focus(); });
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || (dialog && dialog.open)) return;
    var radio = form.querySelector('input[name="rating"][value="' + event.key + '"]');
    if (radio) {
      radio.checked = true;
      radio.focus();
      // Set by a key, not a click: tell the shared draft (drafts.js), which saves on change.
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      event.preventDefault();
    } else if (event.key === "Enter" && event.target.type === "radio") {
      event.preventDefault();
      if (!submit.disabled && form.querySelector('input[name="rating"]:checked')) {
        form.requestSubmit(submit);
      }
    }
  });
})();
