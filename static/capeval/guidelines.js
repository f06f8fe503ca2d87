/* The study's task guidelines as a dialog (templates/_base.html; issue 46): the header's
   "Guidelines" button or the g key opens it, Escape or Close shuts it and gives the focus
   back. Keys pressed while it is open stay inside it: a digit must not answer the item
   behind it. Without JavaScript the dialog is shown below the page (capeval.css). */
(function () {
  "use strict";
  var dialog = document.getElementById("guidelines-dialog");
  var opener = document.getElementById("guidelines-open");
  if (!dialog || !opener || !dialog.showModal) return;

  function open() {
    if (dialog.open) return;
    dialog.showModal();
    dialog.scrollTop = 0;
  }

  // A page that lets no single key act outside its own control (WCAG 2.1.4: a screen
  // reader in focus mode hands letters to the page) says so on <body>: the button stays,
  // the g key does nothing and is neither shown nor announced.
  var pageKeys = document.body.getAttribute("data-page-keys") !== "off";
  if (!pageKeys) {
    opener.removeAttribute("aria-keyshortcuts");
    var hint = opener.querySelector("kbd");
    if (hint) hint.remove();
  }

  opener.addEventListener("click", open);
  dialog.addEventListener("close", function () { opener.focus(); });
  // A click on the backdrop (the dialog element itself, outside its content) closes it.
  dialog.addEventListener("click", function (event) {
    if (event.target === dialog) dialog.close();
  });
  dialog.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") event.stopPropagation();
  });

  document.addEventListener("keydown", function (event) {
    if (!pageKeys || event.ctrlKey || event.metaKey || event.altKey || dialog.open) return;
    if (event.key !== "g" && event.key !== "G") return;
    var target = event.target;
    // Typing a note or a number is not a shortcut (radio buttons and buttons are).
    if (target.isContentEditable || (target.matches &&
        target.matches("textarea, select, input:not([type=radio]):not([type=checkbox])"))) {
      return;
    }
    event.preventDefault();
    open();
  });
})();
