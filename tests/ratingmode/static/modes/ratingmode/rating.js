/* Test-rating item page (tests/ratingmode/): keys 1-5 choose a rating from anywhere on the
   page, and a live note says the chosen rating in words. The form works without it. */
(function () {
  "use strict";
  var field = document.getElementById("rating");
  var said = document.getElementById("rating-said");
  if (!field || !said) return;
  var words = { "1": "poor", "2": "fair", "3": "good", "4": "very good", "5": "excellent" };

  function say() {
    var word = words[field.value];
    said.textContent = word ? "Your rating: " + field.value + " of 5 (" + word + ")." : "";
  }

  field.addEventListener("input", say);
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    // In a field (the rating's own included) the digits are typed there, not shortcuts.
    if (/^(INPUT|TEXTAREA|SELECT)$/.test(event.target.tagName) || !words[event.key]) return;
    field.value = event.key;
    field.focus();
    // Set by a key, not typed: the shared draft (drafts.js) saves on input and change.
    field.dispatchEvent(new Event("input", { bubbles: true }));
    field.dispatchEvent(new Event("change", { bubbles: true }));
    event.preventDefault();
  });
  say();
})();
