// kbox observatory dashboard. Plain browser JavaScript, no dependencies.
'use strict';

(function () {
  const params = new URLSearchParams(location.search);
  const token = params.get('token') || '';
  const MAX_POINTS = 300;
  const MAX_FEED = 500;

  const FAMILY_COLORS = {
    file: '#4c9aff', io: '#00b8d9', meta: '#79e2f2', proc: '#a47cf3', signal: '#ff8f73',
    mem: '#36b37e', net: '#ffab00', time: '#c1c7d0', other: '#6b778c'
  };
  const EXTRA_COLORS = ['#f78fb3', '#b8e994', '#82ccdd', '#e58e26', '#b71540'];
  const SOFTIRQ_COLORS = {
    HI: '#ff5c5c', TIMER: '#4c9aff', NET_TX: '#ffab00', NET_RX: '#ffd166', BLOCK: '#36b37e',
    IRQ_POLL: '#79e2f2', TASKLET: '#a47cf3', SCHED: '#00b8d9', HRTIMER: '#f78fb3', RCU: '#c1c7d0'
  };
  const SOFTIRQ_ORDER = ['HI', 'TIMER', 'NET_TX', 'NET_RX', 'BLOCK', 'IRQ_POLL', 'TASKLET', 'SCHED', 'HRTIMER', 'RCU'];
  const DISP_ORDER = ['lkl', 'host', 'emulated', 'denied', 'enosys'];
  const DISP_COLORS = { lkl: '#4c9aff', host: '#36b37e', emulated: '#a47cf3', denied: '#ff5c5c', enosys: '#ffab00' };

  const $ = (id) => document.getElementById(id);

  function api(path, init) {
    init = init || {};
    init.headers = Object.assign({}, init.headers || {});
    if (token) init.headers['Authorization'] = 'Bearer ' + token;
    return fetch(path, init).then((r) => {
      if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
      return r.json();
    });
  }

  // ---------------------------------------------------------------- format
  function fmtNum(v) {
    if (!isFinite(v)) return '0';
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    if (a >= 100 || v === Math.round(v)) return String(Math.round(v));
    return v.toFixed(1);
  }
  function fmtNs(ns) {
    if (ns < 1e3) return ns + 'ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + 'µs';
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + 'ms';
    return (ns / 1e9).toFixed(2) + 's';
  }
  function fmtDur(ns) {
    let s = Math.floor(ns / 1e9);
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    return (h ? h + 'h' : '') + (h || m ? m + 'm' : '') + s + 's';
  }

  // ---------------------------------------------------------------- charts
  // Each chart is drawn on a canvas sized to its CSS box; after drawing,
  // canvas.dataset.points holds the number of time points drawn.
  function setupCanvas(c) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(10, c.clientWidth), h = Math.max(10, c.clientHeight);
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    return { ctx, w, h };
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function drawAxes(ctx, box, ymax, times, unitFmt, right) {
    ctx.strokeStyle = '#2a3542';
    ctx.fillStyle = '#7d8a99';
    ctx.lineWidth = 1;
    ctx.font = '10px system-ui, sans-serif';
    ctx.textAlign = right ? 'left' : 'right';
    ctx.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = box.y + box.h - (box.h * i) / 4;
      if (!right) {
        ctx.beginPath(); ctx.moveTo(box.x, y + 0.5); ctx.lineTo(box.x + box.w, y + 0.5); ctx.stroke();
      }
      ctx.fillText(unitFmt((ymax * i) / 4), right ? box.x + box.w + 4 : box.x - 4, y);
    }
    if (!right && times.length > 1) {
      const span = (times[times.length - 1] - times[0]) / 1e9;
      ctx.textAlign = 'left'; ctx.textBaseline = 'top';
      ctx.fillText('-' + Math.round(span) + 's', box.x, box.y + box.h + 3);
      ctx.textAlign = 'right';
      ctx.fillText('now', box.x + box.w, box.y + box.h + 3);
    }
  }

  function xAt(box, times, i) {
    if (times.length < 2) return box.x + box.w;
    const t0 = times[0], t1 = times[times.length - 1];
    return box.x + ((times[i] - t0) / (t1 - t0 || 1)) * box.w;
  }

  // series: [{name, color, values[]}] stacked bottom-up.
  function drawStacked(canvas, times, series, unitFmt) {
    const { ctx, w, h } = setupCanvas(canvas);
    const box = { x: 44, y: 6, w: w - 52, h: h - 22 };
    const n = times.length;
    const tops = new Array(n).fill(0);
    const layers = series.map((s) => {
      const lo = tops.slice();
      for (let i = 0; i < n; i++) tops[i] += Math.max(0, s.values[i] || 0);
      return { s, lo, hi: tops.slice() };
    });
    const ymax = niceMax(Math.max(0, ...tops));
    drawAxes(ctx, box, ymax, times, unitFmt);
    const yAt = (v) => box.y + box.h - (v / ymax) * box.h;
    for (const L of layers) {
      if (n === 0) break;
      ctx.beginPath();
      for (let i = 0; i < n; i++) {
        const x = xAt(box, times, i), y = yAt(L.hi[i]);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      }
      for (let i = n - 1; i >= 0; i--) ctx.lineTo(xAt(box, times, i), yAt(L.lo[i]));
      ctx.closePath();
      ctx.fillStyle = L.s.color + 'b0';
      ctx.fill();
      ctx.beginPath();
      for (let i = 0; i < n; i++) {
        const x = xAt(box, times, i), y = yAt(L.hi[i]);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      }
      ctx.strokeStyle = L.s.color; ctx.lineWidth = 1; ctx.stroke();
    }
    canvas.dataset.points = String(n);
    canvas.dataset.series = String(series.length);
  }

  // left: [{name,color,values}] on left axis; rightSeries on a right axis.
  function drawLines(canvas, times, left, right, leftFmt, rightFmt) {
    const { ctx, w, h } = setupCanvas(canvas);
    const box = { x: 44, y: 6, w: w - 84, h: h - 22 };
    const n = times.length;
    const maxOf = (ss) => niceMax(Math.max(0, ...ss.flatMap((s) => s.values.map((v) => v || 0))));
    const lmax = maxOf(left), rmax = maxOf(right);
    drawAxes(ctx, box, lmax, times, leftFmt);
    drawAxes(ctx, box, rmax, [], rightFmt, true);
    const plot = (s, ymax, dash) => {
      if (n === 0) return;
      ctx.beginPath();
      ctx.setLineDash(dash);
      for (let i = 0; i < n; i++) {
        const x = xAt(box, times, i), y = box.y + box.h - ((s.values[i] || 0) / ymax) * box.h;
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      }
      ctx.strokeStyle = s.color; ctx.lineWidth = 1.5; ctx.stroke();
      ctx.setLineDash([]);
    };
    left.forEach((s) => plot(s, lmax, []));
    right.forEach((s) => plot(s, rmax, [4, 3]));
    canvas.dataset.points = String(n);
    canvas.dataset.series = String(left.length + right.length);
  }

  function legend(el, items) {
    const key = items.map((i) => i.name + i.color).join('|');
    if (el.dataset.key === key) return;
    el.dataset.key = key;
    el.textContent = '';
    for (const it of items) {
      const span = document.createElement('span');
      const sw = document.createElement('i');
      sw.style.background = it.color;
      span.appendChild(sw);
      span.appendChild(document.createTextNode(it.name));
      el.appendChild(span);
    }
  }

  // ---------------------------------------------------------------- gauges
  const SVGNS = 'http://www.w3.org/2000/svg';
  function gauge(id, frac, text, color) {
    const fig = $(id);
    const svg = fig.querySelector('svg');
    if (!svg.firstChild) {
      const bg = document.createElementNS(SVGNS, 'path');
      const fg = document.createElementNS(SVGNS, 'path');
      const arc = 'M 12 62 A 48 48 0 0 1 108 62';
      for (const [p, c] of [[bg, '#2a3542'], [fg, '#4c9aff']]) {
        p.setAttribute('d', arc); p.setAttribute('fill', 'none');
        p.setAttribute('stroke', c); p.setAttribute('stroke-width', '10');
        p.setAttribute('stroke-linecap', 'round');
        p.setAttribute('pathLength', '100');
        svg.appendChild(p);
      }
      fg.setAttribute('class', 'arc');
      const t = document.createElementNS(SVGNS, 'text');
      t.setAttribute('x', '60'); t.setAttribute('y', '58'); t.setAttribute('text-anchor', 'middle');
      t.setAttribute('class', 'val');
      svg.appendChild(t);
    }
    frac = Math.max(0, Math.min(1, frac || 0));
    const fg = svg.querySelector('.arc');
    fg.setAttribute('stroke-dasharray', (frac * 100).toFixed(1) + ' 100');
    fg.setAttribute('stroke', color || (frac > 0.9 ? '#ff5c5c' : frac > 0.7 ? '#ffab00' : '#4c9aff'));
    svg.querySelector('.val').textContent = text;
    fig.dataset.value = text;
  }

  // ---------------------------------------------------------------- state
  let history = [];
  let familyOrder = [];
  let peakSys = 1, peakCtx = 1;

  function addSnapshot(s) {
    const last = history[history.length - 1];
    if (last && s.time_ns <= last.time_ns) return false;
    history.push(s);
    if (history.length > MAX_POINTS) history.splice(0, history.length - MAX_POINTS);
    for (const f of Object.keys(s.families || {})) if (!familyOrder.includes(f)) familyOrder.push(f);
    return true;
  }

  function famColor(f, i) { return FAMILY_COLORS[f] || EXTRA_COLORS[i % EXTRA_COLORS.length]; }

  function renderCharts() {
    const times = history.map((s) => s.time_ns);
    const fam = familyOrder.map((f, i) => ({ name: f, color: famColor(f, i), values: history.map((s) => (s.family_rate_per_s || {})[f] || 0) }));
    drawStacked($('c-family'), times, fam, fmtNum);
    legend($('l-family'), fam);

    const MiB = (kb) => kb / 1024;
    const memKeys = [['used_kb', 'used', '#ff8f73'], ['slab_kb', 'slab', '#a47cf3'], ['buffers_kb', 'buffers', '#00b8d9'], ['cached_kb', 'cached', '#4c9aff'], ['free_kb', 'free', '#36b37e']];
    const mem = memKeys.map(([k, name, color]) => ({ name, color, values: history.map((s) => MiB(((s.kernel || {}).mem_kb || {})[k] || 0)) }));
    drawStacked($('c-mem'), times, mem, fmtNum);
    legend($('l-mem'), mem);

    const ctxs = [{ name: 'context switches/s', color: '#4c9aff', values: history.map((s) => (s.kernel || {}).context_switches_per_s || 0) }];
    const loads = [['1m', '#ffab00', 0], ['5m', '#36b37e', 1], ['15m', '#a47cf3', 2]].map(([n, c, i]) => ({ name: 'load ' + n + ' (right)', color: c, values: history.map((s) => (((s.kernel || {}).loadavg) || [0, 0, 0])[i]) }));
    drawLines($('c-ctx'), times, ctxs, loads, fmtNum, (v) => v.toFixed(1));
    legend($('l-ctx'), ctxs.concat(loads));

    const sirq = SOFTIRQ_ORDER.map((n) => ({ name: n, color: SOFTIRQ_COLORS[n], values: history.map((s) => ((s.kernel || {}).softirq_rate_per_s || {})[n] || 0) }));
    drawStacked($('c-softirq'), times, sirq, fmtNum);
    legend($('l-softirq'), sirq);
    renderNetChart();
  }

  let paused = false;
  function renderSnapshot(s) {
    const k = s.kernel || {};
    const mem = k.mem_kb || {};
    peakSys = Math.max(peakSys * 0.995, s.syscall_rate_per_s || 0, 1);
    peakCtx = Math.max(peakCtx * 0.995, k.context_switches_per_s || 0, 1);
    gauge('g-sys', (s.syscall_rate_per_s || 0) / niceMax(peakSys), fmtNum(s.syscall_rate_per_s || 0), '#4c9aff');
    gauge('g-ctx', (k.context_switches_per_s || 0) / niceMax(peakCtx), fmtNum(k.context_switches_per_s || 0), '#00b8d9');
    const mfrac = mem.total_kb ? mem.used_kb / mem.total_kb : 0;
    gauge('g-mem', mfrac, mem.total_kb ? (100 * mfrac).toFixed(1) + '%' : 'n/a');
    const fd = s.fd_table || {};
    gauge('g-fd', fd.capacity ? fd.used / fd.capacity : 0, fd.capacity ? fd.used + '/' + fd.capacity : 'n/a');
    $('uptime').textContent = 'up ' + fmtDur(s.uptime_ns || 0);
    $('total').textContent = fmtNum(s.syscalls_total || 0) + ' syscalls';
    paused = !!s.paused;
    const b = $('pause');
    b.textContent = paused ? 'Resume' : 'Pause';
    b.classList.toggle('paused', paused);

    const d = s.dispositions || {};
    const tot = DISP_ORDER.reduce((a, k2) => a + (d[k2] || 0), 0) || 1;
    const box = $('disp');
    box.textContent = '';
    for (const k2 of DISP_ORDER) {
      const row = document.createElement('div'); row.className = 'row';
      const name = document.createElement('span'); name.className = 'disp-' + k2; name.textContent = k2;
      const bar = document.createElement('div'); bar.className = 'bar';
      const fill = document.createElement('div'); fill.style.width = (100 * (d[k2] || 0) / tot).toFixed(1) + '%'; fill.style.background = DISP_COLORS[k2];
      bar.appendChild(fill);
      const num = document.createElement('span'); num.className = 'num'; num.textContent = fmtNum(d[k2] || 0);
      row.append(name, bar, num);
      box.appendChild(row);
    }
  }

  function renderENOSYS(list) {
    const tb = $('enosys');
    tb.textContent = '';
    if (!list.length) {
      const tr = document.createElement('tr');
      const td = document.createElement('td'); td.colSpan = 3; td.className = 'muted'; td.textContent = 'none';
      tr.appendChild(td); tb.appendChild(tr);
      return;
    }
    for (const e of list.slice(0, 20)) {
      const tr = document.createElement('tr');
      for (const v of [e.name || ('syscall_' + e.nr), e.nr, fmtNum(e.count)]) {
        const td = document.createElement('td'); td.textContent = String(v); tr.appendChild(td);
      }
      tb.appendChild(tr);
    }
  }

  // ---------------------------------------------------------------- network
  // From the snapshot's net section (LKL's /proc/net/dev and snmp) and
  // /api/net (the user-mode stack's decisions). The panel sets
  // data-ifaces, data-decisions, data-allowed and data-refused on #net.
  const TCP_KEYS = ['ActiveOpens', 'PassiveOpens', 'CurrEstab', 'InSegs', 'OutSegs', 'RetransSegs', 'OutRsts'];
  const UDP_KEYS = ['InDatagrams', 'OutDatagrams', 'NoPorts', 'InErrors'];
  let prevNet = null;

  function cell(tr, v, cls) {
    const td = document.createElement('td');
    td.textContent = String(v);
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function renderNet(s) {
    const n = s.net || {};
    const panel = $('net');
    const ifs = n.interfaces || {};
    const names = Object.keys(ifs).sort((a, b) => (a === 'lo') - (b === 'lo') || a.localeCompare(b));
    const dt = prevNet ? (s.time_ns - prevNet.time_ns) / 1e9 : 0;
    const tb = $('net-ifaces').querySelector('tbody');
    tb.textContent = '';
    for (const name of names) {
      const i = ifs[name];
      const p = prevNet && prevNet.ifs[name];
      const rate = (k) => (p && dt > 0 ? Math.max(0, (i[k] - p[k]) / dt) : 0);
      const tr = document.createElement('tr');
      tr.dataset.iface = name;
      [name, fmtNum(i.rx_bytes || 0), fmtNum(i.rx_packets || 0), fmtNum(i.tx_bytes || 0), fmtNum(i.tx_packets || 0),
        fmtNum(rate('rx_bytes')) + 'B', fmtNum(rate('tx_bytes')) + 'B'].forEach((v) => cell(tr, v));
      tb.appendChild(tr);
    }
    if (dt >= 0) prevNet = { time_ns: s.time_ns, ifs };
    panel.dataset.ifaces = String(names.length);
    const pt = $('net-proto').querySelector('tbody');
    pt.textContent = '';
    const tcp = n.tcp || {}, udp = n.udp || {};
    for (let r = 0; r < Math.max(TCP_KEYS.length, UDP_KEYS.length); r++) {
      const tr = document.createElement('tr');
      cell(tr, TCP_KEYS[r] || '', 'muted'); cell(tr, TCP_KEYS[r] ? fmtNum(tcp[TCP_KEYS[r]] || 0) : '');
      cell(tr, UDP_KEYS[r] || '', 'muted'); cell(tr, UDP_KEYS[r] ? fmtNum(udp[UDP_KEYS[r]] || 0) : '');
      if (TCP_KEYS[r]) tr.dataset.tcp = TCP_KEYS[r];
      pt.appendChild(tr);
    }
    panel.dataset.tcpActiveOpens = String(tcp.ActiveOpens || 0);
  }

  function renderNetChart() {
    const times = history.map((s) => s.time_ns);
    const rx = { name: 'rx bytes/s', color: '#36b37e', values: history.map((s) => (s.net || {}).rx_bytes_per_s || 0) };
    const tx = { name: 'tx bytes/s', color: '#ffab00', values: history.map((s) => (s.net || {}).tx_bytes_per_s || 0) };
    drawLines($('c-net'), times, [rx, tx], [], fmtNum, fmtNum);
    legend($('l-net'), [rx, tx]);
  }

  function renderDecisions(sum) {
    const panel = $('net');
    const ds = sum.decisions || [];
    panel.dataset.allowed = String(sum.allowed || 0);
    panel.dataset.refused = String(sum.refused || 0);
    panel.dataset.decisions = String(ds.length);
    $('net-info').textContent = (sum.allowed || 0) + ' allowed · ' + (sum.refused || 0) + ' refused';
    const tb = $('net-decisions').querySelector('tbody');
    if (tb.dataset.head === String(ds.length ? ds[ds.length - 1].seq : 0)) return;
    tb.dataset.head = String(ds.length ? ds[ds.length - 1].seq : 0);
    tb.textContent = '';
    if (!ds.length) {
      const tr = document.createElement('tr');
      const td = cell(tr, 'no connections yet', 'muted'); td.colSpan = 7;
      tb.appendChild(tr);
      return;
    }
    for (let k = ds.length - 1; k >= 0; k--) {
      const d = ds[k];
      const tr = document.createElement('tr');
      tr.className = 'dec v-' + d.verdict;
      tr.title = d.why || '';
      cell(tr, d.seq);
      cell(tr, d.verdict + (d.inbound ? ' (in)' : ''), 'verdict');
      cell(tr, d.proto);
      cell(tr, d.inbound ? d.real : d.guest, 'from');
      cell(tr, d.dest, 'to');
      cell(tr, d.inbound ? '' : d.real, 'real');
      cell(tr, d.rule, 'rule').title = d.why || d.rule;
      tb.appendChild(tr);
    }
  }

  // ---------------------------------------------------------------- feed
  const feed = []; // {type:'ev', e} or {type:'gap', lost}
  const expanded = new Set();
  let feedDirty = true, received = 0, lostTotal = 0;

  function matches(item, text, disp) {
    if (item.type === 'gap') return !disp && !text;
    const e = item.e;
    if (disp && e.disposition !== disp) return false;
    if (!text) return true;
    const hay = (e.name + ' ' + e.path + ' ' + e.pid + ' ' + e.nr + ' ' + e.errno + ' ' + e.disposition).toLowerCase();
    return text.split(/\s+/).every((t) => hay.includes(t));
  }

  function renderFeed() {
    if (!feedDirty) return;
    feedDirty = false;
    const text = $('f-text').value.trim().toLowerCase();
    const disp = $('f-disp').value;
    const tb = $('feed-body');
    const frag = document.createDocumentFragment();
    let shown = 0;
    for (let i = feed.length - 1; i >= 0; i--) {
      const item = feed[i];
      if (!matches(item, text, disp)) continue;
      shown++;
      const tr = document.createElement('tr');
      if (item.type === 'gap') {
        tr.className = 'gap';
        const td = document.createElement('td'); td.colSpan = 7;
        td.textContent = '… ' + item.lost + ' events lost (stream fell behind the ring) …';
        tr.appendChild(td); frag.appendChild(tr);
        continue;
      }
      const e = item.e;
      tr.className = 'ev d-' + e.disposition + (e.ret < 0 || e.errno ? ' err' : '');
      tr.dataset.seq = e.seq;
      const cells = [e.seq, e.pid, e.name || ('syscall_' + e.nr), e.disposition, e.errno ? e.ret + ' (errno ' + e.errno + ')' : e.ret, fmtNs(e.latency_ns), e.path];
      const cls = ['', '', '', 'disp-' + e.disposition, 'ret', '', 'path'];
      cells.forEach((v, j) => {
        const td = document.createElement('td');
        td.textContent = String(v);
        if (cls[j]) td.className = cls[j];
        if (j === 6) td.title = e.path;
        tr.appendChild(td);
      });
      frag.appendChild(tr);
      if (expanded.has(e.seq)) {
        const dtr = document.createElement('tr'); dtr.className = 'detail';
        const td = document.createElement('td'); td.colSpan = 7;
        const pre = document.createElement('pre'); pre.textContent = JSON.stringify(e, null, 2);
        td.appendChild(pre); dtr.appendChild(td); frag.appendChild(dtr);
      }
    }
    tb.textContent = '';
    tb.appendChild(frag);
    $('feed-info').textContent = shown + ' shown · ' + received + ' received' + (lostTotal ? ' · ' + lostTotal + ' lost' : '');
    $('feed').dataset.rows = String(tb.querySelectorAll('tr.ev').length);
  }

  $('feed-body').addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr.ev');
    if (!tr) return;
    const seq = Number(tr.dataset.seq);
    if (expanded.has(seq)) expanded.delete(seq); else expanded.add(seq);
    feedDirty = true; renderFeed();
  });
  $('f-text').addEventListener('input', () => { feedDirty = true; renderFeed(); });
  $('f-disp').addEventListener('change', () => { feedDirty = true; renderFeed(); });

  function pushFeed(item) {
    feed.push(item);
    if (feed.length > MAX_FEED) feed.splice(0, feed.length - MAX_FEED);
    feedDirty = true;
  }

  function connectEvents() {
    let url = 'api/events?backlog=200';
    if (token) url += '&token=' + encodeURIComponent(token);
    const es = new EventSource(url);
    const conn = $('conn');
    es.onopen = () => { conn.textContent = 'stream: live'; conn.className = 'pill on'; };
    es.onerror = () => { conn.textContent = 'stream: reconnecting'; conn.className = 'pill off'; };
    es.addEventListener('syscall', (m) => {
      try { pushFeed({ type: 'ev', e: JSON.parse(m.data) }); received++; } catch (err) { /* ignore */ }
    });
    es.addEventListener('gap', (m) => {
      try { const g = JSON.parse(m.data); lostTotal += g.lost; pushFeed({ type: 'gap', lost: g.lost }); } catch (err) { /* ignore */ }
    });
  }

  // ---------------------------------------------------------------- main
  $('pause').addEventListener('click', () => {
    api('api/control', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ action: paused ? 'resume' : 'pause' }) })
      .then((r) => { paused = r.paused; $('pause').textContent = paused ? 'Resume' : 'Pause'; $('pause').classList.toggle('paused', paused); })
      .catch(() => {});
  });

  function poll() {
    api('api/snapshot').then((s) => {
      if (addSnapshot(s)) renderCharts();
      renderSnapshot(s);
      renderNet(s);
    }).catch(() => {});
    api('api/enosys').then(renderENOSYS).catch(() => {});
    api('api/net?limit=50').then(renderDecisions).catch(() => {});
  }

  window.addEventListener('resize', () => renderCharts());
  api('api/history?limit=' + MAX_POINTS).then((h) => { h.forEach(addSnapshot); renderCharts(); })
    .catch(() => {})
    .finally(() => { poll(); setInterval(poll, 1000); });
  connectEvents();
  setInterval(renderFeed, 250);
  renderCharts();
})();
