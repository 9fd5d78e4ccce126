// tests/reliability/workload.cc -- see workload.h.
#include "tests/reliability/workload.h"

#include <random>

namespace agentmem::reliability {

engine::Options WorkloadOptions(engine::Env* env, test::TestClock* clock) {
  engine::Options o;
  o.env = env;
  o.sync = engine::SyncMode::kFull;
  o.salt = kSalt;
  o.clock = clock->Fn();
  o.space = engine::VectorSpace{"test-hash", kDim, "cosine"};
  o.space_given = true;
  o.busy_timeout_ms = 2000;
  return o;
}

TxnPlan PlanTxn(uint64_t seed, uint64_t t) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + t);
  TxnPlan p;
  uint64_t pick = rng() % 100;
  auto episode = [&](uint64_t j) {
    Op op;
    op.kind = Op::kEpisode;
    op.episode = test::RandomEpisode(rng, kDim, t * 100 + j);
    return op;
  };
  if (pick < 50) {
    p.ops.push_back(episode(0));
  } else if (pick < 62) {
    Op op;
    op.kind = Op::kBlock;
    op.block = test::RandomBlock(rng, t);
    p.ops.push_back(op);
  } else if (pick < 72) {
    Op op;
    op.kind = Op::kFact;
    op.fact = test::RandomFact(rng, t);
    p.ops.push_back(op);
  } else {
    p.explicit_txn = true;
    uint64_t n = 2 + rng() % 6;
    for (uint64_t j = 0; j < n; j++) p.ops.push_back(episode(j));
    Op b;
    b.kind = Op::kBlock;
    b.block = test::RandomBlock(rng, t);
    p.ops.push_back(b);
    Op f;
    f.kind = Op::kFact;
    f.fact = test::RandomFact(rng, t);
    p.ops.push_back(f);
  }
  return p;
}

test::Txn ExpectTxn(const test::Oracle& before, const TxnPlan& plan, uint64_t t) {
  test::Txn txn;
  int64_t now = TxnClockBase(t);
  for (const Op& op : plan.ops) {
    now += 1000;
    switch (op.kind) {
      case Op::kEpisode:
        txn.episodes.push_back(before.ExpectEpisode(op.episode, now, txn));
        break;
      case Op::kBlock:
        txn.blocks.push_back(before.ExpectBlock(op.block, now, txn));
        break;
      case Op::kFact:
        txn.facts.push_back(before.ExpectFact(op.fact, now, txn));
        break;
    }
  }
  return txn;
}

Status RunTxn(engine::Database* db, test::TestClock* clock, const TxnPlan& plan, uint64_t t,
              std::vector<uint64_t>* episode_ids) {
  episode_ids->clear();
  clock->now = TxnClockBase(t);
  if (plan.explicit_txn) AGENTMEM_RETURN_IF_ERROR(db->Begin());
  for (const Op& op : plan.ops) {
    clock->Tick();
    Status s;
    uint64_t id = 0;
    switch (op.kind) {
      case Op::kEpisode:
        s = db->Remember(op.episode, &id);
        if (s.ok()) episode_ids->push_back(id);
        break;
      case Op::kBlock:
        s = db->SetBlock(op.block);
        break;
      case Op::kFact:
        s = db->AssertFact(op.fact, &id);
        break;
    }
    if (!s.ok()) {
      if (plan.explicit_txn) db->Rollback().IgnoreError();
      return s;
    }
  }
  if (plan.explicit_txn) AGENTMEM_RETURN_IF_ERROR(db->Commit());
  return Status::OK();
}

}  // namespace agentmem::reliability
