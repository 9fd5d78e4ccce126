"""Errors: each failed C call raises the class its code maps to, with the engine's code and message."""

import threading

import pytest

import agentmem
from agentmem import CODES


def test_a_block_value_over_its_limit_is_an_integrity_error_with_the_engines_message(mem):
    with pytest.raises(agentmem.IntegrityError) as e:
        mem.set_block_sync("alice", "profile", "x" * 20, limit=10)
    err = e.value
    assert err.code == CODES["AGENTMEM_CONSTRAINT"] and err.name == "AGENTMEM_CONSTRAINT"
    assert "limit is 10" in err.message
    assert "AGENTMEM_CONSTRAINT" in str(err)
    assert mem.get_block_sync("alice", "profile") is None  # nothing was written


def test_a_vector_of_the_wrong_dimension_is_a_data_error_with_the_extended_code(mem):
    with pytest.raises(agentmem.DataError) as e:
        mem.remember_sync("alice", "x", vector=[1.0, 2.0])
    assert e.value.code == CODES["AGENTMEM_MISMATCH_DIMENSION"]
    assert e.value.primary == CODES["AGENTMEM_MISMATCH"]
    assert e.value.name == "AGENTMEM_MISMATCH_DIMENSION"


def test_metadata_that_is_not_json_is_refused(mem):
    with pytest.raises(agentmem.DataError) as e:
        mem.remember_sync("alice", "x", metadata="{not json")
    assert e.value.code == CODES["AGENTMEM_MISMATCH_JSON"]
    assert mem.episodes_sync("alice") == []


def test_a_confidence_outside_0_to_1_is_a_range_error(mem):
    with pytest.raises(agentmem.DataError) as e:
        mem.add_fact_sync("alice", "alice", "likes", "tea", confidence=1.5)
    assert e.value.code == CODES["AGENTMEM_RANGE"]


def test_an_empty_block_name_is_a_constraint_error(mem):
    with pytest.raises(agentmem.IntegrityError):
        mem.set_block_sync("alice", "", "v")


def test_sql_errors_carry_sqlites_message_and_agentmem_error(conn):
    with pytest.raises(agentmem.OperationalError) as e:
        conn.execute("SELECT * FROM no_such_table")
    assert e.value.code == CODES["AGENTMEM_ERROR"]
    assert "no such table: no_such_table" in e.value.message
    with pytest.raises(agentmem.OperationalError, match="CREATE is not supported on the main"):
        conn.execute("CREATE TABLE t(x)")


def test_opening_a_file_that_is_not_a_database_says_so(tmp_path):
    junk = tmp_path / "junk.agentmem"
    junk.write_bytes(b"this is not an agentmem file" * 200)
    with pytest.raises(agentmem.CorruptError) as e:
        agentmem.connect(junk)
    assert e.value.code == CODES["AGENTMEM_NOTADB"]


def test_opening_a_missing_file_without_create_fails_with_cantopen(tmp_path):
    with pytest.raises(agentmem.OperationalError) as e:
        agentmem.Memory(tmp_path / "missing.agentmem", create=False)
    assert e.value.primary == CODES["AGENTMEM_CANTOPEN"]
    with pytest.raises(agentmem.OperationalError):
        agentmem.connect(tmp_path / "no" / "such" / "dir.agentmem")


def test_bad_open_options_are_misuse(tmp_path):
    with pytest.raises(agentmem.ProgrammingError) as e:
        agentmem.Memory(tmp_path / "x.agentmem", sync="sometimes")
    assert e.value.code == CODES["AGENTMEM_MISUSE"]
    assert "sync" in e.value.message


def test_a_file_created_with_one_vector_space_refuses_another(path):
    agentmem.Memory(path, vector_dim=8, embedder="m").close()
    with pytest.raises(agentmem.DataError) as e:
        agentmem.Memory(path, vector_dim=16, embedder="m")
    assert e.value.primary == CODES["AGENTMEM_MISMATCH"]


def test_the_wrapper_refuses_what_it_cannot_pass_before_calling_c(mem):
    with pytest.raises(ValueError, match="NUL"):
        mem.remember_sync("alice", "a\0b")
    with pytest.raises(TypeError, match="user_id must be str"):
        mem.remember_sync(42, "x")
    with pytest.raises(ValueError, match="mode"):
        mem.recall_scored_sync("alice", "x", mode="fuzzy")
    with pytest.raises(TypeError, match="unknown recall option"):
        mem.recall_scored_sync("alice", "x", sesion_id="s1")


def test_errors_are_attributed_to_the_call_that_failed_when_threads_share_a_handle(mem):
    """The handle's errmsg is per handle: a success in another thread must not replace it."""
    failures = []

    def fail_repeatedly():
        for _ in range(200):
            try:
                mem.set_block_sync("alice", "b", "x" * 20, limit=10)
            except agentmem.IntegrityError as e:
                failures.append(e.message)

    def succeed_repeatedly():
        for i in range(200):
            mem.set_block_sync("bob", "b", str(i))
            mem.recall_scored_sync("bob", "anything")

    threads = [threading.Thread(target=fail_repeatedly), threading.Thread(target=succeed_repeatedly)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(failures) == 200
    assert all("limit is 10" in m for m in failures)


def test_every_primary_code_maps_to_a_dbapi_class():
    for name, code in CODES.items():
        if code in (0, 100, 101):
            continue
        err = agentmem.errors.from_code(code, "m")
        assert isinstance(err, agentmem.DatabaseError), name
        assert err.name == name


def test_a_nul_character_in_a_name_or_text_is_a_mismatch_on_every_path(mem, tmp_path):
    for call in (lambda: mem.remember_sync("alice\0evil", "x"),
                 lambda: mem.remember_sync("alice", "before\0after"),
                 lambda: mem.set_block_sync("alice", "pro\0file", "v"),
                 lambda: mem.add_fact_sync("alice", "alice", "likes", "tea\0coffee")):
        with pytest.raises(agentmem.DataError) as e:
            call()
        assert e.value.code == CODES["AGENTMEM_MISMATCH"] and "NUL" in e.value.message
    # Through SQL the value arrives whole, with its length: the engine refuses it.
    with pytest.raises(agentmem.DataError) as e:
        mem.connection.execute("INSERT INTO episodes(user_id, text) VALUES(?, 'x')",
                               ("alice\0evil",))
    assert e.value.primary == CODES["AGENTMEM_MISMATCH"]
    # And through an import, where "\u0000" is a NUL once read.
    with agentmem.Memory(str(tmp_path / "other.agentmem")) as other:
        other.remember_sync("alice", "beforeXafter")
        jsonl = other.export_sync("alice")
    assert "beforeXafter" in jsonl
    with pytest.raises(agentmem.DataError) as e:
        mem.import_jsonl_sync(jsonl.replace("beforeXafter", "before\\u0000after"))
    assert e.value.primary == CODES["AGENTMEM_MISMATCH"]
    assert mem.episodes_sync("alice") == []
    assert mem.connection.execute("SELECT count(*) FROM episodes").fetchone() == (0,)


def test_metadata_nested_deeper_than_64_levels_is_refused_and_every_read_still_works(mem):
    deep = 1
    for _ in range(100):
        deep = {"k": [deep]}
    with pytest.raises(agentmem.DataError) as e:
        mem.remember_sync("alice", "x", metadata=deep)
    assert e.value.code == CODES["AGENTMEM_TOOBIG"] and "limit is 64" in e.value.message
    with pytest.raises(agentmem.DataError):
        mem.remember_sync("alice", "x", metadata="[" * 5000 + "]" * 5000)
    ok = 1
    for _ in range(32):
        ok = {"k": [ok]}
    mem.remember_sync("alice", "y", metadata=ok)
    assert [ep.metadata for ep in mem.episodes_sync("alice")] == [ok]
