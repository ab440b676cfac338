"use strict";
// Pi's trace viewer. It draws each page from the server's /v1 JSON. Every string that
// comes from a run (model, tool or user text) goes into the page through `h` as a text
// node, never as markup.
(() => {
  const enc = encodeURIComponent;

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key === "className" ? "class" : key, String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  const link = (path, text) => h("a", { href: path }, text);
  const badge = (text, kind) => h("span", { class: `badge ${kind || text}` }, text);
  const int = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "");
  const ms = (n) => (typeof n === "number" ? n.toFixed(1) : "");
  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
  const oneLine = (text, n) => {
    const flat = String(text ?? "").replace(/\s+/g, " ").trim();
    return flat.length > n ? `${flat.slice(0, n)}…` : flat;
  };

  // Bidirectional marks, embeddings, overrides and isolates: in a value (arguments on an
  // approval card, a result) each could make it read in another order than it runs, so
  // each is shown as its JSON escape. Prose (a model's answer) keeps them.
  const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  function json(value) {
    const text = JSON.stringify(value, null, 2);
    if (text === undefined) return "";
    return text.replace(BIDI, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }

  function pretty(value) {
    if (typeof value === "string") {
      try {
        const parsed = JSON.parse(value);
        if (parsed && typeof parsed === "object") return json(parsed);
      } catch (_) { /* not JSON: shown as it is */ }
      return value;
    }
    return json(value);
  }

  function table(headers, rows, attrs) {  // rows: a list of <tr>, or a <tbody>
    return h("table", attrs || {},
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
      rows instanceof Node ? rows : h("tbody", {}, rows));
  }

  function section(title, ...body) {
    return h("section", {}, h("h2", {}, title), body);
  }

  function render(...nodes) {
    const app = document.getElementById("app");
    app.replaceChildren(...nodes.flat(Infinity).filter(Boolean));
  }

  function crumbs(...parts) {
    const nav = document.getElementById("crumbs");
    const items = [link("/", "Sessions"), ...parts.map(([text, path]) => (path ? link(path, text) : h("span", {}, text)))];
    nav.replaceChildren(...items.flatMap((x, i) => (i ? [" › ", x] : [x])));
  }

  function toLogin() {
    location.assign(`/login?next=${enc(location.pathname)}`);
  }

  async function failure(response) {
    let message = response.statusText;
    try {
      message = (await response.json()).error.message || message;
    } catch (_) { /* a body without our error shape */ }
    if (response.status === 401) toLogin();
    return new Error(`${response.status}: ${message}`);
  }

  async function api(path) {
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  // The session list --------------------------------------------------------------

  async function showSessions() {
    crumbs();
    const body = h("tbody", {});
    const more = h("button", { type: "button", hidden: true }, "Older sessions");
    let after = null;
    const load = async () => {
      const data = await api(`/v1/sessions?limit=50${after ? `&after=${enc(after)}` : ""}`);
      for (const s of data.sessions) {
        body.append(h("tr", {},
          h("td", {}, link(`/sessions/${enc(s.session_id)}`, s.session_id)),
          h("td", {}, badge(s.status)),
          h("td", { class: "num" }, int(s.message_count)),
          h("td", {}, when(s.created_at)),
          h("td", {}, when(s.updated_at))));
      }
      after = data.next;
      more.hidden = !after;
    };
    more.addEventListener("click", () => load().catch(showError));
    await load();
    const headers = ["Session", "Status", "Messages", "Created", "Updated"];
    render(h("h1", {}, "Sessions"),
      body.children.length ? table(headers, body, { id: "sessions" })
        : h("p", { class: "muted" }, "No sessions yet: a run through this server makes one."),
      more);
  }

  // A session ---------------------------------------------------------------------

  async function showSession(id) {
    const s = await api(`/v1/sessions/${enc(id)}`);
    crumbs([`Session ${id}`]);
    const runs = s.runs.slice().reverse().map((r) => h("tr", {},
      h("td", {}, link(`/runs/${enc(r.run_id)}`, r.run_id)),
      h("td", {}, r.kind),
      h("td", {}, badge(r.status)),
      h("td", {}, r.stop_reason || ""),
      h("td", {}, when(r.created_at)),
      h("td", {}, when(r.finished_at)),
      h("td", {}, oneLine(r.error || (typeof r.output === "string" ? r.output : JSON.stringify(r.output ?? "")), 100))));
    const pending = s.pending_approvals.map((p) => h("li", {},
      h("strong", {}, p.tool), " ", h("code", {}, p.call_id), " waits for a decision in ",
      link(`/runs/${enc(p.run_id)}`, p.run_id)));
    const messages = s.messages.map((m) => h("li", { class: `message ${m.role}` },
      h("span", { class: "role" }, m.role), " ",
      h("pre", {}, typeof m.content === "string" ? m.content : pretty(m.content))));
    render(
      h("h1", {}, "Session ", h("code", {}, id), " ", badge(s.status)),
      pending.length ? section("Waiting for approval", h("ul", { class: "pending" }, pending)) : null,
      section("Runs", table(["Run", "Kind", "Status", "Stop reason", "Created", "Finished", "Output"], runs, { id: "runs" })),
      h("details", { class: "messages" }, h("summary", {}, `Messages (${s.messages.length})`), h("ol", {}, messages)));
  }

  // A run -------------------------------------------------------------------------

  const METRICS = {
    text_tokens_before_first_tool_call: "Text tokens before the first tool call",
    time_to_first_tool_call_ms: "Time to the first tool call (ms)",
    mixed_text_tool_message_rate: "Messages mixing text and tool calls",
    tool_argument_truncation_count: "Truncated tool calls",
  };

  function card(label, value, name) {
    return h("div", { class: "card", "data-metric": name }, h("div", { class: "value" }, value), h("div", { class: "label" }, label));
  }

  function summary(t) {
    const totals = t.totals;
    const cards = [
      card("Input tokens", int(totals.input_tokens), "input_tokens"),
      card("Output tokens", int(totals.output_tokens), "output_tokens"),
      card("Time (ms)", ms(totals.ms), "ms"),
      card("Model calls", int(totals.model_calls), "model_calls"),
      card("Tool calls", int(totals.tool_calls), "tool_calls"),
      card("Tool errors", int(totals.tool_errors), "tool_errors"),
    ];
    const metrics = Object.entries(METRICS).map(([key, label]) => {
      const value = t.metrics ? t.metrics[key] : null;
      const shown = value === null || value === undefined ? "—" : key.endsWith("_rate") ? `${(value * 100).toFixed(0)} %` : key.endsWith("_ms") ? ms(value) : int(value);
      return card(label, shown, key);
    });
    return [h("div", { class: "cards", id: "totals" }, cards), h("h2", {}, "Preamble metrics"), h("div", { class: "cards", id: "metrics" }, metrics)];
  }

  function timelineTable(t) {
    const rows = t.rows.map((r, i) => {
      const what = r.call_id ? h("a", { href: `#call-${r.call_id}`, "data-call": r.call_id }, r.name) : r.name;
      const waits = ["awaiting_approval", "awaiting", "job", "transient"].includes(r.status);
      const bad = r.status && !waits && !["ok", "started", "done", "approved", "completed"].includes(r.status);
      return h("tr", { class: `phase-${r.phase}${bad ? " bad" : ""}${waits ? " waits" : ""}`, "data-kind": r.kind },
        h("td", { class: "num" }, i + 1),
        h("td", { class: "num" }, r.step),
        h("td", {}, badge(r.phase, "phase")),
        h("td", {}, r.kind === r.name ? null : [h("span", { class: "kind" }, r.kind.replace(/_/g, " ")), " "], what),
        h("td", {}, r.status),
        h("td", { class: "num" }, int(r.input_tokens)),
        h("td", { class: "num" }, int(r.output_tokens)),
        h("td", { class: "num" }, int(r.cum_input_tokens)),
        h("td", { class: "num" }, int(r.cum_output_tokens)),
        h("td", { class: "num" }, ms(r.ms)),
        h("td", { class: "num" }, ms(r.cum_ms)),
        h("td", {}, r.stop),
        h("td", { class: "detail" }, r.detail));
    });
    const headers = ["#", "Step", "Phase", "Model call or tool", "Status", "In", "Out", "Σ in", "Σ out", "ms", "Σ ms", "Stop", "Detail"];
    return rows.length ? table(headers, rows, { id: "timeline" }) : h("p", { class: "muted", id: "timeline-empty" }, "No steps written yet.");
  }

  function toolCall(c) {
    const status = c.is_error ? (c.error_kind || c.status) : c.status;
    return h("details", { class: `call${c.is_error ? " bad" : ""}`, id: `call-${c.call_id}`, "data-key": `call:${c.call_id}` },
      h("summary", {}, h("strong", {}, c.name), " ", h("code", {}, c.call_id), " ", badge(status, c.is_error ? "error" : status),
        ` step ${c.step}`, c.duration_ms !== null && c.duration_ms !== undefined ? ` · ${ms(c.duration_ms)} ms` : ""),
      h("h4", {}, "Arguments", c.truncated ? " (cut off by the output limit: never run)" : ""),
      h("pre", {}, c.arguments !== null && c.arguments !== undefined ? pretty(c.arguments) : c.raw),
      h("h4", {}, "Result"),
      c.result !== null && c.result !== undefined ? h("pre", {}, pretty(c.result)) : h("p", { class: "muted" }, "No result in this run."));
  }

  function contextReport(context) {
    const tokens = context.tokens || {};
    const layers = Object.entries(tokens).map(([layer, n]) => h("tr", {}, h("td", {}, layer), h("td", { class: "num" }, int(n))));
    const rest = Object.entries(context).filter(([k, v]) => k !== "tokens" && !(Array.isArray(v) && !v.length));
    return [
      layers.length ? table(["Layer", "Tokens"], layers, { class: "compact" }) : null,
      h("dl", {}, rest.map(([k, v]) => [h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, typeof v === "object" ? h("pre", {}, pretty(v)) : String(v))])),
    ];
  }

  function modelCall(m, i) {
    const usage = m.usage || {};
    const prompt = m.prompt || {};
    return h("details", { class: "model", "data-key": `model:${i}` },
      h("summary", {}, `Step ${m.step} · ${m.role} · prompt ${prompt.name || "?"} v${prompt.version ?? "?"} · ${m.tools.length} tool(s) offered`,
        usage.input_tokens !== undefined ? ` · in ${int(usage.input_tokens)} out ${int(usage.output_tokens)}` : "",
        m.finish_reason ? ` · ${m.finish_reason}` : ""),
      h("dl", {},
        h("dt", {}, "Prompt"), h("dd", {}, `${prompt.name || "?"} version ${prompt.version ?? "?"}`, prompt.sha256 ? h("code", {}, ` ${String(prompt.sha256).slice(0, 12)}`) : ""),
        h("dt", {}, "Tools offered"), h("dd", {}, m.tools.length ? m.tools.join(", ") : "none"),
        h("dt", {}, "Tool choice"), h("dd", {}, m.tool_choice ?? ""),
        h("dt", {}, "Messages sent"), h("dd", {}, int(m.message_count)),
        h("dt", {}, "Input tokens (counted)"), h("dd", {}, int(m.counted_input_tokens))),
      h("h4", {}, "Context report"), contextReport(m.context || {}),
      m.summary ? [h("h4", {}, "Summary of dropped turns"), h("pre", {}, m.summary)] : null,
      m.text ? [h("h4", {}, "Response text"), h("pre", {}, m.text)] : null,
      m.tool_calls.length ? [h("h4", {}, "Tool calls asked for"), h("p", {}, m.tool_calls.join(", "))] : null,
      m.errors.length ? [h("h4", {}, "Errors"), h("pre", { class: "error" }, m.errors.join("\n"))] : null);
  }

  function plans(t) {
    if (!t.plans.length) return null;
    const verdict = (s) => (s.done === true ? badge("done") : s.replan ? badge("replan", "error") : s.outcome ? badge("not done", "error") : badge(s.started ? "started" : "planned", "muted"));
    return section("Plans",
      t.plans.map((p) => h("div", { class: "plan" },
        h("h3", {}, p.revision ? `Revision ${p.revision}` : "Plan", p.fallback ? " (fallback: the planner missed its contract)" : ""),
        h("ol", {}, p.steps.map((s) => h("li", {}, verdict(s), " ", s.goal, " ", h("span", { class: "muted" }, `[${s.tools.join(", ")}]`),
          s.reason ? h("div", { class: "reason" }, s.reason) : null))))),
      t.replans.length ? [h("h3", {}, "Replans"), h("ul", {}, t.replans.map((r) => h("li", {}, `After step ${r.number} (replan ${r.replans} of ${r.max_replans}): `, r.reason)))] : null);
  }

  function approvals(t) {
    if (!t.pending_approvals.length) return null;
    return section("Waiting for approval", t.pending_approvals.map((p) => {
      const error = h("p", { class: "error", role: "alert", hidden: true });
      const reason = h("textarea", { name: "reason", rows: 2, placeholder: "Why? The model reads it." });
      const box = h("div", { class: "approval", "data-call": p.call_id });
      const send = (body) => decide(t, p, body, box, error);
      const rejecting = h("div", { class: "reject", hidden: true },
        h("label", {}, "Reason ", reason),
        h("button", { type: "button", class: "danger send-reject", onclick: () => {
          if (!reason.value.trim()) {
            error.textContent = "A rejection needs a reason: the model reads it.";
            error.hidden = false;
            return;
          }
          send({ decision: "reject", reason: reason.value, fingerprint: p.fingerprint });
        } }, "Send rejection"));
      box.append(
        h("h3", {}, p.tool, " ", h("code", {}, p.call_id)),
        h("pre", {}, pretty(p.arguments)),
        h("p", { class: "muted" }, "Fingerprint ", h("code", {}, p.fingerprint.slice(0, 16))),
        h("div", { class: "actions" },
          h("button", { type: "button", class: "approve", onclick: () => send({ decision: "approve", fingerprint: p.fingerprint }) }, "Approve"),
          h("button", { type: "button", class: "reject-open", onclick: () => { rejecting.hidden = false; reason.focus(); } }, "Reject…")),
        rejecting, error);
      return box;
    }));
  }

  async function decide(t, p, body, box, error) {
    const buttons = box.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    error.hidden = true;
    try {
      const response = await fetch(`/v1/sessions/${enc(t.session_id)}/approvals/${enc(p.call_id)}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body),
      });
      if (!response.ok) throw await failure(response);
      const runId = await startedRun(response);
      location.assign(runId ? `/runs/${enc(runId)}` : location.pathname);
    } catch (e) {
      error.textContent = String(e.message || e);
      error.hidden = false;
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  // The run a decision started, from its AG-UI stream's RUN_STARTED. Leaving the stream
  // cancels nothing: the run's page follows it from its start.
  async function startedRun(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return null;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, cut).trim();
          buffer = buffer.slice(cut + 1);
          if (!line.startsWith("data:")) continue;
          let event;
          try { event = JSON.parse(line.slice(5)); } catch (_) { continue; }
          if (event.type === "RUN_STARTED") return event.runId;
          if (event.type === "RUN_ERROR") throw new Error(event.message || "the run failed");
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  function runPage(t) {
    const finished = t.finished || {};
    const links = [
      h("span", {}, "Session ", link(`/sessions/${enc(t.session_id)}`, t.session_id)),
      t.parent_run_id ? h("span", {}, "Continues ", link(`/runs/${enc(t.parent_run_id)}`, t.parent_run_id)) : null,
      t.continued_by ? h("span", { id: "continued-by" }, "Continued by ", link(`/runs/${enc(t.continued_by)}`, t.continued_by)) : null,
      h("a", { href: `/v1/runs/${enc(t.run_id)}/trace` }, "Raw trace (JSON)"),
    ];
    const outcome = t.finished ? section("Outcome",
      finished.error ? h("pre", { class: ["failed", "stopped"].includes(t.status) ? "error" : "" }, finished.error) : null,
      finished.output !== null && finished.output !== undefined ? h("pre", { id: "output" }, pretty(finished.output)) : h("p", { class: "muted" }, "No output.")) : null;
    const calls = t.tool_calls;
    return [
      h("h1", {}, "Run ", h("code", {}, t.run_id), " ", h("span", { id: "status" }, badge(t.status)), " ",
        t.stop_reason ? h("span", { id: "stop-reason", class: "stop" }, t.stop_reason) : null,
        t.live ? badge("live") : null),
      h("p", { class: "links" }, links.filter(Boolean).flatMap((x, i) => (i ? [" · ", x] : [x]))),
      // a file path in a model spec (`scripted:/…/script.json`) is the server's business
      t.run.model ? h("p", { class: "muted", title: t.run.model }, `${t.kind} run · model ${String(t.run.model).replace(/\/(?:[^/\s]+\/)+/g, "…/")}`) : null,
      t.trace ? null : h("p", { class: "muted" }, "This server has no trace of this run (it ran elsewhere, or has not begun)."),
      approvals(t),
      summary(t),
      section("Timeline", timelineTable(t)),
      outcome,
      plans(t),
      calls.length ? section(`Tool calls (${calls.length}, errors first)`, h("div", { id: "calls" }, calls.map(toolCall))) : null,
      t.model_calls.length ? section(`Model requests (${t.model_calls.length})`, h("div", { id: "model-calls" }, t.model_calls.map(modelCall))) : null,
    ];
  }

  async function drawRun(view) {
    const t = await api(`/v1/runs/${enc(view.id)}/timeline`);
    const open = new Set([...document.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key));
    crumbs([`Session ${t.session_id}`, `/sessions/${enc(t.session_id)}`], [`Run ${t.run_id}`]);
    render(runPage(t));
    document.querySelectorAll("details[data-key]").forEach((d) => { if (open.has(d.dataset.key)) d.open = true; });
    follow(view, t);
  }

  // A running run is redrawn as it goes: on each of its AG-UI events while this server
  // runs it, else (a worker runs it) every few seconds until it ends.
  function follow(view, t) {
    if (!["running", "queued"].includes(t.status)) {
      if (view.source) view.source.close();
      return;
    }
    if (t.live && !view.source && !view.streamed) {
      const source = new EventSource(`/v1/runs/${enc(view.id)}/events`);
      view.source = source;
      const end = () => { source.close(); view.source = null; view.streamed = true; refresh(view); };
      source.onmessage = (message) => {
        let type = null;
        try { type = JSON.parse(message.data).type; } catch (_) { /* a keep-alive */ }
        if (type === "RUN_FINISHED" || type === "RUN_ERROR") end();
        else refresh(view);
      };
      source.onerror = end;
    } else if (!view.source) {
      clearTimeout(view.timer);
      view.timer = setTimeout(() => refresh(view), 2000);
    }
  }

  function refresh(view) {  // one redraw at a time, and one more if asked meanwhile
    if (view.busy) { view.again = true; return; }
    view.busy = true;
    drawRun(view).catch(showError).finally(() => {
      view.busy = false;
      if (view.again) { view.again = false; refresh(view); }
    });
  }

  // Pages -------------------------------------------------------------------------

  function showError(e) {
    render(h("p", { class: "error", role: "alert" }, String(e.message || e)));
  }

  function loginForm(form) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const error = document.getElementById("login-error");
      const response = await fetch("/login", { method: "POST", body: new URLSearchParams(new FormData(form)) });
      if (!response.ok) {
        error.textContent = response.status === 401 ? "That token is not valid." : `The server answered ${response.status}.`;
        error.hidden = false;
        return;
      }
      location.assign(form.elements.namedItem("next").value || "/");
    });
  }

  function start() {
    const form = document.getElementById("login");
    if (form) return loginForm(form);
    const path = location.pathname;
    let m;
    let page;
    if (path === "/") page = showSessions();
    else if ((m = path.match(/^\/sessions\/([^/]+)$/))) page = showSession(decodeURIComponent(m[1]));
    else if ((m = path.match(/^\/runs\/([^/]+)$/))) page = drawRun({ id: decodeURIComponent(m[1]) });
    else page = Promise.reject(new Error("No such page."));
    page.catch(showError);
  }

  document.addEventListener("DOMContentLoaded", start);
})();
