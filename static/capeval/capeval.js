// Every page. Loaded in <head> without defer: it must run before the first paint.
// The Content-Security-Policy allows no inline script, so what pages once did inline lives here.
(function () {
  "use strict";
  // Scripts run: styles keyed on .no-js (the no-JavaScript fallbacks) stop applying.
  document.documentElement.classList.remove("no-js");
  // "Go back" links: back in this tab's history; without JavaScript (or without history)
  // the link's own href is followed.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a[data-history-back]");
    if (!link || window.history.length < 2) return;
    event.preventDefault();
    window.history.back();
  });

  // A wide table in a .table-scroll box (the per-worker table, the metric tables) hides its
  // right-hand columns at narrow widths; issue 26 row 8 found nobody saw them. Under every
  // box that overflows, a line names the columns out of view, and it follows the scroll.
  function hiddenColumns(box) {
    var edge = box.getBoundingClientRect().right;
    var start = box.getBoundingClientRect().left;
    var heads = box.querySelectorAll("thead th");
    var names = [];
    for (var i = 0; i < heads.length; i++) {
      var rect = heads[i].getBoundingClientRect();
      if (rect.right > edge + 1 || rect.left < start - 1) {
        names.push(heads[i].textContent.replace(/;.*$/, "").replace(/,.*$/, "").trim());
      }
    }
    return names;
  }
  function markScrollHints() {
    var boxes = document.querySelectorAll(".table-scroll");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      var hint = box.nextElementSibling;
      if (!hint || !hint.classList.contains("scroll-hint")) {
        hint = document.createElement("p");
        hint.className = "scroll-hint help";
        box.parentNode.insertBefore(hint, box.nextSibling);
        box.addEventListener("scroll", markScrollHints, { passive: true });
      }
      var names = box.scrollWidth > box.clientWidth + 1 ? hiddenColumns(box) : [];
      hint.hidden = names.length === 0;
      hint.textContent = names.length
        ? "Scroll the table sideways for: " + names.join(", ") + "."
        : "";
    }
  }
  document.addEventListener("DOMContentLoaded", markScrollHints);
  window.addEventListener("resize", markScrollHints);
  document.addEventListener("htmx:afterSettle", markScrollHints);
})();
