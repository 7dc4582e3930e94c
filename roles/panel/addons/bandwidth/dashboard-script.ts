/**
 * The browser script of the bandwidth pages, served at /assets/bandwidth.js (the page CSP allows
 * scripts from the panel only). It draws the fleet In/Out chart with uPlot from the timeseries
 * endpoint, and refreshes the live rates of the node cards every 5 seconds.
 */
export const DASHBOARD_SCRIPT = `(() => {
  'use strict';
  const fmtBytes = (n) => {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + u[i];
  };
  // The same text as formatRate of the server-rendered page, so a refresh changes only the value.
  const fmtRate = (bps) => ((bps * 8) / 1000000).toFixed(2) + ' Mbit/s';
  const chart = document.getElementById('bw-chart');
  if (chart) {
    const q = new URLSearchParams({ hours: chart.dataset.hours || '24' });
    if (chart.dataset.node) q.set('node_id', chart.dataset.node);
    if (chart.dataset.server) q.set('server_id', chart.dataset.server);
    fetch('/admin/bandwidth/api/timeseries?' + q, { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then((r) => r.json())
      .then((s) => {
        const xs = s.points.map((p) => Date.parse(p.t) / 1000);
        const data = [xs, s.points.map((p) => p.rx_bytes), s.points.map((p) => p.tx_bytes)];
        const total = (k) => s.points.reduce((a, p) => a + p[k], 0);
        const summary = document.getElementById('bw-chart-summary');
        if (summary) summary.textContent = 'In ' + fmtBytes(total('rx_bytes')) + ', Out ' + fmtBytes(total('tx_bytes')) + ' over ' + s.points.length + ' ' + s.bucket + (s.points.length === 1 ? '' : 's');
        new uPlot({
          width: Math.max(320, chart.clientWidth),
          height: 280,
          series: [{}, { label: 'In (RX)', stroke: '#1d5fbf', fill: 'rgba(29,95,191,0.12)', value: (u, v) => v == null ? '-' : fmtBytes(v) },
            { label: 'Out (TX)', stroke: '#d9822b', fill: 'rgba(217,130,43,0.12)', value: (u, v) => v == null ? '-' : fmtBytes(v) }],
          axes: [{}, { values: (u, ticks) => ticks.map(fmtBytes), size: 70 }],
        }, data, chart);
        chart.dataset.ready = String(s.points.length);
      })
      .catch((e) => { chart.textContent = 'The chart could not be loaded: ' + e; });
  }
  const cards = document.querySelectorAll('[data-live-node]');
  const refresh = () => cards.forEach((row) => {
    fetch('/admin/bandwidth/nodes/' + row.dataset.liveNode + '/live', { credentials: 'same-origin' })
      .then((r) => r.json())
      .then((l) => {
        const set = (k, v) => { const el = row.querySelector('[data-k="' + k + '"]'); if (el) el.textContent = v; };
        set('rx', l.ok ? fmtRate(l.rx_rate_bps) : '-');
        set('tx', l.ok ? fmtRate(l.tx_rate_bps) : '-');
        if (l.ok) { set('containers', l.containers); set('throttled', l.throttled); set('exceeded', l.quota_exceeded); }
        row.dataset.live = l.ok ? 'ok' : 'unreachable';
      })
      .catch(() => { row.dataset.live = 'unreachable'; });
  });
  if (cards.length > 0) { refresh(); setInterval(refresh, 5000); }
})();
`;
