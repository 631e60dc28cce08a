import { startApiBroker, API_TOKENS } from '../support/api-broker';
test('smoke', async () => {
  const b = await startApiBroker();
  try {
    const h = await b.http('GET', '/health', { token: null });
    console.log(h.status, h.text);
    const r = await b.http('GET', '/ready', { token: null });
    console.log(r.status, r.text);
    const n = await b.http('GET', '/api/v1/nothing');
    console.log(n.status, n.text);
    const u = await b.http('GET', '/api/v1/nothing', { token: 'bad' });
    console.log(u.status, u.text);
    const o = await b.inject({ method: 'GET', url: '/api/v1/openapi.json', token: null });
    console.log(o.statusCode, o.body.slice(0, 300));
    const d = await b.inject({ method: 'GET', url: '/api/v1/docs', token: null });
    console.log(d.statusCode, d.headers.location, d.body.slice(0,100));
    for (let i = 0; i < 32; i++) await b.inject({ method: 'GET', url: '/api/v1/x', token: 'bad' });
    const rl = await b.inject({ method: 'GET', url: '/api/v1/x', token: 'bad' });
    console.log(rl.statusCode, rl.body, rl.headers['retry-after']);
    const ok = await b.inject({ method: 'GET', url: '/api/v1/x', token: API_TOKENS.admin });
    console.log(ok.statusCode, ok.body);
    console.log(b.logs.filter(l => l.msg === 'api request').slice(-2));
  } finally { await b.stop(); }
});
