// bench/peers/peers.mjs -- the two embedded peers of the side-by-side bench,
// run with Debian's node on the data recall_bench exports:
//
//   lancedb     @lancedb/lancedb (embedded, on disk): one table (id, user,
//               text, vector float32[dim]); after the batched ingest the
//               table is compacted (optimize) and indexed: IVF_HNSW_SQ on the
//               vector (cosine, 1 partition, m 16, ef_construction 200, ef 64
//               at query time), an FTS index on the text, a bitmap index on
//               the user. Hybrid = its vector + full-text query fused by its
//               RRFReranker (k 60). LanceDB never calls fsync: a commit is
//               new files and a rename.
//   sqlite-vec  sqlite-vec's vec0 virtual table (embedding float[dim],
//               distance_metric=cosine, the user as a metadata column: exact
//               KNN, filtered by user during the scan) in better-sqlite3, the
//               episodes table and an FTS5 external-content index over the
//               text; BM25 as FTS5 MATCH of the OR query ORDER BY rank;
//               hybrid = reciprocal rank fusion (k 60) of the two top-k lists.
//               WAL, synchronous=FULL, mmap 1 GiB.
//
// usage: node peers.mjs --modules DIR --data DIR --system lancedb|sqlite-vec --out FILE
//   DIR/node_modules holds the packages (make bench-node); --data holds what
//   recall_bench --peers wrote (meta.json, texts.jsonl, queries.jsonl,
//   vectors.f32, qvectors.f32). The measurements go to FILE as JSON:
//   latency samples in microseconds and the hit rows of the first round,
//   so that recall_bench computes percentiles and recall@k the way it does for
//   its own systems. Progress lines go to stderr.
// node peers.mjs --open-only --modules DIR --system S --store PATH --query FILE
//   (internal) a fresh process: open the store, one hybrid recall, print a
//   JSON line with the timings.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const t0 = process.hrtime.bigint();
const nowNs = () => process.hrtime.bigint();
const sinceStartS = () => Number(nowNs() - t0) / 1e9;

function parseArgs(argv) {
  const a = {};
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i];
    if (!k.startsWith('--')) throw new Error(`peers.mjs: unexpected argument ${k}`);
    const name = k.slice(2);
    if (name === 'open-only') a[name] = true;
    else a[name] = argv[++i];
  }
  return a;
}

const args = parseArgs(process.argv);
const label = args.system || '?';
function progress(msg) {
  process.stderr.write(`[node ${sinceStartS().toFixed(1).padStart(6)}s] ${label} ${msg}\n`);
}

// LanceDB's native logger prints warnings (a table created on first add) on
// stderr unless told otherwise.
if (!process.env.LANCEDB_LOG) process.env.LANCEDB_LOG = 'error';

const requireFrom = createRequire(path.join(path.resolve(args.modules || '.'), 'package.json'));
function load(name) {
  return requireFrom(name);
}
function versionOf(name) {
  try {
    const p = requireFrom.resolve(`${name}/package.json`);
    return JSON.parse(fs.readFileSync(p, 'utf8')).version;
  } catch {
    // packages whose exports hide package.json: walk up from the entry point
    let dir = path.dirname(requireFrom.resolve(name));
    for (; dir !== path.dirname(dir); dir = path.dirname(dir)) {
      const f = path.join(dir, 'package.json');
      if (fs.existsSync(f)) {
        const j = JSON.parse(fs.readFileSync(f, 'utf8'));
        if (j.name === name) return j.version;
      }
    }
    return '?';
  }
}

// ------------------------------------------------------------------ shared helpers

// The OR query the SQLite baselines give FTS5 (bench/systems.h Fts5OrQuery):
// the distinct [a-z0-9]+ tokens of the lower-cased text, each quoted.
function fts5OrQuery(text) {
  const seen = new Set();
  const out = [];
  for (const t of text.toLowerCase().match(/[a-z0-9]+/g) || []) {
    if (seen.has(t)) continue;
    seen.add(t);
    out.push(`"${t}"`);
  }
  return out.join(' OR ');
}

// Reciprocal rank fusion of two ranked id lists (bench/systems.h Rrf): the
// sum of 1/(rrfK + rank), ties to the smaller id, top k.
function rrf(bm25, vec, k, rrfK) {
  const score = new Map();
  bm25.forEach((id, i) => score.set(id, (score.get(id) || 0) + 1 / (rrfK + i + 1)));
  vec.forEach((id, i) => score.set(id, (score.get(id) || 0) + 1 / (rrfK + i + 1)));
  return [...score.entries()]
    .sort((a, b) => (b[1] !== a[1] ? b[1] - a[1] : a[0] - b[0]))
    .slice(0, k)
    .map((e) => e[0]);
}

function userName(u) {
  return `user-${String(u).padStart(4, '0')}`;
}

function dirBytes(p) {
  let total = 0;
  const files = [];
  const walk = (q) => {
    const st = fs.statSync(q);
    if (st.isDirectory()) for (const e of fs.readdirSync(q)) walk(path.join(q, e));
    else {
      total += st.size;
      files.push(q);
    }
  };
  if (fs.existsSync(p)) walk(p);
  return { bytes: total, files: files.length };
}

function rssKiB() {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(/VmRSS:\s+(\d+)/);
  return m ? Number(m[1]) : 0;
}

// ------------------------------------------------------------------ the stores

// Every store: create(path), open(path), close(), addBatch(rows) (one
// transaction / commit), finish() (after the batched ingest: what the store
// needs before it serves queries; returns notes), recall(user|null, text,
// vec, mode, k) -> [row ids], files(path) -> bytes.
class LanceStore {
  constructor(meta) {
    this.lancedb = load('@lancedb/lancedb');
    this.arrow = load('apache-arrow');
    this.dim = meta.dim;
    this.ef = 64;
    this.rrfK = meta.rrf_k;
  }
  name() {
    return 'lancedb';
  }
  describe() {
    return (
      `@lancedb/lancedb ${versionOf('@lancedb/lancedb')} (embedded, on disk; apache-arrow ` +
      `${versionOf('apache-arrow')}): one table; after the batched ingest optimize() ` +
      `(compaction, old versions removed), then IVF_HNSW_SQ on the vector (cosine, 1 ` +
      `partition, m 16, ef_construction 200; ef ${this.ef} at query time), an FTS index on ` +
      `the text (defaults), a bitmap index on the user; hybrid = vector + full-text query ` +
      `fused by its RRFReranker (k ${this.rrfK}); filters are prefilters (where). ` +
      `A commit writes new files and renames them, without fsync.`
    );
  }
  schema() {
    const a = this.arrow;
    return new a.Schema([
      new a.Field('id', new a.Int64(), false),
      new a.Field('user', new a.Utf8(), false),
      new a.Field('text', new a.Utf8(), false),
      new a.Field(
        'vector',
        new a.FixedSizeList(this.dim, new a.Field('item', new a.Float32(), true)),
        false,
      ),
    ]);
  }
  async create(p) {
    fs.rmSync(p, { recursive: true, force: true });
    this.db = await this.lancedb.connect(p);
    this.table = await this.db.createEmptyTable('episodes', this.schema(), { mode: 'overwrite' });
    this.rerank = await this.lancedb.rerankers.RRFReranker.create(this.rrfK);
  }
  async open(p) {
    this.db = await this.lancedb.connect(p);
    this.table = await this.db.openTable('episodes');
    this.rerank = await this.lancedb.rerankers.RRFReranker.create(this.rrfK);
  }
  async close() {
    if (this.table) this.table.close();
    if (this.db) this.db.close();
    this.table = this.db = null;
  }
  // Rows as LanceDB takes them from JavaScript (built before the timer).
  prepare(rows) {
    return rows.map((r) => ({ id: r.id, user: r.user, text: r.text, vector: Array.from(r.vec) }));
  }
  async addBatch(prepared) {
    await this.table.add(prepared);
  }
  async finish() {
    const L = this.lancedb;
    let s = nowNs();
    await this.table.optimize({ cleanupOlderThan: new Date() });
    const compact = Number(nowNs() - s) / 1e9;
    s = nowNs();
    await this.table.createIndex('vector', {
      config: L.Index.hnswSq({ distanceType: 'cosine', numPartitions: 1, m: 16, efConstruction: 200 }),
    });
    const vindex = Number(nowNs() - s) / 1e9;
    s = nowNs();
    await this.table.createIndex('text', { config: L.Index.fts() });
    await this.table.createIndex('user', { config: L.Index.bitmap() });
    const tindex = Number(nowNs() - s) / 1e9;
    await this.table.optimize({ cleanupOlderThan: new Date() });
    return {
      seconds: compact + vindex + tindex,
      notes: `optimize ${compact.toFixed(2)} s, HNSW-SQ index ${vindex.toFixed(2)} s, FTS + bitmap indexes ${tindex.toFixed(2)} s`,
    };
  }
  query(user, text, vec, mode, k) {
    let q;
    if (mode === 'bm25') q = this.table.query().fullTextSearch(text);
    else {
      q = this.table.query().nearestTo(vec).distanceType('cosine').ef(this.ef);
      if (mode === 'hybrid') q = q.fullTextSearch(text).rerank(this.rerank);
    }
    if (user) q = q.where(`user = '${user}'`);
    const cols = ['id', 'user', 'text'];
    if (mode === 'bm25') cols.push('_score');
    if (mode === 'vector') cols.push('_distance');
    return q.select(cols).limit(k);
  }
  async recall(user, text, vec, mode, k) {
    const rows = await this.query(user, text, vec, mode, k).toArray();
    return rows.map((r) => Number(r.id));
  }
  size(p) {
    return dirBytes(p);
  }
}

class SqliteVecStore {
  constructor(meta) {
    this.Database = load('better-sqlite3');
    this.sqliteVec = load('sqlite-vec');
    this.dim = meta.dim;
    this.rrfK = meta.rrf_k;
  }
  name() {
    return 'sqlite-vec';
  }
  describe() {
    const db = new this.Database(':memory:');
    this.sqliteVec.load(db);
    const v = db.prepare('SELECT sqlite_version() s, vec_version() v').get();
    db.close();
    return (
      `sqlite-vec ${versionOf('sqlite-vec')} (${v.v}) in better-sqlite3 ` +
      `${versionOf('better-sqlite3')} (SQLite ${v.s}): vec0(embedding float[${this.dim}] ` +
      `distance_metric=cosine, user text) -- exact KNN, the user a metadata column filtered ` +
      `in the scan; the episodes table (user index) with an FTS5 external-content index; ` +
      `BM25 = FTS5 MATCH of the OR query ORDER BY rank; hybrid = RRF (k ${this.rrfK}) of ` +
      `the two top-k lists, then the texts. WAL, synchronous=FULL, mmap 1 GiB.`
    );
  }
  openDb(p) {
    this.db = new this.Database(p);
    this.sqliteVec.load(this.db);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('mmap_size = 1073741824');
  }
  prepareStatements() {
    const d = this.db;
    this.ins = d.prepare('INSERT INTO episodes(id, user, text) VALUES (?, ?, ?)');
    this.insFts = d.prepare('INSERT INTO episodes_fts(rowid, text) VALUES (?, ?)');
    this.insVec = d.prepare('INSERT INTO episodes_vec(rowid, embedding, user) VALUES (?, ?, ?)');
    this.bm25 = d.prepare(
      'SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY rank LIMIT ?',
    ).pluck();
    this.bm25User = d.prepare(
      'SELECT f.rowid FROM episodes_fts f JOIN episodes e ON e.id = f.rowid ' +
        'WHERE episodes_fts MATCH ? AND e.user = ? ORDER BY f.rank LIMIT ?',
    ).pluck();
    this.knn = d.prepare(
      'SELECT rowid FROM episodes_vec WHERE embedding MATCH ? AND k = ? ORDER BY distance',
    ).pluck();
    this.knnUser = d.prepare(
      'SELECT rowid FROM episodes_vec WHERE embedding MATCH ? AND k = ? AND user = ? ORDER BY distance',
    ).pluck();
    this.fetch = d.prepare('SELECT user, text FROM episodes WHERE id = ?');
    this.tx = d.transaction((rows) => {
      for (const r of rows) {
        const id = BigInt(r.id);
        this.ins.run(id, r.user, r.text);
        this.insFts.run(id, r.text);
        this.insVec.run(id, r.blob, r.user);
      }
    });
  }
  async create(p) {
    for (const f of [p, `${p}-wal`, `${p}-shm`]) fs.rmSync(f, { force: true });
    this.openDb(p);
    this.db.exec(
      'CREATE TABLE episodes(id INTEGER PRIMARY KEY, user TEXT NOT NULL, text TEXT NOT NULL);' +
        'CREATE INDEX episodes_user ON episodes(user);' +
        "CREATE VIRTUAL TABLE episodes_fts USING fts5(text, content='episodes', content_rowid='id');" +
        `CREATE VIRTUAL TABLE episodes_vec USING vec0(embedding float[${this.dim}] distance_metric=cosine, user text);`,
    );
    this.prepareStatements();
  }
  async open(p) {
    this.openDb(p);
    this.prepareStatements();
  }
  async close() {
    if (this.db) this.db.close();
    this.db = null;
  }
  prepare(rows) {
    return rows.map((r) => ({
      id: r.id,
      user: r.user,
      text: r.text,
      blob: Buffer.from(r.vec.buffer, r.vec.byteOffset, r.vec.byteLength),
    }));
  }
  async addBatch(prepared) {
    this.tx(prepared);
  }
  async finish() {
    return { seconds: 0, notes: '' };
  }
  async recall(user, text, vec, mode, k) {
    const blob = Buffer.from(vec.buffer, vec.byteOffset, vec.byteLength);
    let ids;
    const bm25 = () => {
      const q = fts5OrQuery(text);
      if (!q) return [];
      return (user ? this.bm25User.all(q, user, k) : this.bm25.all(q, k)).map(Number);
    };
    const knn = () => (user ? this.knnUser.all(blob, k, user) : this.knn.all(blob, k)).map(Number);
    if (mode === 'bm25') ids = bm25();
    else if (mode === 'vector') ids = knn();
    else ids = rrf(bm25(), knn(), k, this.rrfK);
    for (const id of ids) this.fetch.get(id);  // the hits' texts, as every system reads them
    return ids;
  }
  size(p) {
    let bytes = 0;
    let files = 0;
    for (const f of [p, `${p}-wal`, `${p}-shm`])
      if (fs.existsSync(f)) {
        bytes += fs.statSync(f).size;
        files++;
      }
    return { bytes, files };
  }
}

function makeStore(system, meta) {
  if (system === 'lancedb') return new LanceStore(meta);
  if (system === 'sqlite-vec') return new SqliteVecStore(meta);
  throw new Error(`peers.mjs: unknown system ${system} (lancedb, sqlite-vec)`);
}

// ------------------------------------------------------------------ the open child

async function openOnly() {
  const q = JSON.parse(fs.readFileSync(args.query, 'utf8'));
  const meta = { dim: q.vec.length, rrf_k: q.rrf_k };
  const vec = Float32Array.from(q.vec);
  const store = makeStore(args.system, meta);
  const a = nowNs();
  await store.open(args.store);
  const b = nowNs();
  const ids = await store.recall(null, q.text, vec, 'hybrid', q.k);
  const c = nowNs();
  await store.close();
  process.stdout.write(
    JSON.stringify({
      open_ns: Number(b - a),
      first_ns: Number(c - a),
      mono_first_ns: Number(c),
      maxrss_kib: process.resourceUsage().maxRSS,
      ids,
    }) + '\n',
  );
}

// ------------------------------------------------------------------ the bench

function loadData(dir) {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const lines = (f) =>
    fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
  const floats = (f) => {
    const b = fs.readFileSync(path.join(dir, f));
    if (b.byteOffset % 4 === 0) return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    return new Float32Array(new Uint8Array(b).buffer);  // a small file from the shared pool
  };
  const texts = lines('texts.jsonl');
  const qtexts = lines('queries.jsonl');
  const vecs = floats('vectors.f32');
  const qvecs = floats('qvectors.f32');
  if (texts.length !== meta.n || qtexts.length !== meta.queries ||
      vecs.length !== meta.n * meta.dim || qvecs.length !== meta.queries * meta.dim)
    throw new Error(`peers.mjs: the files in ${dir} do not match meta.json`);
  const row = (v, i) => v.subarray(i * meta.dim, (i + 1) * meta.dim);
  return { meta, texts, qtexts, vec: (i) => row(vecs, i), qvec: (i) => row(qvecs, i) };
}

// Rows [from, to) as the stores take them: the baselines' users (row % users).
function rowsOf(d, from, to, user) {
  const out = [];
  for (let i = from; i < to; i++) out.push({ id: i, user: user(i), text: d.texts[i], vec: d.vec(i) });
  return out;
}

async function ingest(store, d, p, n, batch, user, what) {
  await store.create(p);
  const unitUs = [];
  const start = nowNs();
  let nextReport = sinceStartS() + 10;
  for (let i = 0; i < n; i += batch) {
    const end = Math.min(n, i + batch);
    const prepared = store.prepare(rowsOf(d, i, end, user));
    const u0 = nowNs();
    await store.addBatch(prepared);
    unitUs.push(Number(nowNs() - u0) / 1e3);
    if (sinceStartS() >= nextReport || end === n) {
      progress(`${what}: ${end} / ${n} episodes`);
      nextReport = sinceStartS() + 10;
    }
  }
  // Only the add calls count: sum of the per-commit times.
  const addSeconds = unitUs.reduce((a, b) => a + b, 0) / 1e6;
  return { unit_us: unitUs, add_seconds: addSeconds, wall_seconds: Number(nowNs() - start) / 1e9 };
}

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil(0.5 * s.length) - 1))] : 0;
}

// recall_bench's TimeRecall: warm-up (at most meta.warmup queries or a tenth
// of the budget per mode), then meta.rounds passes over the queries with the
// modes interleaved; a mode stops a pass after budget/rounds seconds (at
// least 20 queries a pass).
async function timeRecall(store, d, userOfQuery, what) {
  const m = d.meta;
  const nq = d.qtexts.length;
  const runs = {};
  for (const mode of m.modes) {
    runs[mode] = { wall_us: [], cpu_us: [], round_p50_us: [], first_round: [], by_query_us: Array.from({ length: nq }, () => []) };
    const w0 = sinceStartS();
    for (let i = 0; i < m.warmup && sinceStartS() - w0 < m.budget / 10; i++) {
      const q = i % nq;
      await store.recall(userOfQuery(q), d.qtexts[q], d.qvec(q), mode, m.k);
    }
  }
  const perRound = m.budget / m.rounds;
  for (let round = 0; round < m.rounds; round++) {
    for (const mode of m.modes) {
      const run = runs[mode];
      const thisRound = [];
      const r0 = sinceStartS();
      for (let q = 0; q < nq; q++) {
        if (q >= 20 && sinceStartS() - r0 > perRound) break;
        const c0 = process.cpuUsage();
        const a = nowNs();
        const ids = await store.recall(userOfQuery(q), d.qtexts[q], d.qvec(q), mode, m.k);
        const us = Number(nowNs() - a) / 1e3;
        const c1 = process.cpuUsage(c0);
        run.wall_us.push(us);
        run.cpu_us.push(c1.user + c1.system);
        thisRound.push(us);
        if (run.first_round.length <= q) run.first_round.push(ids);
        run.by_query_us[q].push(us);
      }
      run.round_p50_us.push(median(thisRound));
      progress(`${what}: round ${round + 1}/${m.rounds} ${mode.padEnd(6)} ${thisRound.length} queries  p50 ${(median(thisRound) / 1e3).toFixed(3)} ms`);
    }
  }
  for (const mode of m.modes) {
    const run = runs[mode];
    run.distinct_queries = run.by_query_us.filter((v) => v.length > 0).length;
    delete run.by_query_us;
  }
  return runs;
}

async function bench() {
  const d = loadData(args.data);
  const m = d.meta;
  const system = args.system;
  const out = { system, node: process.version };
  const store = makeStore(system, m);
  out.describe = store.describe();
  progress(out.describe);
  const ext = system === 'sqlite-vec' ? '.sqlite' : '';
  const storePath = (what) => path.join(m.workdir, `${what}-${system}${ext}`);
  const mainUser = (i) => userName(i % m.users);
  const rss0 = rssKiB();

  // 1. one episode per transaction
  if (m.single > 0) {
    const n = Math.min(m.single, m.n);
    const p = storePath('single');
    progress(`ingest: ${n} episodes, one per transaction -> ${p}`);
    const r = await ingest(store, d, p, n, 1, mainUser, 'single');
    await store.close();
    out.single = { count: n, seconds: r.add_seconds, unit_us: r.unit_us };
    fs.rmSync(p, { recursive: true, force: true });
    for (const f of [`${p}-wal`, `${p}-shm`]) fs.rmSync(f, { force: true });
  }

  // 2. N episodes, batch per transaction, then what the store needs to serve
  const mainFile = storePath(`main-n${m.n}`);
  progress(`ingest: ${m.n} episodes, ${m.batch} per transaction -> ${mainFile}`);
  const ing = await ingest(store, d, mainFile, m.n, m.batch, mainUser, 'batched');
  const fin = await store.finish();
  const c0 = nowNs();
  await store.close();
  const closeSeconds = Number(nowNs() - c0) / 1e9;
  out.batched = {
    add_seconds: ing.add_seconds,
    finish_seconds: fin.seconds,
    finish_notes: fin.notes,
    close_seconds: closeSeconds,
    unit_us: ing.unit_us,
  };
  progress(`ingest: ${ing.add_seconds.toFixed(1)} s of commits + ${fin.seconds.toFixed(1)} s ${fin.notes}`);

  // 3. recall after a reopen
  const o0 = nowNs();
  await store.open(mainFile);
  out.reopen_ms = Number(nowNs() - o0) / 1e6;
  out.recall = await timeRecall(store, d, () => null, 'recall');

  // 4. open -> first recall in fresh processes
  if (m.open_runs > 0) {
    const qf = path.join(m.workdir, `query-${system}.json`);
    fs.writeFileSync(qf, JSON.stringify({ text: d.qtexts[0], vec: Array.from(d.qvec(0)), k: m.k, rrf_k: m.rrf_k }));
    const expect = out.recall.hybrid && out.recall.hybrid.first_round.length ? out.recall.hybrid.first_round[0].join(',') : '';
    const runs = [];
    let same = true;
    progress(`open: 1 untimed + ${m.open_runs} timed child processes (warm page cache)`);
    // One child: open the store, one hybrid recall; null when it failed.
    const child = (what) => {
      const spawnNs = nowNs();
      const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--open-only', '--modules', args.modules,
        '--system', system, '--store', mainFile, '--query', qf], { encoding: 'utf8' });
      if (r.status !== 0) {
        progress(`${what} failed: ${r.stderr}`);
        return null;
      }
      const j = JSON.parse(r.stdout.trim().split('\n').pop());
      if (expect && j.ids.join(',') !== expect) same = false;
      return { open_ms: j.open_ns / 1e6, first_ms: j.first_ns / 1e6, since_spawn_ms: Number(BigInt(j.mono_first_ns) - spawnNs) / 1e6, maxrss_kib: j.maxrss_kib };
    };
    for (let i = 0; i <= m.open_runs; i++) {
      const run = child(`open run ${i}`);
      if (!run || i === 0) continue;
      runs.push(run);
      progress(`open run ${i}: open ${run.open_ms.toFixed(1)} ms, first hit ${run.first_ms.toFixed(1)} ms, ${run.since_spawn_ms.toFixed(1)} ms after spawn`);
    }
    // The same after the machine idled: each child after a sleep.
    const idle = [];
    const idleRuns = m.idle_open_runs || 0;
    if (idleRuns > 0) progress(`open after idling: ${idleRuns} child processes, each after ${m.idle_seconds} s of sleep`);
    for (let i = 1; i <= idleRuns; i++) {
      await new Promise((resolve) => setTimeout(resolve, m.idle_seconds * 1000));
      const run = child(`open run after idling ${i}`);
      if (!run) continue;
      idle.push(run);
      progress(`open after idling, run ${i}: first hit ${run.first_ms.toFixed(1)} ms after open began`);
    }
    out.open = { runs, same, idle };
    fs.rmSync(qf, { force: true });
  }

  // 5. filtered to one user (the same store: the users are in it)
  if (m.filter) {
    out.filtered = await timeRecall(store, d, (q) => userName(q % m.users), 'filtered');
  }
  await store.close();

  // 6. size and memory
  out.size = store.size(mainFile);
  out.rss_before_kib = rss0;
  out.peak_rss_kib = process.resourceUsage().maxRSS;
  fs.rmSync(mainFile, { recursive: true, force: true });
  for (const f of [`${mainFile}-wal`, `${mainFile}-shm`]) fs.rmSync(f, { force: true });
  fs.writeFileSync(args.out, JSON.stringify(out));
  progress(`wrote ${args.out}`);
}

try {
  if (args['open-only']) await openOnly();
  else await bench();
} catch (e) {
  process.stderr.write(`peers.mjs ${label}: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
}
