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
    localTimes(rows);
    count.textContent = response.headers.get("X-Inbox-Heading") || (n + " pending");
    document.title = "(" + n + ") " + table.dataset.title + " · Interlock";
  }
  window.setInterval(() => refresh().catch(() => {}), 2000);
}

// Generated forms: JSON areas must parse; show each field's problem next to it.
function validateForm(form) {
  form.querySelectorAll("textarea[data-nonblank]").forEach((area) => {
    area.addEventListener("input", () => {
      area.setCustomValidity(area.value.trim() ? "" : "Give a reason: it cannot be only spaces.");
    });
  });
  watchFields(form, form);
  wireArrays(form, form);
}

function watchFields(form, root) {
  function show(field) {
    const slot = form.querySelector('.field-error[data-for="' + field.id + '"]');
    if (slot) slot.textContent = field.validationMessage;
    field.setAttribute("aria-invalid", field.validity.valid ? "false" : "true");
  }
  root.querySelectorAll("textarea[data-json]").forEach((area) => {
    area.addEventListener("input", () => {
      try { if (area.value.trim() || area.required) JSON.parse(area.value); area.setCustomValidity(""); }
      catch (e) { area.setCustomValidity("Not valid JSON: " + e.message); }
    });
  });
  root.querySelectorAll("input, select, textarea").forEach((field) => {
    field.addEventListener("invalid", () => show(field));
    field.addEventListener("input", () => show(field));
  });
}

// Arrays: Add and Remove buttons; without this file a spare blank row stands in for Add.
function wireArrays(form, root) {
  root.querySelectorAll("fieldset.array:not([data-wired])").forEach((set) => {
    set.dataset.wired = "1";
    const list = set.querySelector(":scope > ol.rows");
    const template = set.querySelector(":scope > template");
    list.querySelectorAll(":scope > li[data-spare]").forEach((li) => li.remove());
    set.querySelectorAll(":scope > [data-no-script]").forEach((e) => { e.hidden = true; });
    const add = set.querySelector(":scope > button[data-add]");
    add.hidden = false;
    add.addEventListener("click", () => {
      const i = Number(set.dataset.next);
      set.dataset.next = String(i + 1);
      list.insertAdjacentHTML("beforeend", template.innerHTML
        .replaceAll("__i__", String(i)).replaceAll("__n__", String(i + 1)));
      const row = list.lastElementChild;
      watchFields(form, row);
      wireArrays(form, row);
      wireRemove(row, add);
      const first = row.querySelector("input, select, textarea");
      if (first) first.focus();
    });
    wireRemove(list, add);
  });
}

function wireRemove(root, add) {
  root.querySelectorAll("button[data-remove]:not([data-wired])").forEach((button) => {
    button.dataset.wired = "1";
    button.hidden = false;
    button.addEventListener("click", () => { button.closest("li.row").remove(); add.focus(); });
  });
}

// An open interrupt page: say so when it is decided, voted on or edited elsewhere.
function watchInterrupt(slot) {
  let timer = null;
  function tell(text) {
    const notice = document.createElement("p");
    notice.id = "live-notice";
    notice.className = "notice warn";
    notice.setAttribute("role", "alert");
    notice.textContent = text + " Nothing you typed here was sent. ";
    const link = document.createElement("a");
    link.href = location.pathname;
    link.textContent = "Show what happened";
    notice.appendChild(link);
    slot.replaceChildren(notice);
  }
  async function check() {
    if (document.hidden) return;
    const response = await fetch(slot.dataset.watch, {
      headers: { "x-console-fetch": "1" }, credentials: "same-origin" });
    if (!response.ok) return;
    const now = await response.json();
    if (!now.pending) {
      tell("Decided elsewhere: " + (now.decided || "no longer pending") + ".");
      document.querySelectorAll("form.decide").forEach((form) => {
        form.querySelectorAll("button, input, select, textarea").forEach((e) => { e.disabled = true; });
      });
    } else if (now.input_sha256 !== slot.dataset.sha) {
      tell("Someone changed the input meanwhile: review it again before you decide.");
    } else if (String(now.votes) !== slot.dataset.votes) {
      tell("Someone voted meanwhile.");
    } else {
      return;
    }
    window.clearInterval(timer);
  }
  timer = window.setInterval(() => check().catch(() => {}), 2000);
}

// Times in the viewer's zone, named ("2026-12-02 23:05:00 GMT+9"); the UTC time on hover.
function localTimes(root) {
  root.querySelectorAll("time[datetime]:not(.left)").forEach((t) => {
    const d = new Date(t.getAttribute("datetime"));
    if (Number.isNaN(d.getTime())) return;
    if (!t.title) t.title = t.textContent.trim();
    t.textContent = stamp(d);
  });
}

function stamp(d) {
  const parts = {};
  new Intl.DateTimeFormat("en-US", { year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
    timeZoneName: "short" }).formatToParts(d).forEach((p) => { parts[p.type] = p.value; });
  return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":"
    + parts.minute + ":" + parts.second + " " + parts.timeZoneName;
}

// Filters name the browser's zone, so a date typed there means that zone's time.
function browserZone() {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  document.querySelectorAll("form input[name=tz]").forEach((input) => {
    if (!input.value) input.value = zone;
    const note = input.form.querySelector("[data-zone-note]");
    if (note) note.textContent = "times in " + input.value;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  browserZone();
  const inbox = document.querySelector("table[data-poll]");
  if (inbox) pollInbox(inbox);
  const watched = document.querySelector("#notice-slot[data-watch]");
  if (watched) watchInterrupt(watched);
  document.querySelectorAll("form[data-validate]").forEach(validateForm);
  document.querySelectorAll("form[data-confirm]").forEach(confirmFirst);
  focusOutcome();
});

// A vote that decides, and a fork, are asked once more: the form says what happens.
function confirmFirst(form) {
  form.addEventListener("submit", (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
}

// After a refused submit, keyboard and screen-reader users land on what needs them:
// the first field the server refused, else the page's notice.
function focusOutcome() {
  const target = document.querySelector('form [aria-invalid="true"]') || document.getElementById("notice")
    || document.querySelector("[data-focus]");
  if (target) target.focus();
}
