// Progressive enhancement only: every page works without this file.
"use strict";

// The inbox: swap in fresh rows every few seconds, with the count in the title.
function pollInbox(table) {
  const rows = document.getElementById("inbox-rows");
  const count = document.getElementById("inbox-count");
  const base = document.body.dataset.base;
  async function refresh() {
    if (document.hidden) return;
    const response = await fetch(table.dataset.poll, {
      headers: { "x-console-fetch": "1" }, credentials: "same-origin" });
    if (response.status === 401) {
      window.location.assign(base + "/sign-in?next=" + encodeURIComponent(location.pathname + location.search));
      return;
    }
    if (!response.ok) return;
    const n = response.headers.get("X-Inbox-Count") || "0";
    rows.innerHTML = await response.text();
    count.textContent = n + " pending";
    document.title = "(" + n + ") " + table.dataset.title + " · Interlock";
  }
  window.setInterval(() => refresh().catch(() => {}), 2000);
}

// Generated forms: JSON areas must parse; show each field's problem next to it.
function validateForm(form) {
  function show(field) {
    const slot = form.querySelector('.field-error[data-for="' + field.id + '"]');
    if (slot) slot.textContent = field.validationMessage;
    field.setAttribute("aria-invalid", field.validity.valid ? "false" : "true");
  }
  form.querySelectorAll("textarea[data-json]").forEach((area) => {
    area.addEventListener("input", () => {
      try { JSON.parse(area.value); area.setCustomValidity(""); }
      catch (e) { area.setCustomValidity("Not valid JSON: " + e.message); }
    });
  });
  form.querySelectorAll("textarea[data-nonblank]").forEach((area) => {
    area.addEventListener("input", () => {
      area.setCustomValidity(area.value.trim() ? "" : "Give a reason: it cannot be only spaces.");
    });
  });
  form.querySelectorAll("input, select, textarea").forEach((field) => {
    field.addEventListener("invalid", () => show(field));
    field.addEventListener("input", () => show(field));
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const inbox = document.querySelector("table[data-poll]");
  if (inbox) pollInbox(inbox);
  document.querySelectorAll("form[data-validate]").forEach(validateForm);
  focusOutcome();
});

// After a refused submit, keyboard and screen-reader users land on what needs them:
// the first field the server refused, else the page's notice.
function focusOutcome() {
  const target = document.querySelector('form [aria-invalid="true"]') || document.getElementById("notice");
  if (target) target.focus();
}
