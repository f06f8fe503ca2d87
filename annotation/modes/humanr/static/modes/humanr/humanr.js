/* HUMANr trial page: keys 1-9 choose, arrows move the choice, Enter goes on; shows the
   chosen value; holds a too-early answer until the server's minimum time has passed.
   Without this script the radio buttons and the button still work. */
(function () {
  "use strict";
  var form = document.querySelector(".hr-form");
  if (!form) return;
  var radios = Array.prototype.slice.call(form.querySelectorAll('input[name="raw"]'));
  var shown = document.getElementById("hr-choice-value");
  var status = document.getElementById("hr-status");
  var submit = document.getElementById("hr-submit");
  var missing = document.getElementById("hr-missing");
  var scale = form.querySelector(".hr-scale");
  var readyAt = Date.now() + (parseFloat(form.getAttribute("data-remaining")) || 0) * 1000 + 100;
  var holding = false;

  function chosen() {
    for (var i = 0; i < radios.length; i++) if (radios[i].checked) return radios[i];
    return null;
  }
  function describe(radio) {
    return radio.getAttribute("aria-label") || radio.value;
  }
  function choose(value) {
    var radio = radios[Math.max(1, Math.min(9, value)) - 1];
    radio.checked = true;
    radio.focus();
    update();
    // Keys set the radio without an event: the shared draft (drafts.js) saves on change.
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  }
  function update() {
    var radio = chosen();
    shown.textContent = radio ? describe(radio) : "none yet";
    if (radio && missing.textContent) {
      missing.textContent = "";
      radios.forEach(function (r) { r.removeAttribute("aria-invalid"); });
      if (scale.getAttribute("aria-describedby") === missing.id) scale.removeAttribute("aria-describedby");
    }
  }
  form.addEventListener("change", update);

  form.addEventListener("submit", function (event) {
    if (!chosen()) {
      // The form has novalidate: the browser's own "select one of these options" bubble
      // would fire first and hide this message, which says what the scale is.
      event.preventDefault();
      missing.textContent = "Choose a value from 1 to 9 first.";
      scale.setAttribute("aria-describedby", missing.id);
      radios.forEach(function (radio) { radio.setAttribute("aria-invalid", "true"); });
      radios[0].focus();
      return;
    }
    var wait = readyAt - Date.now();
    if (wait > 0) {
      // Held until the minimum time is over, then submitted again through the submit event,
      // so the shared sender (drafts.js) posts it; without it the form posts as usual.
      event.preventDefault();
      status.textContent = "Saving…";
      if (!holding) {
        holding = true;
        setTimeout(function () { holding = false; form.requestSubmit(submit); }, wait);
      }
      return;
    }
    status.textContent = "Saving…";
  });
  // The shared draft (static/capeval/drafts.js) put the choice back: show it.
  form.addEventListener("capeval:draft-restored", update);

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var key = event.key;
    if (/^[1-9]$/.test(key)) {
      event.preventDefault();
      choose(parseInt(key, 10));
      return;
    }
    var current = chosen();
    var onScale = event.target && event.target.name === "raw";
    var step = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1 }[key];
    if (step && (onScale || event.target === document.body || event.target.id === "main")) {
      event.preventDefault();
      // From no choice the first arrow press lands on the middle: no side is favoured.
      choose(current ? parseInt(current.value, 10) + step : 5);
    } else if ((key === "Home" || key === "End") && onScale) {
      event.preventDefault();
      choose(key === "Home" ? 1 : 9);
    } else if (key === "Enter" && (onScale || event.target === document.body)) {
      event.preventDefault();
      form.requestSubmit(submit);
    }
  });
  update();
})();
