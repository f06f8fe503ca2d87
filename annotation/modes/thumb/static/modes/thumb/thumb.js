// THumB item page: running totals, fluency amounts, digit keys, rubric dialog. The draft is
// the shared one of every mode (static/capeval/drafts.js).
// Progressive enhancement: the form posts and validates server-side without any of this.
(function () {
  "use strict";
  var form = document.getElementById("thumb-form");
  if (!form) return;
  var dialog = document.getElementById("rubric");
  var opener = document.getElementById("rubric-open");

  function checked(name) {
    var box = form.querySelector('input[name="' + name + '"]:checked');
    return box ? parseFloat(box.value) : null;
  }

  function fluency(section) {
    var sum = 0, count = 0;
    var key = section.dataset.group;
    section.querySelectorAll("input[type=checkbox]").forEach(function (box) {
      var amount = document.getElementById(key + "-amount-" + box.value);
      if (amount) amount.closest("label").hidden = !box.checked;
      if (!box.checked) return;
      count += 1;
      if (box.dataset.penalty) sum += parseFloat(box.dataset.penalty);
      else if (amount && !isNaN(parseFloat(amount.value))) sum += parseFloat(amount.value);
    });
    return { sum: Math.round(sum * 10) / 10, count: count };
  }

  function update(section) {
    var key = section.dataset.group;
    var flu = fluency(section);
    var summary = section.querySelector("[data-flu-summary]");
    summary.textContent = flu.count + " ticked" + (flu.count ? ", −" + flu.sum : "");
    section.querySelectorAll("fieldset[data-was]").forEach(function (set) {
      var was = set.dataset.was, mark = set.querySelector(".was");
      if (!mark || was === "") return;
      var now = checked(set.id);
      var changed = now !== null && now !== parseFloat(was);
      mark.classList.toggle("changed", changed);
      // "stage 1" on stage 2's page, "stage 2" on the check's (data-reviewed on the form).
      var label = form.dataset.reviewed;
      mark.textContent = "(" + label + ": " + was + (changed ? "; changed" : "") + ")";
    });
    var out = document.getElementById(key + "-total");
    if (!out) return;
    var p = checked(key + "-precision"), r = checked(key + "-recall");
    if (p === null || r === null) { out.textContent = "—"; return; }
    var pen = flu.sum + (checked(key + "-conciseness") || 0) + (checked(key + "-inclusive") || 0);
    var total = Math.round(((p + r) / 2 - pen) * 10) / 10;
    out.textContent = String(total);
  }

  function sections() { return form.querySelectorAll("section[data-group]"); }

  sections().forEach(update);
  // The shared draft (static/capeval/drafts.js) put the answers back: redraw the totals.
  form.addEventListener("capeval:draft-restored", function () { sections().forEach(update); });

  form.addEventListener("input", function (event) {
    var section = event.target.closest("section[data-group]");
    if (section) update(section);
  });
  form.addEventListener("change", function (event) {
    var section = event.target.closest("section[data-group]");
    if (section) update(section);
  });

  function openRubric() {
    if (!(dialog && dialog.showModal) || dialog.open) return;
    dialog.showModal();
    // showModal focuses the first control, the Close button at the very end, and scrolls
    // the dialog there: start at the top, on the heading, instead.
    var title = document.getElementById("rubric-title");
    if (title) {
      title.setAttribute("tabindex", "-1");
      title.focus({ preventScroll: true });
    }
    dialog.scrollTop = 0;
  }
  if (opener && dialog && dialog.showModal) {
    opener.setAttribute("role", "button");
    opener.addEventListener("click", function (event) { event.preventDefault(); openRubric(); });
    dialog.addEventListener("close", function () { opener.focus(); });
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    var typing = target.matches && target.matches("input[type=number], input[type=text], textarea, select");
    if ((event.key === "?" || event.key === "h") && !typing && !(dialog && dialog.open)) {
      event.preventDefault();
      openRubric();
      return;
    }
    if (/^[1-5]$/.test(event.key) && !typing && !(dialog && dialog.open)) {
      // The field the focus is in, else the first precision or recall still empty: no
      // need to Tab into a field first (the shortcuts are listed on the page).
      var scales = Array.prototype.slice.call(form.querySelectorAll("fieldset.scale"));
      var set = target.closest ? target.closest("fieldset.scale") : null;
      if (!set) {
        set = scales.filter(function (s) { return !s.querySelector("input:checked"); })[0];
      }
      if (!set) return;
      var radio = set.querySelector('input[value="' + event.key + '"]');
      if (!radio) return;
      event.preventDefault();
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      // On to the next score, so "4 3 4 3 ..." scores the captions in order.
      var next = scales[scales.indexOf(set) + 1];
      var focus = next
        ? next.querySelector("input:checked") || next.querySelector("input")
        : form.querySelector("button[type=submit]");
      focus.focus();
    }
  });

  var error = document.getElementById("form-error");
  if (error) error.focus();
})();
