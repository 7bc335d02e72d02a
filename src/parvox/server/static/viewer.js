// parvox slice viewer: no build step, no dependencies. Geometry is kept in physical space
// (mm, components x, y, z) and converted to the API's voxel-index (z, y, x) vectors.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const deg = Math.PI / 180;
  const MAX_INFLIGHT = 2;      // requests in flight at once
  const STALE_MS = 600;        // an older request still running after this is aborted

  let info = null, sp = [1, 1, 1], shape = [1, 1, 1];   // spacing, shape (z, y, x)
  let c0 = [0, 0, 0];          // volume centre, physical (x, y, z)
  let fitStep = 1, halfDiag = 100;
  const st = { tilt: 0, az: 0, offset: 0, pan: [0, 0], scale: 0, size: 512, zoom: 1, format: "auto",
    wl: null };               // window [lo, hi] chosen by the user; null: as stored / server default
  let wlRange = [0, 255];      // slider range of the level
  const overview = {};         // name -> {img, geom}
  let seq = 0, shownSeq = 0, dropped = 0, dirty = true, lastLatency = null, shownURL = "";
  const SETTLE_MS = 250;       // "auto": JPEG while the plane moves, lossless PNG once it rests
  let needFinal = true, settleAt = 0;
  const inflight = new Map();  // seq -> {ctl, t0}

  // ---- geometry ---------------------------------------------------------------------------
  function frame() {
    const t = st.tilt * deg, a = st.az * deg;
    const u = [Math.cos(a), Math.sin(a), 0];
    const v = [-Math.cos(t) * Math.sin(a), Math.cos(t) * Math.cos(a), Math.sin(t)];
    const n = [Math.sin(t) * Math.sin(a), -Math.sin(t) * Math.cos(a), Math.cos(t)];
    return { u, v, n };
  }
  const add = (p, q, s = 1) => p.map((x, i) => x + s * q[i]);
  const dot = (p, q) => p[0] * q[0] + p[1] * q[1] + p[2] * q[2];
  const physToVox = (p) => [p[2] / sp[0], p[1] / sp[1], p[0] / sp[2]];        // -> (z, y, x)
  const voxToPhys = (z) => [z[2] * sp[2], z[1] * sp[1], z[0] * sp[0]];        // (z,y,x) -> xyz
  const dirToVox = (d) => [d[2] / sp[0], d[1] / sp[1], d[0] / sp[2]];
  const pixelStep = () => fitStep * Math.pow(2, -st.scale);
  function centrePhys() {
    const { u, v, n } = frame();
    return add(add(add(c0, n, st.offset), u, st.pan[0]), v, st.pan[1]);
  }
  const fmt = (xs, d = 2) => xs.map((x) => x.toFixed(d)).join(", ");

  function sliceParams() {
    const { u, v } = frame();
    const step = pixelStep() / st.zoom;
    return {
      center: physToVox(centrePhys()), u: dirToVox(u), v: dirToVox(v),
      size: [st.size, st.size], step, zoom: st.zoom,
    };
  }
  // the format of a request: "auto" streams JPEG while moving and asks for PNG when still
  const movingFormat = () => (st.format === "auto" ? "jpeg" : st.format);
  const finalFormat = () => (st.format === "auto" ? "png" : st.format);
  function sliceURL(format = finalFormat()) {
    const p = sliceParams();
    const q = new URLSearchParams({
      center: fmt(p.center, 4).replace(/ /g, ""), u: fmt(p.u, 6).replace(/ /g, ""),
      v: fmt(p.v, 6).replace(/ /g, ""), size: p.size.join(","), step: p.step.toPrecision(6),
      zoom: String(p.zoom), format,
    });
    if (format === "jpeg") q.set("quality", "90");
    const win = st.wl || info.display_window;
    if (win) q.set("window", win.map((x) => x.toPrecision(6)).join(","));
    return "/api/slice?" + q.toString();
  }

  // ---- requests: at most MAX_INFLIGHT, newest wins, stale ones aborted ----------------------
  function pump() {
    if (dirty && info) {
      if (inflight.size >= MAX_INFLIGHT) {
        const oldest = Math.min(...inflight.keys());
        if (performance.now() - inflight.get(oldest).t0 > STALE_MS) {
          inflight.get(oldest).ctl.abort(); inflight.delete(oldest); dropped++;
        }
      }
      if (inflight.size < MAX_INFLIGHT) { dirty = false; fire(movingFormat()); }
    } else if (info && needFinal && inflight.size === 0 && performance.now() >= settleAt) {
      needFinal = false;
      if (shownURL !== sliceURL()) fire(finalFormat());
    }
    requestAnimationFrame(pump);
  }
  function fire(format) {
    const id = ++seq, ctl = new AbortController(), t0 = performance.now(), url = sliceURL(format);
    inflight.set(id, { ctl, t0 });
    fetch(url, { signal: ctl.signal, cache: "no-store" })
      .then(async (r) => {
        if (r.status === 503) {
          const wait = 1000 * (parseFloat(r.headers.get("Retry-After")) || 1);
          setTimeout(() => { dirty = true; }, wait);
          throw new Error("server busy, retrying");
        }
        if (!r.ok) {
          const j = await r.json().catch(() => ({ error: r.statusText }));
          throw new Error(`${r.status}: ${j.error}` + (j.parameter ? ` (parameter ${j.parameter})` : ""));
        }
        const blob = await r.blob();
        const level = r.headers.get("X-Parvox-Level");
        if (id < shownSeq) { dropped++; return; }   // a newer slice is already shown
        shownSeq = id;
        shownURL = url;
        lastLatency = performance.now() - t0;
        const img = $("slice"), old = img.src;
        img.src = URL.createObjectURL(blob);
        img.dataset.seq = String(id);
        if (old.startsWith("blob:")) setTimeout(() => URL.revokeObjectURL(old), 2000);
        $("error").hidden = true;
        $("hud-lat").textContent = `${lastLatency.toFixed(0)} ms · ${(blob.size / 1024).toFixed(0)} KiB · ${format.toUpperCase()}` +
          (level === null ? "" : ` · pyramid level ${level}`);
        $("slice").dataset.level = level === null ? "" : level;
      })
      .catch((e) => {
        if (e.name === "AbortError") return;
        $("error").textContent = e.message; $("error").hidden = false;
      })
      .finally(() => { inflight.delete(id); $("hud-drop").textContent = dropped ? `${dropped} stale dropped` : ""; });
  }

  // ---- UI state <-> controls ----------------------------------------------------------------
  function changed() {
    dirty = true; needFinal = true; settleAt = performance.now() + SETTLE_MS;
    syncControls(); drawOverviews();
  }
  function syncControls() {
    $("tilt").value = st.tilt; $("tilt-out").textContent = `${st.tilt.toFixed(1)}°`;
    $("az").value = st.az; $("az-out").textContent = `${st.az.toFixed(1)}°`;
    $("offset").value = st.offset; $("offset-out").textContent = `${st.offset.toFixed(1)} mm`;
    $("scale").value = st.scale;
    const mag = Math.min(...sp) / pixelStep();
    $("scale-out").textContent = `${pixelStep().toFixed(3)} mm/px (${mag.toFixed(2)}×)`;
    const p = sliceParams(), { u, v, n } = frame();
    $("r-center").textContent = fmt(p.center, 1);
    $("r-normal").textContent = fmt(physToVox(n).map((x, i) => x * sp[i]), 3);
    $("r-u").textContent = fmt([u[2], u[1], u[0]], 3);
    $("r-v").textContent = fmt([v[2], v[1], v[0]], 3);
    const win = st.wl || info.display_window || wlRange;
    $("level").value = (win[0] + win[1]) / 2; $("width").value = win[1] - win[0];
    $("level-out").textContent = ((win[0] + win[1]) / 2).toPrecision(4);
    $("width-out").textContent = st.wl || info.display_window ? (win[1] - win[0]).toPrecision(4) : "auto";
    $("r-step").textContent = `${pixelStep().toFixed(3)} mm · ${st.size}² · Z=${st.zoom}`;
    for (const b of document.querySelectorAll("[data-preset]")) b.classList.remove("active");
    edges(u, v);
  }
  // direction labels at the image edges (dominant axis of u and v) and a scale bar
  function axisLabel(d) {
    const names = ["x", "y", "z"], k = [0, 1, 2].reduce((a, b) => (Math.abs(d[b]) > Math.abs(d[a]) ? b : a));
    return (d[k] >= 0 ? "+" : "−") + names[k];
  }
  function edges(u, v) {
    $("e-right").textContent = axisLabel(u); $("e-left").textContent = axisLabel(u.map((x) => -x));
    $("e-bottom").textContent = axisLabel(v); $("e-top").textContent = axisLabel(v.map((x) => -x));
    const img = $("slice"), shown = Math.min(img.clientWidth, img.clientHeight) || st.size;
    const mmPerScreenPx = pixelStep() * st.size / shown;
    const nice = [1, 2, 5, 10, 20, 50, 100, 200, 500].find((L) => L / mmPerScreenPx >= 60) || 1000;
    $("scalebar").style.width = `${(nice / mmPerScreenPx).toFixed(0)}px`;
    $("scalebar").firstElementChild.textContent = `${nice} mm`;
  }
  const presets = {
    axial: { tilt: 0, az: 0 }, coronal: { tilt: 90, az: 0 }, sagittal: { tilt: 90, az: 90 },
    oblique: { tilt: 54.7, az: 45 },
  };
  function preset(name) {
    Object.assign(st, presets[name]); changed();
    document.querySelector(`[data-preset=${name}]`).classList.add("active");
  }
  function reset() { Object.assign(st, { tilt: 0, az: 0, offset: 0, pan: [0, 0], scale: 0, wl: null }); changed(); }
  const clamp = (x, lo, hi) => Math.max(lo, Math.min(hi, x));
  function move(mm) { st.offset = clamp(st.offset + mm, -halfDiag, halfDiag); changed(); }

  function bind() {
    $("tilt").addEventListener("input", (e) => { st.tilt = +e.target.value; changed(); });
    $("az").addEventListener("input", (e) => { st.az = +e.target.value; changed(); });
    $("offset").addEventListener("input", (e) => { st.offset = +e.target.value; changed(); });
    $("scale").addEventListener("input", (e) => { st.scale = +e.target.value; changed(); });
    $("size").addEventListener("change", (e) => { st.size = +e.target.value; fitStep = maxPhys() / st.size; changed(); });
    $("zoom").addEventListener("change", (e) => { st.zoom = +e.target.value; changed(); });
    $("format").addEventListener("change", (e) => { st.format = e.target.value; changed(); });
    $("pan-reset").addEventListener("click", () => { st.pan = [0, 0]; changed(); });
    const wl = () => { const L = +$("level").value, W = +$("width").value; st.wl = [L - W / 2, L + W / 2]; changed(); };
    $("level").addEventListener("input", wl); $("width").addEventListener("input", wl);
    $("wl-auto").addEventListener("click", () => { st.wl = null; changed(); });
    $("reset").addEventListener("click", reset);
    $("copy").addEventListener("click", copyCommand);
    for (const b of document.querySelectorAll("[data-preset]")) b.addEventListener("click", () => preset(b.dataset.preset));
    const vp = $("viewport");
    let drag = null;
    vp.addEventListener("pointerdown", (e) => { drag = [e.clientX, e.clientY]; vp.classList.add("dragging"); vp.setPointerCapture(e.pointerId); });
    vp.addEventListener("pointermove", (e) => {
      if (!drag) return;
      const img = $("slice"), k = img.naturalWidth ? img.naturalWidth / img.clientWidth : 1;
      st.pan[0] -= (e.clientX - drag[0]) * k * pixelStep();
      st.pan[1] -= (e.clientY - drag[1]) * k * pixelStep();
      drag = [e.clientX, e.clientY]; changed();
    });
    const end = () => { drag = null; vp.classList.remove("dragging"); };
    vp.addEventListener("pointerup", end); vp.addEventListener("pointercancel", end);
    vp.addEventListener("wheel", (e) => {
      e.preventDefault();
      if (e.shiftKey) move(-Math.sign(e.deltaY) * pixelStep() * 2);
      else { st.scale = clamp(st.scale - Math.sign(e.deltaY) * 0.1, -3, 3); changed(); }
    }, { passive: false });
    for (const name of ["axial", "coronal", "sagittal"]) $(`ov-${name}`).addEventListener("click", (e) => clickOverview(name, e));
    document.addEventListener("keydown", keys);
    window.addEventListener("resize", syncControls);
  }
  function keys(e) {
    if (e.target.tagName === "SELECT" || e.ctrlKey || e.metaKey || e.altKey) return;
    const big = e.shiftKey ? 10 : 1, s = pixelStep();
    const k = e.key.toLowerCase();
    const act = {
      w: () => move(s * big), arrowup: () => move(s * big), pageup: () => move(s * 10),
      s: () => move(-s * big), arrowdown: () => move(-s * big), pagedown: () => move(-s * 10),
      arrowleft: () => { st.az = ((st.az - 2 * big + 540) % 360) - 180; changed(); },
      arrowright: () => { st.az = ((st.az + 2 * big + 540) % 360) - 180; changed(); },
      q: () => { st.tilt = clamp(st.tilt - 2 * big, 0, 180); changed(); },
      e: () => { st.tilt = clamp(st.tilt + 2 * big, 0, 180); changed(); },
      "+": () => { st.scale = clamp(st.scale + 0.25, -3, 3); changed(); },
      "=": () => { st.scale = clamp(st.scale + 0.25, -3, 3); changed(); },
      "-": () => { st.scale = clamp(st.scale - 0.25, -3, 3); changed(); },
      i: () => { st.pan[1] -= 16 * s * big; changed(); }, k: () => { st.pan[1] += 16 * s * big; changed(); },
      j: () => { st.pan[0] -= 16 * s * big; changed(); }, l: () => { st.pan[0] += 16 * s * big; changed(); },
      1: () => preset("axial"), 2: () => preset("coronal"), 3: () => preset("sagittal"), 4: () => preset("oblique"),
      c: () => { st.pan = [0, 0]; changed(); }, r: reset, a: () => { st.wl = null; changed(); },
    }[k];
    if (act) { e.preventDefault(); act(); }
  }
  function copyCommand() {
    const p = sliceParams();
    const cmd = `parvox slice ${info.store} --center ${fmt(p.center, 3).replace(/ /g, "")} ` +
      `--u ${fmt(p.u, 6).replace(/ /g, "")} --v ${fmt(p.v, 6).replace(/ /g, "")} ` +
      `--size ${p.size.join(",")} --step ${p.step.toPrecision(6)} --zoom ${p.zoom} -o slice.png`;
    (navigator.clipboard ? navigator.clipboard.writeText(cmd) : Promise.reject()).catch(() => window.prompt("parvox slice command", cmd));
  }

  // ---- overview -----------------------------------------------------------------------------
  function ovPixel(g, zyx) {
    const j = (zyx[g.u_axis] - g.center[g.u_axis]) * sp[g.u_axis] / g.step + (g.size[1] - 1) / 2;
    const i = (zyx[g.v_axis] - g.center[g.v_axis]) * sp[g.v_axis] / g.step + (g.size[0] - 1) / 2;
    return [j + 0.5, i + 0.5];
  }
  function drawOverviews() {
    if (!info) return;
    const { u, v } = frame(), c = centrePhys(), half = ((st.size - 1) / 2) * pixelStep();
    const corners = [[-1, -1], [1, -1], [1, 1], [-1, 1]].map(([a, b]) => physToVox(add(add(c, u, a * half), v, b * half)));
    for (const [name, ov] of Object.entries(overview)) {
      const cv = $(`ov-${name}`), g = ov.geom, ctx = cv.getContext("2d");
      ctx.clearRect(0, 0, cv.width, cv.height);
      if (ov.img.complete) ctx.drawImage(ov.img, 0, 0);
      const pts = corners.map((p) => ovPixel(g, p));
      ctx.fillStyle = "rgba(79,179,255,0.18)"; ctx.strokeStyle = "rgba(79,179,255,0.95)"; ctx.lineWidth = 1.5;
      ctx.beginPath(); pts.forEach(([x, y], k) => (k ? ctx.lineTo(x, y) : ctx.moveTo(x, y))); ctx.closePath();
      ctx.fill(); ctx.stroke();
      ctx.strokeStyle = "#ffb347"; ctx.lineWidth = 2;                 // top edge: image "up"
      ctx.beginPath(); ctx.moveTo(...pts[0]); ctx.lineTo(...pts[1]); ctx.stroke();
      const [cx, cy] = ovPixel(g, physToVox(c));
      ctx.fillStyle = "#ffb347"; ctx.beginPath(); ctx.arc(cx, cy, 2.5, 0, 2 * Math.PI); ctx.fill();
    }
  }
  function clickOverview(name, e) {
    const g = overview[name].geom, cv = e.target, r = cv.getBoundingClientRect();
    const j = (e.clientX - r.left) * (cv.width / r.width) - 0.5, i = (e.clientY - r.top) * (cv.height / r.height) - 0.5;
    const q = physToVox(centrePhys());
    q[g.u_axis] = g.center[g.u_axis] + (j - (g.size[1] - 1) / 2) * g.step / sp[g.u_axis];
    q[g.v_axis] = g.center[g.v_axis] + (i - (g.size[0] - 1) / 2) * g.step / sp[g.v_axis];
    const d = add(voxToPhys(q), c0, -1), { u, v, n } = frame();
    st.offset = clamp(dot(d, n), -halfDiag, halfDiag); st.pan = [dot(d, u), dot(d, v)]; changed();
  }

  // ---- stats and health ---------------------------------------------------------------------
  const human = (b) => b > 1 << 30 ? `${(b / (1 << 30)).toFixed(2)} GiB` : b > 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MiB` : `${(b / 1024).toFixed(0)} KiB`;
  async function pollStats() {
    try {
      const s = await (await fetch("/api/stats", { cache: "no-store" })).json();
      $("s-rate").textContent = s.slices_per_s.toFixed(1);
      $("s-lat").textContent = s.latency_p50_ms == null ? "–" : `${s.latency_p50_ms.toFixed(0)} / ${s.latency_p99_ms.toFixed(0)} ms`;
      $("s-hit").textContent = s.cache_hit_rate == null ? "–" : `${(100 * s.cache_hit_rate).toFixed(1)} %`;
      $("s-read").textContent = human(s.bytes_read);
      $("s-served").textContent = `${s.slices_served} (${s.errors} err, ${s.rejected_busy} busy)`;
      const busy = s.ranks.map((r) => r.busy_s || 0), top = Math.max(1e-9, ...busy);
      $("ranks").innerHTML = s.ranks.map((r, k) =>
        `<div class="rank"><span>rank ${r.rank}</span><div class="bar"><div style="width:${(100 * busy[k] / top).toFixed(0)}%"></div></div><span>${busy[k].toFixed(1)} s</span></div>`).join("");
    } catch (e) { /* server gone: health shows it */ }
  }
  async function pollHealth() {
    const pill = $("health");
    try {
      const r = await fetch("/health", { cache: "no-store" });
      pill.textContent = r.ok ? `healthy · ${info ? info.ranks : "?"} ranks` : "rank silent";
      pill.className = "pill " + (r.ok ? "ok" : "bad");
    } catch (e) { pill.textContent = "server down"; pill.className = "pill bad"; }
  }
  const maxPhys = () => Math.max(...shape.map((n, i) => n * sp[i]));

  async function start() {
    info = await (await fetch("/api/info")).json();
    sp = info.spacing; shape = info.shape;
    c0 = voxToPhys(shape.map((n) => (n - 1) / 2));
    halfDiag = 0.5 * Math.hypot(...shape.map((n, i) => n * sp[i]));
    fitStep = maxPhys() / st.size;
    $("offset").min = (-halfDiag).toFixed(1); $("offset").max = halfDiag.toFixed(1);
    if (info.dtype !== "uint8") {
      const w = info.display_window || [0, 65535], span = w[1] - w[0];
      wlRange = [w[0] - span, w[1] + span];
    }
    const span = wlRange[1] - wlRange[0];
    $("level").min = wlRange[0]; $("level").max = wlRange[1]; $("level").step = span / 512;
    $("width").min = span / 256; $("width").max = span + span / 255; $("width").step = span / 512;
    const gib = info.size_bytes / (1 << 30);
    $("volinfo").textContent = `${info.store} · ${shape.join("×")} ${info.dtype}${info.channels === 3 ? " RGB" : ""} · ` +
      `spacing ${sp.join("×")} mm · ${info.ndisks} disks · ${info.ranks} ranks · ${gib >= 0.1 ? gib.toFixed(2) + " GiB" : human(info.size_bytes)}`;
    for (const [name, g] of Object.entries(info.overview)) {
      const img = new Image(), cv = $(`ov-${name}`);
      cv.width = g.size[1]; cv.height = g.size[0];
      overview[name] = { img, geom: g };
      img.onload = drawOverviews;
      img.src = `/api/overview?view=${name}`;
    }
    bind(); syncControls(); drawOverviews();
    requestAnimationFrame(pump);
    pollStats(); pollHealth();
    setInterval(pollStats, 1000); setInterval(pollHealth, 2000);
  }
  // for tests and the console: the state, the URL of the slice on screen and of the current plane
  window.parvoxViewer = {
    state: st, changed, sliceURL,
    get shownSeq() { return shownSeq; }, get shownURL() { return shownURL; },
    get idle() { return !dirty && !needFinal && inflight.size === 0; },
    get dropped() { return dropped; },
  };
  start().catch((e) => { $("error").textContent = `cannot load /api/info: ${e.message}`; $("error").hidden = false; });
})();
