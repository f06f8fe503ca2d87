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
})();
