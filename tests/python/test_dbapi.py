"""agentmem.connect(): the DB-API connection and cursor over SQL (docs/python.md, docs/sql.md)."""

import array
import struct

import pytest

import agentmem
from support import run_python

TURNS = [("alice", "s1", "I moved to Lisbon last spring."),
         ("alice", "s1", "My sister visits in June."),
         ("bob", "s9", "Lisbon is too hot for me.")]


def insert_turns(conn):
    conn.executemany("INSERT INTO episodes(user_id, session_id, role, text) "
                     "VALUES (?, ?, 'user', ?)", TURNS)


def test_module_globals_follow_pep_249():
    assert agentmem.apilevel == "2.0"
    assert agentmem.paramstyle == "qmark"
    assert agentmem.threadsafety in (1, 2, 3)
    assert issubclass(agentmem.IntegrityError, agentmem.DatabaseError)
    assert issubclass(agentmem.DatabaseError, agentmem.Error)


def test_an_insert_reports_rowcount_and_lastrowid_and_a_select_reads_it_back(conn):
    cur = conn.execute("INSERT INTO episodes(user_id, session_id, role, text) VALUES (?, ?, ?, ?)",
                       ("alice", "s1", "user", "I moved to Lisbon last spring."))
    assert cur.rowcount == 1
    assert cur.lastrowid == 1
    cur = conn.execute("SELECT id, user_id, session_id, role, text FROM episodes")
    assert [d[0] for d in cur.description] == ["id", "user_id", "session_id", "role", "text"]
    assert cur.fetchall() == [(1, "alice", "s1", "user", "I moved to Lisbon last spring.")]


def test_named_parameters_bind_from_a_mapping_with_any_prefix(conn):
    insert_turns(conn)
    for sql in ("SELECT text FROM episodes WHERE user_id = :u AND session_id = :s",
                "SELECT text FROM episodes WHERE user_id = @u AND session_id = $s"):
        rows = conn.execute(sql, {"u": "bob", "s": "s9"}).fetchall()
        assert rows == [("Lisbon is too hot for me.",)]


def test_a_missing_named_parameter_or_a_wrong_count_is_a_programming_error(conn):
    with pytest.raises(agentmem.ProgrammingError, match="parameter"):
        conn.execute("SELECT :a, :b", {"a": 1})
    with pytest.raises(agentmem.ProgrammingError, match="Incorrect number of bindings"):
        conn.execute("SELECT ?, ?", (1,))


def test_every_value_type_round_trips_through_parameters_and_columns(conn):
    values = (None, 0, -2**63, 2**63 - 1, 1.5, "", "naïve 東京 \U0001f600", b"\x00\x01\xff", b"")
    row = conn.execute("SELECT " + ", ".join("?" * len(values)), values).fetchone()
    assert row == values
    assert type(row[0]) is type(None) and type(row[1]) is int and type(row[4]) is float
    assert conn.execute("SELECT ?", ("a\0b",)).fetchone() == ("a\0b",)
    assert conn.execute("SELECT ?, ?", (True, False)).fetchone() == (1, 0)


def test_fetchone_fetchmany_and_iteration_stream_the_rows(conn):
    conn.execute("CREATE TEMP TABLE t(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(10)])
    cur = conn.execute("SELECT x FROM t ORDER BY x")
    assert cur.fetchone() == (0,)
    assert cur.fetchmany(3) == [(1,), (2,), (3,)]
    cur.arraysize = 2
    assert cur.fetchmany() == [(4,), (5,)]
    assert [r[0] for r in cur] == [6, 7, 8, 9]
    assert cur.fetchone() is None
    assert cur.fetchall() == []


def test_a_select_without_rows_still_has_a_description(conn):
    cur = conn.execute("SELECT id, text FROM episodes WHERE user_id = 'nobody'")
    assert [d[0] for d in cur.description] == ["id", "text"]
    assert cur.fetchall() == []
    assert conn.execute("CREATE TEMP TABLE t(x)").description is None


def test_row_factory_shapes_the_rows(conn):
    insert_turns(conn)
    conn.row_factory = lambda cur, row: {d[0]: v for d, v in zip(cur.description, row)}
    row = conn.execute("SELECT id, user_id FROM episodes WHERE id = 3").fetchone()
    assert row == {"id": 3, "user_id": "bob"}


def test_recall_runs_as_a_table_valued_function_with_its_scores(conn):
    insert_turns(conn)
    rows = conn.execute("SELECT id, score, bm25_rank, vector_rank FROM recall(?, ?, 3)",
                        ("where does she live lisbon", "alice")).fetchall()
    # only what matches: alice's turn 2 through its context, turn 1 before it
    assert [r[0] for r in rows] == [1, 2]
    assert rows[0][2:] == (1, 1)
    assert rows[0][1] > rows[1][1] > 0
    rows = conn.execute("SELECT id, score, bm25_rank, vector_rank FROM recall WHERE query = ? "
                        "AND for_user = ? AND k = 3 AND fill = 1",
                        ("where does she live lisbon", "alice")).fetchall()
    assert [r[0] for r in rows] == [1, 2]
    assert rows[0][1] > rows[1][1] > 0


def test_an_embedding_goes_in_as_a_float32_buffer(tmp_path):
    conn = agentmem.connect(tmp_path / "v.agentmem", vector_dim=4, embedder="external")
    vec = array.array("f", [0.5, -1.0, 0.25, 2.0])
    conn.execute("INSERT INTO episodes(user_id, text, embedding) VALUES ('a', 'x', ?)", (vec,))
    blob = conn.execute("SELECT embedding FROM episodes").fetchone()[0]
    assert struct.unpack("<4f", blob) == tuple(vec)
    conn.close()


def test_executescript_runs_several_statements(conn):
    conn.executescript("INSERT INTO episodes(user_id, text) VALUES ('a', 'one');"
                       "INSERT INTO blocks(user_id, name, value) VALUES ('a', 'n', 'v');")
    assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (1,)
    assert conn.execute("SELECT value FROM blocks").fetchone() == ("v",)


def test_execute_refuses_a_second_statement_but_allows_a_trailing_comment(conn):
    with pytest.raises(agentmem.ProgrammingError, match="one statement at a time"):
        conn.execute("SELECT 1; SELECT 2")
    assert conn.execute("SELECT 1; -- done").fetchone() == (1,)
    assert conn.execute("  -- nothing but a comment").fetchone() is None


def test_with_connection_commits_the_block_as_one_transaction(conn, path):
    commits_before = conn.execute("SELECT commits FROM stats()").fetchone()[0]
    with conn:
        assert conn.in_transaction
        insert_turns(conn)
    assert not conn.in_transaction
    assert conn.execute("SELECT commits FROM stats()").fetchone()[0] == commits_before + 1
    other = agentmem.connect(path, readonly=True)
    assert other.execute("SELECT count(*) FROM episodes").fetchone() == (3,)
    other.close()


def test_an_exception_inside_with_connection_rolls_everything_back(conn):
    with pytest.raises(RuntimeError):
        with conn:
            insert_turns(conn)
            raise RuntimeError("boom")
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (0,)


def test_a_nested_with_connection_joins_the_outer_transaction(conn):
    with pytest.raises(RuntimeError):
        with conn:
            with conn:
                conn.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'inner')")
            assert conn.in_transaction  # the inner block did not commit
            raise RuntimeError("roll back both")
    assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (0,)
    with conn:
        with conn:
            conn.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'kept')")
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (1,)


def test_commit_and_rollback_end_transactions_opened_by_begin_or_by_sql(conn):
    conn.begin()
    conn.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'kept')")
    conn.commit()
    conn.execute("BEGIN")
    assert conn.in_transaction
    conn.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'dropped')")
    conn.rollback()
    assert not conn.in_transaction
    conn.commit()  # no transaction: a no-op, as in sqlite3
    assert conn.execute("SELECT text FROM episodes").fetchall() == [("kept",)]


def offline_model(texts):
    raise RuntimeError("model offline")


@pytest.mark.parametrize("how", ["SQL COMMIT", "conn.commit()", "with conn:", "conn.begin()"])
def test_a_commit_that_fails_leaves_no_transaction_open(path, how):
    # The model is called at commit, for the texts still waiting for vectors: the commit fails
    # (deterministically) and the engine rolls the transaction back.
    mem = agentmem.Memory(path, embedder=offline_model, embedder_name="offline", vector_dim=4)
    conn = mem.connection
    insert = "INSERT INTO episodes(user_id, text) VALUES ('a', 'lost')"
    with pytest.raises(agentmem.OperationalError, match="model offline"):
        if how == "with conn:":
            with conn:
                conn.execute(insert)
        else:
            conn.execute("BEGIN") if how != "conn.begin()" else conn.begin()
            conn.execute(insert)
            conn.execute("COMMIT") if how == "SQL COMMIT" else conn.commit()
    assert not conn.in_transaction
    conn.commit()  # nothing open: a no-op
    with conn:     # and a new transaction begins
        assert conn.in_transaction
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM episodes").fetchone() == (0,)
    mem.close()


def test_a_commit_refused_for_an_io_error_leaves_no_transaction_open(tmp_path):
    # A child whose file size limit stops the commit's write (EFBIG: AGENTMEM_IOERR_WRITE).
    code = """
import os, resource, signal, sys
import agentmem
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
conn = agentmem.connect(sys.argv[1])
conn.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'small')")
size = os.path.getsize(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
conn.execute("BEGIN")
conn.execute("INSERT INTO episodes(user_id, text) VALUES ('a', ?)", (os.urandom(200000).hex(),))
try:
    conn.execute("COMMIT")
    print("committed")
except agentmem.OperationalError as e:
    print(e.name)
print(conn.in_transaction)
"""
    out = run_python(code, tmp_path / "f.agentmem").stdout.split()
    assert out[0].startswith("AGENTMEM_IOERR")
    assert out[1] == "False"


def test_sql_writes_and_memory_calls_on_one_handle_share_the_transaction(path):
    mem = agentmem.Memory(path)
    with pytest.raises(KeyError):
        with mem.connection:
            mem.remember_sync("alice", "through the C API")
            mem.connection.execute("INSERT INTO episodes(user_id, text) VALUES ('alice', 'SQL')")
            raise KeyError("undo both")
    assert mem.episodes_sync("alice") == []
    mem.close()


def test_a_closed_connection_refuses_every_call(path):
    conn = agentmem.connect(path)
    cur = conn.execute("SELECT 1 UNION ALL SELECT 2")  # an unfinished statement
    conn.close()
    conn.close()  # twice is harmless
    with pytest.raises(agentmem.ProgrammingError, match="closed"):
        conn.execute("SELECT 1")
    with pytest.raises(agentmem.ProgrammingError, match="closed"):
        cur.fetchone()


def test_a_read_only_connection_refuses_writes_with_the_engines_code(path):
    agentmem.connect(path).close()
    ro = agentmem.connect(path, readonly=True)
    with pytest.raises(agentmem.OperationalError) as e:
        ro.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'x')")
    assert e.value.primary == agentmem.CODES["AGENTMEM_READONLY"]
    assert e.value.name.startswith("AGENTMEM_READONLY")
    ro.close()


def test_in_memory_databases_are_private_and_vanish(tmp_path):
    a, b = agentmem.connect(":memory:"), agentmem.connect(":memory:")
    a.execute("INSERT INTO episodes(user_id, text) VALUES ('a', 'x')")
    assert b.execute("SELECT count(*) FROM episodes").fetchone() == (0,)
    a.close()
    b.close()
