// The study page's copy buttons (templates/studies/_crowd_panel.html). Without JavaScript
// the buttons stay hidden and the read-only fields can still be selected and copied.
(function () {
  "use strict";

  function announce(text) {
    var status = document.getElementById("copy-status");
    if (!status) return;
    // Emptied first, so the same message twice in a row is announced twice.
    status.textContent = "";
    window.setTimeout(function () { status.textContent = text; }, 50);
  }

  function copyFrom(field) {
    field.focus();
    field.select();
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(field.value);
    }
    // Plain http (a lab server): the clipboard API is missing, the old command still works.
    return new Promise(function (resolve, reject) {
      if (document.execCommand && document.execCommand("copy")) resolve();
      else reject(new Error("copy refused"));
    });
  }

  function setUp() {
    document.querySelectorAll("button.copy-button[data-copy-target]").forEach(function (button) {
      var field = document.getElementById(button.getAttribute("data-copy-target"));
      if (!field) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        copyFrom(field).then(
          function () { announce("Copied: " + button.textContent.replace(/^Copy /, "") + "."); },
          function () { announce("Copying failed: the text is selected, press Ctrl+C (Cmd+C on a Mac)."); }
        );
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
