"""Concurrency: many asyncio tasks on one Memory, and two processes on one file."""

import asyncio
import subprocess
import sys

import pytest

import agentmem
from support import python_env

USERS = [f"user{i}" for i in range(5)]

# A child process: remember N turns for USER in FILE, one commit each; print the ids.
WRITER = """
import sys, agentmem
path, user, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
mem = agentmem.Memory(path)
print(" ".join(str(mem.remember_sync(user, f"{user} turn {i} about Lisbon")) for i in range(n)))
assert len(mem.episodes_sync(user)) == n
mem.close()
"""

# A child process: hold the write lock (an open transaction with a write) until stdin closes.
LOCK_HOLDER = """
import sys, agentmem
mem = agentmem.Memory(sys.argv[1])
mem.connection.begin()
mem.remember_sync("holder", "uncommitted")
print("locked", flush=True)
sys.stdin.read()
mem.connection.commit()
mem.close()
"""


def test_many_asyncio_tasks_remember_and_recall_on_one_memory(mem):
    async def user_task(user):
        ids = []
        for i in range(10):
            ids.append(await mem.remember(user, f"{user} says turn {i} about Lisbon"))
            hits = await mem.recall_scored(user, "lisbon turn", 50)
            assert {h.user_id for h in hits} == {user}  # never another task's user
            assert ids[-1] in {h.id for h in hits}      # its own commit is found at once
        return ids

    async def run():
        return await asyncio.gather(*(user_task(u) for u in USERS))

    results = asyncio.run(run())
    all_ids = [i for ids in results for i in ids]
    assert len(set(all_ids)) == 50
    for user, ids in zip(USERS, results):
        assert [e.id for e in mem.episodes_sync(user)] == ids


def test_asyncio_tasks_mixing_every_kind_of_write_see_consistent_results(mem):
    async def worker(n):
        user = f"w{n}"
        await mem.set_block(user, "counter", "0")
        for i in range(1, 6):
            await mem.set_block(user, "counter", str(i))
            await mem.add_fact(user, user, "step", str(i))
            await mem.remember_many(user, [f"a{i}", f"b{i}"])
        return user

    async def run():
        return await asyncio.gather(*(worker(n) for n in range(6)))

    for user in asyncio.run(run()):
        assert mem.get_block_sync(user, "counter").value == "5"
        assert len(mem.facts_sync(user)) == 5
        assert len(mem.episodes_sync(user)) == 10


def test_the_event_loop_keeps_running_while_c_calls_are_in_flight(mem):
    async def run():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(ticker())
        await asyncio.gather(*(mem.remember("alice", f"turn {i}") for i in range(30)))
        stop.set()
        await t
        return ticks

    assert asyncio.run(run()) > 1


def test_two_processes_writing_one_file_lose_nothing(path):
    agentmem.Memory(path).close()
    children = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), user, "40"],
                                 env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for user in ("alice", "bob")]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append([int(x) for x in out.split()])
    mem = agentmem.Memory(path)
    for user, ids in zip(("alice", "bob"), outputs):
        assert [e.id for e in mem.episodes_sync(user)] == ids
        assert {h.user_id for h in mem.recall_scored_sync(user, "lisbon turn", 100)} == {user}
    assert len(set(outputs[0]) | set(outputs[1])) == 80
    mem.close()


def test_a_commit_in_another_process_is_seen_by_the_next_recall(mem, path):
    assert mem.recall_scored_sync("alice", "lisbon") == []
    subprocess.run([sys.executable, "-c", WRITER, str(path), "alice", "3"], env=python_env(),
                   check=True, capture_output=True, timeout=120)
    assert len(mem.recall_scored_sync("alice", "lisbon")) == 3


def test_a_writer_blocked_by_another_process_gets_busy_and_then_succeeds(path):
    agentmem.Memory(path).close()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(path)], env=python_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        mem = agentmem.Memory(path, busy_timeout=0)
        with pytest.raises(agentmem.OperationalError) as e:
            mem.remember_sync("alice", "blocked")
        assert e.value.primary == agentmem.CODES["AGENTMEM_BUSY"]
        assert mem.recall_scored_sync("holder", "uncommitted") == []  # readers never block
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=60) == 0
    mem.remember_sync("alice", "now it goes through")
    assert [e.text for e in mem.episodes_sync("holder")] == ["uncommitted"]
    mem.close()
