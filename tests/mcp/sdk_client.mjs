// tests/mcp/sdk_client.mjs -- `agentmem mcp` driven by the official MCP
// TypeScript SDK client (@modelcontextprotocol/sdk: Client over
// StdioClientTransport), beside the reference memory server
// (@modelcontextprotocol/server-memory) run from npm:
//   1. every agentmem tool is listed and called, and what it wrote is what the
//      shell then reads from the same file;
//   2. the reference server's own tool sequence (create, relate, observe,
//      search, open, delete) gives the same graph answers on both servers.
// Usage: node sdk_client.mjs AGENTMEM_BINARY NODE_MODULES_PARENT WORK_DIR
// Prints one line per case and a total line "[node] test cases: ..." that
// tests/run_all.sh counts.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';
import assert from 'node:assert/strict';

const [agentmem, modulesDir, work] = process.argv.slice(2);
const require = createRequire(path.join(modulesDir, 'package.json'));
const load = async (id) => import(pathToFileURL(require.resolve(id)).href);
const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await load('@modelcontextprotocol/sdk/client/stdio.js');
const referenceServer = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/server-memory/package.json')), 'dist/index.js');

let passed = 0;
let failed = 0;
async function testCase(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}\n  ${String(e.stack || e).split('\n').slice(0, 8).join('\n  ')}`);
  }
}

// stderr: ours is shown (its messages explain a failure); the reference
// server's start-up line is dropped.
async function connect(command, args, env, stderr = 'inherit') {
  const transport = new StdioClientTransport({ command, args, env: { ...process.env, ...env },
                                               stderr });
  const client = new Client({ name: 'agentmem-sdk-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

const call = async (client, name, args = {}) => client.callTool({ name, arguments: args });
const data = async (client, name, args) => {
  const r = await call(client, name, args);
  assert.equal(r.isError, false, `${name}: ${JSON.stringify(r.content)}`);
  return r.structuredContent;
};
const sql = (file, query) => execFileSync(agentmem, [file, query], { encoding: 'utf8' });

const timer = setTimeout(() => {
  console.log('not ok - the run did not finish within 120 s');
  console.log(`[node] test cases: ${passed + failed + 1} | ${passed} passed | ${failed + 1} failed |`);
  process.exit(1);
}, 120000);

// ---------------------------------------------------------------- agentmem's tools

const file = path.join(work, 'sdk.agentmem');
const ours = await connect(agentmem, ['mcp', file, '--user', 'u']);

await testCase('the SDK client negotiates a revision and lists every tool', async () => {
  const info = ours.getServerVersion();
  assert.equal(info.name, 'agentmem');
  assert.ok(ours.getServerCapabilities().tools && ours.getServerCapabilities().resources);
  const { tools } = await ours.listTools();
  const names = tools.map((t) => t.name);
  for (const n of ['remember', 'recall', 'forget', 'facts_assert', 'facts_query', 'block_get',
                   'block_set', 'context', 'profile', 'create_entities', 'create_relations',
                   'add_observations', 'delete_entities', 'delete_observations',
                   'delete_relations', 'read_graph', 'search_nodes', 'open_nodes']) {
    assert.ok(names.includes(n), `missing tool ${n}`);
  }
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object');
    assert.ok(!('user' in t.inputSchema.properties), `${t.name} offers a user argument under --user`);
  }
});

let episodeIds = [];
await testCase('remember and recall: hits with scores and reasons, as the shell sees them', async () => {
  for (const text of ['We adopted a grey cat named Miso', 'The boiler broke on Tuesday',
                      'Miso sleeps on the radiator']) {
    episodeIds.push((await data(ours, 'remember', { text, session_id: 's1' })).id);
  }
  const { hits } = await data(ours, 'recall', { query: 'Miso the cat', k: 5 });
  assert.ok(hits.length >= 2);
  assert.equal(hits[0].id, episodeIds[0]);
  for (const h of hits) {
    assert.equal(typeof h.score, 'number');
    assert.ok(h.reason.length > 0);
  }
  const bm25 = await data(ours, 'recall', { query: 'boiler', mode: 'bm25' });
  assert.equal(bm25.hits[0].id, episodeIds[1]);
  assert.equal(bm25.hits[0].reason, 'bm25 #1');
  assert.ok(bm25.hits.every((h) => h.vector_rank === 0));
  assert.equal(sql(file, "SELECT group_concat(id) FROM episodes WHERE user_id = 'u'"),
               episodeIds.join(',') + '\n');
});

await testCase('facts_assert and facts_query on both time axes', async () => {
  const t2020 = Date.UTC(2020, 0, 1) * 1000;
  const t2023 = Date.UTC(2023, 0, 1) * 1000;
  const tokyo = await data(ours, 'facts_assert', { subject: 'u', predicate: 'lived_in',
    object: 'Tokyo', valid_from: t2020, valid_to: t2023, source_episode_ids: [episodeIds[0]] });
  const before = Date.now() * 1000;
  await new Promise((r) => setTimeout(r, 5));
  await data(ours, 'facts_assert', { subject: 'u', predicate: 'lived_in', object: 'Osaka',
                                     valid_from: t2023, confidence: 0.75 });
  const now = await data(ours, 'facts_query', { predicate: 'lived_in' });
  assert.deepEqual(now.facts.map((f) => f.object), ['Osaka']);
  const in2021 = await data(ours, 'facts_query', { predicate: 'lived_in', valid_at: Date.UTC(2021, 5, 1) * 1000 });
  assert.deepEqual(in2021.facts.map((f) => f.object), ['Tokyo']);
  assert.equal(in2021.facts[0].id, tokyo.id);
  assert.deepEqual(in2021.facts[0].source_episode_ids, [episodeIds[0]]);
  const knownBefore = await data(ours, 'facts_query', { predicate: 'lived_in', known_at: before });
  assert.deepEqual(knownBefore.facts, []);
  const all = await data(ours, 'facts_query', { subject: 'u', all_versions: true });
  assert.equal(all.facts.length, 2);
  assert.equal(sql(file, "SELECT object, confidence FROM facts WHERE predicate = 'lived_in' ORDER BY id"),
               'Tokyo|1.0\nOsaka|0.75\n');
});

await testCase('block_set and block_get keep versions; context and profile see them', async () => {
  await data(ours, 'block_set', { name: 'persona', value: 'Terse', pinned_order: 0 });
  const b = await data(ours, 'block_set', { name: 'persona', value: 'Terse and kind' });
  assert.equal(b.pinned_order, 0);
  assert.equal((await data(ours, 'block_get', { name: 'persona' })).value, 'Terse and kind');
  assert.equal((await data(ours, 'block_get', {})).blocks.length, 1);
  assert.equal(sql(file, "SELECT count(*) FROM block_history('u', 'persona')"), '2\n');
  const ctx = await data(ours, 'context', { query: 'Miso', token_budget: 200 });
  assert.equal(ctx.items[0].kind, 'block');
  assert.ok(ctx.items.some((i) => i.kind === 'episode' && i.id === episodeIds[0]));
  assert.ok(ctx.tokens <= 200);
  const p = await data(ours, 'profile');
  assert.equal(p.episodes, 3);
});

await testCase('resources: the profile, MEMORY.md and each block', async () => {
  const { resources } = await ours.listResources();
  assert.deepEqual(resources.map((r) => r.uri),
    ['agentmem://profile', 'agentmem://MEMORY.md', 'agentmem://blocks/persona']);
  const md = await ours.readResource({ uri: 'agentmem://MEMORY.md' });
  assert.equal(md.contents[0].mimeType, 'text/markdown');
  assert.ok(md.contents[0].text.includes('Terse and kind'));
  assert.equal(md.contents[0].text.trimEnd(),
    execFileSync(agentmem, [file, '.export-markdown u'], { encoding: 'utf8' }).trimEnd());
  const block = await ours.readResource({ uri: 'agentmem://blocks/persona' });
  assert.equal(block.contents[0].text, 'Terse and kind');
  const profile = await ours.readResource({ uri: 'agentmem://profile' });
  assert.equal(JSON.parse(profile.contents[0].text).episodes, 3);
  await assert.rejects(ours.readResource({ uri: 'agentmem://blocks/none' }), /not found/);
});

await testCase('forget with purge returns the receipt and the shell no longer finds the text', async () => {
  const r = await data(ours, 'forget', { episode_id: episodeIds[1], purge: true });
  assert.equal(r.episodes, 1);
  assert.equal(r.vacuumed, true);
  assert.equal(r.residue, 0);
  assert.equal(sql(file, "SELECT count(*) FROM episodes WHERE text LIKE '%boiler%'"), '0\n');
  assert.ok(!fs.readFileSync(file).includes('The boiler broke on Tuesday'));
});

await testCase('errors: unknown tools are protocol errors, bad arguments tool errors', async () => {
  await assert.rejects(call(ours, 'no_such_tool'), (e) => e.code === -32602);
  const bad = await call(ours, 'recall', { query: 7 });
  assert.equal(bad.isError, true);
  assert.match(bad.content[0].text, /argument "query" must be a string/);
  const other = await call(ours, 'recall', { query: 'cat', user: 'someone else' });
  assert.equal(other.isError, true);
});

await ours.close();

await testCase('--readonly lists only the read tools and refuses writes', async () => {
  const ro = await connect(agentmem, ['mcp', file, '--user', 'u', '--readonly']);
  const names = (await ro.listTools()).tools.map((t) => t.name);
  assert.ok(!names.includes('remember') && names.includes('recall'));
  const r = await call(ro, 'remember', { text: 'no' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /read-only/);
  await ro.close();
});

// ---------------------------------------------------------------- the reference sequence

const graphFile = path.join(work, 'graph.agentmem');
const jsonl = path.join(work, 'memory.jsonl');
const ag = await connect(agentmem, ['mcp', graphFile, '--user', 'g']);
const ref = await connect(process.execPath, [referenceServer], { MEMORY_FILE_PATH: jsonl }, 'ignore');

// Runs one call on both servers and returns both results.
async function both(name, args) {
  const [a, r] = [await call(ag, name, args), await call(ref, name, args)];
  return [a, r];
}
async function same(name, args) {
  const [a, r] = await both(name, args);
  assert.equal(a.isError ?? false, r.isError ?? false, `${name} isError`);
  if (r.isError) {
    assert.equal(a.content[0].text, r.content[0].text);
  } else {
    assert.deepEqual(a.structuredContent, r.structuredContent, name);
  }
  return a;
}
const sorted = (g) => ({ entities: g.entities.map((e) => e.name).sort(),
                         relations: g.relations.map((x) => `${x.from} ${x.relationType} ${x.to}`).sort() });

await testCase('reference sequence: create entities, relations and observations', async () => {
  await same('create_entities', { entities: [
    { name: 'Alice', entityType: 'person', observations: ['works at Acme', 'speaks Portuguese'] },
    { name: 'Bob', entityType: 'person', observations: ['likes chess'] },
    { name: 'Acme', entityType: 'company', observations: ['makes rockets'] }] });
  await same('create_entities', { entities: [
    { name: 'Alice', entityType: 'person', observations: [] },
    { name: 'Carol', entityType: 'person', observations: [] }] });
  await same('create_relations', { relations: [
    { from: 'Alice', to: 'Acme', relationType: 'works_at' },
    { from: 'Bob', to: 'Alice', relationType: 'knows' },
    { from: 'Carol', to: 'Bob', relationType: 'observation' }] });
  await same('create_relations', { relations: [{ from: 'Alice', to: 'Acme', relationType: 'works_at' }] });
  await same('add_observations', { observations: [
    { entityName: 'Alice', contents: ['likes coffee', 'speaks Portuguese'] },
    { entityName: 'Carol', contents: ['plays the cello'] }] });
  await same('add_observations', { observations: [{ entityName: 'Nobody', contents: ['x'] }] });
  await same('read_graph', {});
});

await testCase('reference sequence: search and open give the same graph answers', async () => {
  for (const query of ['acme', 'PERSON', 'rocket', 'cello', 'Portuguese', 'zebra', '']) {
    await same('search_nodes', { query });
  }
  await same('open_nodes', { names: ['Alice', 'Nobody'] });
  await same('open_nodes', { names: ['Carol'] });
});

await testCase('search_nodes also finds observations by hybrid recall', async () => {
  const [byName, refByName] = await both('search_nodes', { query: 'Carol cello' });
  assert.deepEqual(refByName.structuredContent.entities, []);
  assert.deepEqual(byName.structuredContent.entities.map((e) => e.name), ['Carol']);
  const [a, r] = await both('search_nodes', { query: 'rockets launch' });
  assert.deepEqual(r.structuredContent.entities, []);
  assert.deepEqual(a.structuredContent.entities.map((e) => e.name), ['Acme']);
  assert.deepEqual(a.structuredContent.relations, [{ from: 'Alice', to: 'Acme', relationType: 'works_at' }]);
  const wide = await data(ag, 'search_nodes', { query: 'rockets launch', semantic: true });
  assert.ok(wide.entities.some((e) => e.name === 'Acme'));
});

await testCase('reference sequence: deletes give the same graph', async () => {
  await same('delete_observations', { deletions: [
    { entityName: 'Alice', observations: ['likes coffee'] },
    { entityName: 'Nobody', observations: ['x'] }] });
  await same('delete_relations', { relations: [{ from: 'Bob', to: 'Alice', relationType: 'knows' }] });
  await same('delete_entities', { entityNames: ['Acme', 'Nobody'] });
  const g = await same('read_graph', {});
  assert.deepEqual(sorted(g.structuredContent), {
    entities: ['Alice', 'Bob', 'Carol'], relations: ['Carol observation Bob'] });
  await same('create_entities', { entities: [{ name: 'Acme', entityType: 'company', observations: [] }] });
  await same('read_graph', {});
});

await ag.close();
await ref.close();

await testCase('the graph is facts and episodes the shell reads; deletes were forgets', async () => {
  const facts = sql(graphFile, "SELECT subject || ' ' || predicate || ' ' || object FROM facts " +
                               "WHERE user_id = 'g' ORDER BY id");
  assert.equal(facts, ['Alice entity_type person', 'Alice observation works at Acme',
    'Alice observation speaks Portuguese', 'Bob entity_type person', 'Bob observation likes chess',
    'Carol entity_type person', 'Carol relation:observation Bob', 'Carol observation plays the cello',
    'Acme entity_type company'].join('\n') + '\n');
  assert.equal(sql(graphFile, "SELECT count(*) FROM episodes WHERE text IN ('Alice: likes coffee', 'Acme: makes rockets')"), '0\n');
  assert.equal(sql(graphFile, "SELECT text FROM episodes WHERE session_id = 'knowledge-graph:Carol'"),
               'Carol: plays the cello\n');
  assert.equal(sql(graphFile, "SELECT group_concat(DISTINCT session_id) FROM episodes WHERE role = 'observation'"),
               'knowledge-graph:Alice,knowledge-graph:Bob,knowledge-graph:Carol\n');
});

clearTimeout(timer);
console.log(`[node] test cases: ${passed + failed} | ${passed} passed | ${failed} failed |`);
process.exit(failed === 0 ? 0 : 1);
