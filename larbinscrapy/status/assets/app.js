// larbinscrapy status page: polls the API with the token, draws the charts on <canvas>.
// Hand-written, no dependencies. The token comes from #token=... (never sent to the server
// in the URL) or ?token=..., and travels only in the Authorization header.
"use strict";
(function () {
  const params = new URLSearchParams(location.hash.slice(1));
  const query = new URLSearchParams(location.search);
  const token = params.get("token") || query.get("token") || "";
  const HOUR = 3600;
  const series = { t: [], pages_per_s: [], items_per_s: [], bytes_per_s: [] };
  let lastT = 0;
  const $ = (id) => document.getElementById(id);

  function api(path, body) {
    const init = { headers: { Authorization: "Bearer " + token }, cache: "no-store" };
    if (body !== undefined) {
      init.method = "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then((r) => {
      if (r.status === 401) {
        const e = new Error(token ? "this token is not the crawl's: open the URL from the crawl log"
          : "no token: open the URL the crawl logged (\"Status page: …/#token=…\")");
        e.badge = token ? "wrong token" : "no token";
        throw e;
      }
      if (!r.ok) return r.json().then((j) => { throw new Error(j.error || r.statusText); });
      return r.json();
    });
  }

  function human(n, unit) {
    if (n === null || n === undefined) return "–";
    if (typeof n !== "number") return String(n);
    const k = unit === "B" ? 1024 : 1000;
    const units = unit === "B" ? ["B", "KiB", "MiB", "GiB", "TiB"] : ["", "k", "M", "G", "T"];
    let i = 0;
    while (Math.abs(n) >= k && i < units.length - 1) { n /= k; i++; }
    const digits = i === 0 && Number.isInteger(n) ? 0 : (Math.abs(n) < 10 ? 2 : 1);
    return n.toFixed(digits) + (units[i] ? " " + units[i] : "");
  }

  function duration(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + (s % 60) + "s";
  }

  function table(id, rows) {
    const el = $(id);
    el.textContent = "";
    if (!rows.length) {
      const td = el.insertRow().insertCell();
      td.textContent = "none"; td.className = "none"; td.colSpan = 2;
      return;
    }
    for (const [k, v] of rows) {
      const tr = el.insertRow();
      tr.insertCell().textContent = String(k).replace(/_/g, " ");  // every figure named in words
      tr.insertCell().textContent = typeof v === "number" ? human(v) : v;
    }
  }

  const entries = (obj) => Object.entries(obj || {});

  function draw(id, values, color, unit) {
    const canvas = $(id);
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 420, h = canvas.clientHeight || 150;
    canvas.width = w * ratio; canvas.height = h * ratio;
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 56, bottom = 18, top = 6, right = 6;
    const now = series.t.length ? series.t[series.t.length - 1] : Date.now() / 1000;
    const t0 = now - Math.min(HOUR, Math.max(60, now - (series.t[0] || now)));
    let max = 0;
    for (const v of values) max = Math.max(max, v);
    max = max > 0 ? niceCeil(max) : 1;
    g.font = "11px system-ui, sans-serif"; g.fillStyle = "#667085"; g.strokeStyle = "#e5e7eb";
    g.lineWidth = 1; g.textAlign = "right"; g.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const y = top + (h - top - bottom) * (1 - i / 4);
      g.beginPath(); g.moveTo(left, y); g.lineTo(w - right, y); g.stroke();
      g.fillText(human(max * i / 4, unit), left - 4, y);
    }
    g.textAlign = "center"; g.textBaseline = "top";
    const span = now - t0;
    for (let i = 0; i <= 4; i++) {
      const x = left + (w - left - right) * i / 4;
      const ago = Math.round(span * (1 - i / 4));
      g.textAlign = i === 4 ? "right" : "center";  // "now" must not run off the right edge
      g.fillText(ago ? "-" + (ago >= 120 ? Math.round(ago / 60) + "m" : ago + "s") : "now", x, h - bottom + 4);
    }
    const xs = (t) => left + (w - left - right) * (t - t0) / (span || 1);
    const ys = (v) => top + (h - top - bottom) * (1 - v / max);
    let points = 0;
    g.beginPath();
    for (let i = 0; i < values.length; i++) {
      if (series.t[i] < t0) continue;
      const x = xs(series.t[i]), y = ys(values[i]);
      if (points === 0) g.moveTo(x, y); else g.lineTo(x, y);
      points++;
    }
    g.strokeStyle = color; g.lineWidth = 1.6; g.stroke();
    if (points > 1) {
      g.lineTo(xs(now), ys(0)); g.lineTo(xs(series.t.find((t) => t >= t0)), ys(0)); g.closePath();
      g.globalAlpha = 0.12; g.fillStyle = color; g.fill(); g.globalAlpha = 1;
    }
    canvas.dataset.points = String(points);
  }

  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function charts() {
    draw("chart-pages", series.pages_per_s, "#2563eb", "");
    draw("chart-items", series.items_per_s, "#16a34a", "");
    draw("chart-bytes", series.bytes_per_s, "#9333ea", "B");
  }

  function render(s) {
    $("worker").textContent = "worker " + s.worker;
    const state = s.stopping ? "stopping" : s.paused ? "paused" : "running";
    $("state").textContent = state; $("state").className = "badge " + state;
    $("pause").disabled = s.paused || s.stopping;
    $("resume").disabled = !s.paused || s.stopping;
    $("stop").disabled = s.stopping;
    // A distributed crawl (all_workers not null): the buttons above are this worker's only;
    // "all workers" asks every worker of the crawl, through Redis, from this page.
    const shared = s.all_workers !== null && s.all_workers !== undefined;
    $("controls-all").hidden = !shared;
    $("scope-one").hidden = !shared;
    $("pause-all").disabled = $("resume-all").disabled = $("stop-all").disabled = s.stopping;
    $("all-state").hidden = !shared;
    if (shared) {
      const asked = { pause: "paused", resume: "resumed", stop: "stopped" }[s.all_workers];
      $("all-state").textContent = "Pause, Resume and Stop act on this worker only; "
        + "the \u201call workers\u201d buttons on every worker of the crawl"
        + (asked ? " (last asked of all workers: " + asked + ")" : "") + ".";
    }
    const cards = [
      ["pages", human(s.pages)], ["items", human(s.items)], ["downloaded", human(s.bytes, "B")],
      ["queued", human(s.queued)], ["pages/s", s.rates.pages_per_s.toFixed(1)],
      ["items/s", s.rates.items_per_s.toFixed(1)], ["bytes/s", human(s.rates.bytes_per_s, "B")],
      ["fetched/known", s.pages + s.queued ? (100 * s.pages / (s.pages + s.queued)).toFixed(1) + " %" : "–"],
      ["uptime", duration(s.uptime_s)],
    ];
    const box = $("numbers"); box.textContent = "";
    for (const [label, value] of cards) {
      const d = document.createElement("div"), b = document.createElement("b"), sm = document.createElement("small");
      b.textContent = value; sm.textContent = label; d.append(b, sm); box.append(d);
    }
    $("now-pages").textContent = s.rates.pages_per_s.toFixed(1);
    $("now-items").textContent = s.rates.items_per_s.toFixed(1);
    $("now-bytes").textContent = human(s.rates.bytes_per_s, "B");
    const f = s.frontier || {};
    const frontier = [["queued (total)", s.queued]];
    for (const [k, v] of entries(f.fifos)) frontier.push(["fifo " + k, v]);
    if (f.in_memory !== undefined) frontier.push(["in memory", f.in_memory]);
    for (const [k, v] of entries(f.shared)) frontier.push(["shared " + k, v]);
    table("t-frontier", frontier);
    table("t-ips", entries(s.sites).map(([k, v]) => ["sites " + k, v])
      .concat(entries(s.ips).map(([k, v]) => ["IPs " + k, v])));
    const pct = (v) => (v === null || v === undefined) ? "–" : (100 * v).toPrecision(3) + " %";
    table("t-dns", [["DNS lookups", s.dns.lookups], ["DNS failed", s.dns.failed],
      ["DNS cached", s.dns.cached === null ? "–" : s.dns.cached],
      ["seen-set fill", pct(s.seen.fill_ratio)], ["seen-set FP estimate", pct(s.seen.estimated_fp_rate)],
      ["seen (filtered)", s.seen.filtered]]);
    table("t-filtered", entries(s.filtered));
    table("t-dropped", entries(s.dropped));
    table("t-errors", entries(s.errors));
    table("t-codes", entries(s.status_codes));
    table("t-hosts", s.busiest_hosts);
    const revisits = entries(s.revisits);  // empty for a one-pass crawl: the box stays hidden
    $("revisits-box").hidden = !revisits.length;
    if (revisits.length) table("t-revisits", revisits);
  }

  function poll() {
    Promise.all([api("/api/status"), api("/api/history?since=" + lastT)]).then(([s, h]) => {
      $("error").hidden = true;
      for (let i = 0; i < h.t.length; i++) {
        for (const k of Object.keys(series)) series[k].push(h[k][i]);
      }
      if (h.t.length) lastT = h.t[h.t.length - 1];
      while (series.t.length && series.t[0] < lastT - HOUR) {
        for (const k of Object.keys(series)) series[k].shift();
      }
      render(s); charts();
    }).catch((e) => {
      $("error").textContent = e.message; $("error").hidden = false;
      const badge = e.badge || "offline";  // offline: the crawl did not answer at all
      $("state").textContent = badge; $("state").className = "badge " + (e.badge ? "notoken" : "offline");
    });
  }

  const STOP = {
    "stop": "Stop this worker? Its leased URLs go back to the shared queue (distributed), or "
      + "the same command resumes it with JOBDIR (without JOBDIR the queue is lost).",
    "stop-all": "Stop every worker of the crawl? The queue stays in Redis: start the workers "
      + "again with the same REDIS_URL to go on.",
  };
  function control(action) {
    if (STOP[action] && !confirm(STOP[action])) return;
    api("/api/" + action, {}).then(poll).catch((e) => { $("error").textContent = e.message; $("error").hidden = false; });
  }
  for (const action of ["pause", "resume", "stop", "pause-all", "resume-all", "stop-all"]) {
    $(action).addEventListener("click", () => control(action));
  }
  $("add-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const urls = $("add-urls").value.split(/\s+/).filter(Boolean);
    const body = { urls: urls, priority: $("add-priority").checked };
    if ($("add-depth").value !== "") body.depth = parseInt($("add-depth").value, 10);
    api("/api/urls", body).then((r) => {
      let text = `queued ${r.queued}, already seen ${r.seen}, refused ${r.refused}`;
      for (const x of r.refusals) text += `\n  ${x.url}: ${x.reason}`;
      $("add-result").textContent = text;
      if (r.queued) $("add-urls").value = "";
      poll();
    }).catch((e) => { $("add-result").textContent = e.message; });
  });
  window.addEventListener("resize", charts);
  poll();
  setInterval(poll, 1000);
})();
