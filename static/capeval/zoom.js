/* The item pages' image zoom (templates/participate/_image.html; issue 46, row 11).
   "Enlarge image", a click or tap on the image, or the z key opens a dialog that loads the
   image at its original resolution. In it: + and - zoom (up to twice the original's
   pixels), 0 fits the screen, 1 shows every pixel; a click or tap zooms in at that point
   (or back out); two fingers pinch; the arrows, one finger or the scroll wheel move it
   (the box scrolls natively). Escape or Close shuts it and gives the focus back. Keys
   pressed while it is open stay inside it: a digit must not answer the item behind it. */
(function () {
  "use strict";
  var dialog = document.getElementById("image-zoom");
  if (!dialog || !dialog.showModal) return;
  var opener = document.querySelector('[data-zoom-open="image-zoom"]');
  var thumb = document.querySelector('[data-zoom-target="image-zoom"]');
  var view = dialog.querySelector(".zoom-view");
  var full = dialog.querySelector(".zoom-full");
  var level = document.getElementById("image-zoom-level");
  var width = parseInt(dialog.getAttribute("data-width"), 10) || 0;
  var height = parseInt(dialog.getAttribute("data-height"), 10) || 0;
  var MAX = 2, STEP = 1.5;
  // As guidelines.js: a page that keeps single keys inside their own control (WCAG 2.1.4)
  // opens the zoom by its button and the image only, never by the z key.
  var pageKeys = document.body.getAttribute("data-page-keys") !== "off";
  if (!pageKeys && opener) {
    opener.removeAttribute("aria-keyshortcuts");
    var hint = opener.querySelector("kbd");
    if (hint) hint.remove();
  }
  // Out of the page's <figure>: the mode's rules for its image (a 16vh band, max-width) must
  // not reach the full-size one, nor a sticky figure's stacking hold the dialog.
  document.body.appendChild(dialog);
  var scale = 0, fitted = true;

  function fit() {
    if (!width || !height) return 1;
    return Math.min(1, view.clientWidth / width, view.clientHeight / height);
  }
  // Zoom to ``next`` keeping the image point under (x, y) of the box where it was.
  function zoomTo(next, x, y) {
    if (!width || !height) return;
    var low = fit();
    var old = scale || low;
    scale = Math.max(low, Math.min(MAX, next));
    fitted = scale <= low + 1e-6;
    if (x === undefined) { x = view.clientWidth / 2; y = view.clientHeight / 2; }
    var px = (view.scrollLeft + x) / old, py = (view.scrollTop + y) / old;
    full.style.width = Math.round(width * scale) + "px";
    full.style.height = Math.round(height * scale) + "px";
    view.scrollLeft = px * scale - x;
    view.scrollTop = py * scale - y;
    view.classList.toggle("zoomed", !fitted);
    level.textContent = fitted ? "fit (" + Math.round(scale * 100) + "%)" : Math.round(scale * 100) + "%";
  }
  function step(direction, x, y) {
    var now = scale || fit(), next = direction > 0 ? now * STEP : now / STEP;
    // Stop at 100% on the way: the original's own pixels.
    if ((now < 1 && next > 1) || (now > 1 && next < 1)) next = 1;
    zoomTo(next, x, y);
  }
  function open() {
    if (dialog.open) return;
    if (!full.getAttribute("src")) full.src = dialog.getAttribute("data-full");
    dialog.showModal();
    scale = 0;
    zoomTo(fit());
    view.focus();
  }

  if (opener) { opener.hidden = false; opener.addEventListener("click", open); }
  if (thumb) thumb.addEventListener("click", open);
  dialog.addEventListener("close", function () { if (opener) opener.focus(); });
  window.addEventListener("resize", function () { if (dialog.open && fitted) zoomTo(fit()); });

  dialog.querySelector("[data-zoom-close]").addEventListener("click", function () { dialog.close(); });
  dialog.querySelectorAll("[data-zoom-step]").forEach(function (button) {
    button.addEventListener("click", function () { step(+button.getAttribute("data-zoom-step")); });
  });
  dialog.querySelectorAll("[data-zoom-to]").forEach(function (button) {
    button.addEventListener("click", function () {
      var to = button.getAttribute("data-zoom-to");
      zoomTo(to === "fit" ? fit() : +to);
    });
  });
  // A click or tap: in to every pixel at that point, or back out to the whole image.
  full.addEventListener("click", function (event) {
    var box = view.getBoundingClientRect();
    var x = event.clientX - box.left, y = event.clientY - box.top;
    if (fitted) zoomTo(Math.max(1, fit() * 2), x, y); else zoomTo(fit(), x, y);
  });
  // Ctrl + wheel (and a touchpad's pinch, which browsers send as one) zooms at the pointer.
  view.addEventListener("wheel", function (event) {
    if (!event.ctrlKey) return;
    event.preventDefault();
    var box = view.getBoundingClientRect();
    zoomTo((scale || fit()) * Math.exp(-event.deltaY / 300), event.clientX - box.left, event.clientY - box.top);
  }, { passive: false });
  // Two fingers pinch; one finger is the box's own scrolling.
  var pinch = null;
  function spread(touches) {
    return Math.hypot(touches[0].clientX - touches[1].clientX, touches[0].clientY - touches[1].clientY);
  }
  view.addEventListener("touchstart", function (event) {
    if (event.touches.length === 2) pinch = { distance: spread(event.touches), scale: scale || fit() };
  }, { passive: true });
  view.addEventListener("touchmove", function (event) {
    if (!pinch || event.touches.length !== 2) return;
    event.preventDefault();
    var box = view.getBoundingClientRect();
    var x = (event.touches[0].clientX + event.touches[1].clientX) / 2 - box.left;
    var y = (event.touches[0].clientY + event.touches[1].clientY) / 2 - box.top;
    zoomTo(pinch.scale * spread(event.touches) / pinch.distance, x, y);
  }, { passive: false });
  view.addEventListener("touchend", function (event) { if (event.touches.length < 2) pinch = null; });

  dialog.addEventListener("keydown", function (event) {
    if (event.key === "Escape") return;
    event.stopPropagation();
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var key = event.key;
    if (key === "+" || key === "=") step(1);
    else if (key === "-" || key === "_") step(-1);
    else if (key === "0") zoomTo(fit());
    else if (key === "1") zoomTo(1);
    else return;
    event.preventDefault();
  });
  document.addEventListener("keydown", function (event) {
    if (!pageKeys || event.ctrlKey || event.metaKey || event.altKey || dialog.open) return;
    if (event.key !== "z" && event.key !== "Z") return;
    var target = event.target;
    // Typing a note or a number is not a shortcut (radio buttons and buttons are).
    if (target.isContentEditable || (target.matches &&
        target.matches("textarea, select, input:not([type=radio]):not([type=checkbox])"))) {
      return;
    }
    if (document.querySelector("dialog[open]")) return;
    event.preventDefault();
    open();
  });
})();
