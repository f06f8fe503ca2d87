/* Error-span page: select words by mouse drag, by touch (tap the first word, then the last)
   or by keyboard (arrows move by word, Shift+arrow extends, Enter confirms), then give a
   severity and a category. Marks are listed as text with Edit and Remove, and posted as
   JSON in "spans" with each span's text, so the server checks the offsets. Offsets are
   code points (the words carry them from the server), never UTF-16 units. A mark that
   overlaps another is refused when it is added, quoting the other mark's words (the server
   refuses it too, but only at submit and by offsets). Without this script the page's
   numbered fields do the same. */
(function () {
  "use strict";
  var form = document.querySelector(".spans-form");
  if (!form) return;
  var caption = document.getElementById("spans-caption");
  var chars = Array.from(caption.getAttribute("data-text"));
  var words = Array.prototype.slice.call(caption.querySelectorAll(".w"));
  var panel = document.getElementById("spans-panel");
  var selectedLabel = document.getElementById("spans-selected");
  var list = document.getElementById("spans-list");
  var json = document.getElementById("spans-json");
  var status = document.getElementById("spans-status");
  var addButton = document.getElementById("spans-add");
  var refused = document.getElementById("spans-refused");
  var none = document.getElementById("spans-none");
  var maxMarks = parseInt(form.getAttribute("data-max"), 10) || 5;
  var marks = [];
  var anchor = null, focusIndex = null, cursor = 0, editing = null;

  // Switch from the fallback fields to the interactive marking.
  document.getElementById("spans-fallback").remove();
  document.getElementById("spans-marks-section").hidden = false;
  document.getElementById("spans-keys").hidden = false;
  json.disabled = false;
  caption.tabIndex = 0;

  function textOf(start, end) { return chars.slice(start, end).join(""); }
  function bounds() {
    if (anchor === null) return null;
    var lo = Math.min(anchor, focusIndex), hi = Math.max(anchor, focusIndex);
    return { lo: lo, hi: hi, start: +words[lo].dataset.start, end: +words[hi].dataset.end };
  }
  function paint() {
    var b = bounds();
    words.forEach(function (w, i) {
      var s = +w.dataset.start, e = +w.dataset.end, sev = "";
      marks.forEach(function (m) { if (!m.omission && m.start < e && s < m.end && sev !== "major") sev = m.severity; });
      w.className = "w" + (sev ? " marked-" + sev : "") + (b && i >= b.lo && i <= b.hi ? " sel" : "") +
        (document.activeElement === caption && i === cursor ? " cursor" : "");
    });
    selectedLabel.textContent = b ? "\u201c" + textOf(b.start, b.end) + "\u201d" : "nothing selected";
  }
  function refuse(message) { refused.textContent = message; refused.hidden = !message; }
  function select(lo, hi) { anchor = lo; focusIndex = hi; panel.hidden = false; refuse(""); paint(); keepInView(); }
  function clearSelection() { anchor = focusIndex = null; editing = null; panel.hidden = true; refuse(""); addButton.textContent = "Add mark"; paint(); }
  // The panel sticks to the bottom of the screen while the caption goes on below it (a long
  // caption on a phone put it a scroll away from every mark): keep the selected words above it.
  function keepInView() {
    var b = bounds();
    if (!b || panel.hidden) return;
    var sheet = panel.getBoundingClientRect(), last = words[b.hi].getBoundingClientRect();
    if (last.bottom > sheet.top - 8) window.scrollBy(0, last.bottom - sheet.top + 16);
  }

  function render() {
    list.textContent = "";
    none.hidden = marks.length > 0;
    marks.forEach(function (m, i) {
      var li = document.createElement("li");
      li.appendChild(document.createTextNode("\u201c" + m.text + "\u201d: " + m.severity + ", " + m.category + (m.note ? "; " + m.note : "") + " "));
      [["Edit", function () { edit(i); }], ["Remove", function () { remove(i); }]].forEach(function (pair) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = pair[0];
        b.setAttribute("aria-label", pair[0] + " mark " + (i + 1) + ": " + m.text);
        b.addEventListener("click", pair[1]);
        li.appendChild(b);
      });
      list.appendChild(li);
    });
    json.value = JSON.stringify(marks);
    // A script's change fires no event of its own: tell the shared draft (drafts.js).
    json.dispatchEvent(new Event("input", { bubbles: true }));
    paint();
  }
  function indexOfOffset(offset, atEnd) {
    for (var i = 0; i < words.length; i++) {
      if (atEnd ? +words[i].dataset.end >= offset : +words[i].dataset.end > offset) return i;
    }
    return words.length - 1;
  }
  function edit(i) {
    var m = marks[i];
    editing = i;
    select(indexOfOffset(m.start, false), indexOfOffset(m.end, true));
    form.querySelector('input[name="mark-severity"][value="' + m.severity + '"]').checked = true;
    document.getElementById("mark-category").value = m.category;
    document.getElementById("mark-note").value = m.note || "";
    addButton.textContent = "Save changes";
    form.querySelector('input[name="mark-severity"]:checked').focus();
  }
  function remove(i) {
    var gone = marks.splice(i, 1)[0];
    render();
    status.textContent = "Removed \u201c" + gone.text + "\u201d.";
    caption.focus();
  }
  addButton.addEventListener("click", function () {
    var b = bounds();
    if (!b) return;
    if (editing === null && marks.length >= maxMarks) {
      status.textContent = "At most " + maxMarks + " marks: remove one first.";
      return;
    }
    var clash = marks.filter(function (m, i) { return i !== editing && !m.omission && m.start < b.end && b.start < m.end; })[0];
    if (clash) {
      refuse("\u201c" + textOf(b.start, b.end) + "\u201d overlaps your mark on \u201c" + clash.text + "\u201d: select other words, or edit or remove that mark first.");
      return;
    }
    var mark = {
      start: b.start, end: b.end, text: textOf(b.start, b.end),
      severity: form.querySelector('input[name="mark-severity"]:checked').value,
      category: document.getElementById("mark-category").value,
      note: document.getElementById("mark-note").value
    };
    if (editing !== null) marks[editing] = mark; else marks.push(mark);
    marks.sort(function (x, y) { return x.start - y.start; });
    status.textContent = (editing !== null ? "Changed" : "Added") + " \u201c" + mark.text + "\u201d: " + mark.severity + ", " + mark.category + ".";
    document.getElementById("mark-note").value = "";
    clearSelection();
    render();
    caption.focus();
  });
  document.getElementById("spans-cancel").addEventListener("click", function () { clearSelection(); caption.focus(); });

  // Mouse drag: the words the browser's selection touches.
  caption.addEventListener("mouseup", function () {
    var sel = window.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) return;
    var range = sel.getRangeAt(0), hit = [];
    words.forEach(function (w, i) { if (range.intersectsNode(w)) hit.push(i); });
    sel.removeAllRanges();
    if (hit.length) { select(hit[0], hit[hit.length - 1]); suppressClick = true; }
  });
  // A tap or click on a word: the first word of a span, then the last (touch has no drag).
  var suppressClick = false;
  caption.addEventListener("click", function (event) {
    if (suppressClick) { suppressClick = false; return; }
    var i = words.indexOf(event.target);
    if (i < 0) return;
    cursor = i;
    if (anchor !== null && anchor === focusIndex && i !== anchor) select(anchor, i);
    else select(i, i);
  });
  caption.addEventListener("focus", paint);
  caption.addEventListener("blur", paint);
  caption.addEventListener("keydown", function (event) {
    var step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
    if (step) {
      event.preventDefault();
      var next = Math.max(0, Math.min(words.length - 1, cursor + step));
      if (event.shiftKey) {
        if (anchor === null) anchor = cursor;
        cursor = next;
        select(anchor, cursor);
      } else {
        cursor = next;
        if (editing === null) { anchor = focusIndex = null; panel.hidden = true; }
        paint();
      }
    } else if (event.key === "Enter") {
      event.preventDefault();
      if (anchor === null) select(cursor, cursor);
      form.querySelector('input[name="mark-severity"]:checked').focus();
    } else if (event.key === "Escape") {
      clearSelection();
    }
  });

  // The score: a range and a number box kept equal (ESA's slider, shown after the spans).
  var range = document.getElementById("score-range"), box = document.getElementById("score");
  range.hidden = false;
  function valuetext() { range.setAttribute("aria-valuetext", box.value === "" ? "not set" : box.value + " of 100"); }
  range.addEventListener("input", function () { box.value = range.value; valuetext(); });
  box.addEventListener("input", function () { if (box.value !== "") range.value = box.value; valuetext(); });
  valuetext();

  // Countdown before Submit; the server refuses early answers anyway.
  var submit = document.getElementById("spans-submit"), countdown = document.getElementById("spans-countdown");
  var readyAt = Date.now() + (parseFloat(form.getAttribute("data-remaining")) || 0) * 1000;
  (function tick() {
    var left = (readyAt - Date.now()) / 1000;
    if (left <= 0) { submit.disabled = false; if (countdown.textContent) countdown.textContent = "You can submit now."; return; }
    submit.disabled = true;
    countdown.textContent = "Read the caption: you can submit in " + Math.ceil(left) + " s.";
    setTimeout(tick, Math.min(250, left * 1000));
  })();
  // Marks from JSON (a refused submission's, or the draft's): checked, then listed.
  function load(raw) {
    marks = [];
    try {
      JSON.parse(raw || "[]").forEach(function (m) {
        if (m && !m.omission && Number.isInteger(m.start) && Number.isInteger(m.end) && m.start < m.end && m.end <= chars.length) {
          marks.push({ start: m.start, end: m.end, text: textOf(m.start, m.end), severity: String(m.severity || "minor"), category: String(m.category || ""), note: String(m.note || "") });
        }
      });
    } catch (e) { marks = []; }
    render();
  }
  load(form.getAttribute("data-marks"));
  // The shared draft (static/capeval/drafts.js) put the fields back: list its marks, move
  // the slider to its score.
  form.addEventListener("capeval:draft-restored", function () {
    clearSelection();
    load(json.value);
    if (box.value !== "") range.value = box.value;
    valuetext();
  });
})();
