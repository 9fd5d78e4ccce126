// engine/capi/capi_embedder.cc -- agentmem_create_embedder: the application's
// embedding callback (include/agentmem.h, "your own embedder") as an
// engine::Embedder.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agentmem.h"
#include "engine/capi/capi_internal.h"
#include "engine/memory/embedder.h"

namespace eng = agentmem::engine;
using agentmem::Status;
using agentmem::capi::Guard;

namespace {

static_assert(AGENTMEM_EMBED_BATCH_MAX == eng::Embedder::kEmbedBatch);

// Owns (fn, ctx, destroy): destroy(ctx) runs when the Database lets go of it
// (replaced, removed or closed). Not armed until the registration succeeded.
class CallbackEmbedder : public eng::Embedder {
 public:
  CallbackEmbedder(agentmem_embed_fn fn, void* ctx, void (*destroy)(void*), int dim)
      : fn_(fn), ctx_(ctx), destroy_(destroy), dim_(dim) {}
  ~CallbackEmbedder() override {
    if (armed_ && destroy_) destroy_(ctx_);
  }
  void Arm() { armed_ = true; }

  Status Embed(const std::vector<std::string_view>& texts, float* out) override {
    // The callback gets NUL-terminated copies.
    std::vector<std::string> copies(texts.begin(), texts.end());
    std::vector<const char*> ptrs;
    ptrs.reserve(copies.size());
    for (const std::string& t : copies) ptrs.push_back(t.c_str());
    char err[512] = {0};
    int rc = fn_(ctx_, static_cast<int>(ptrs.size()), ptrs.data(), dim_, out, err,
                 static_cast<int>(sizeof err));
    if (rc == AGENTMEM_OK) return Status::OK();
    err[sizeof err - 1] = '\0';
    int primary = rc & 0xff;
    int code = primary >= AGENTMEM_ERROR && primary <= AGENTMEM_ABORT ? rc : AGENTMEM_ERROR;
    std::string why = err[0] ? err : agentmem_errstr(code);
    return Status(code, "callback returned " + std::to_string(rc) + " for a batch of " +
                            std::to_string(texts.size()) + " text" +
                            (texts.size() == 1 ? "" : "s") + ": " + why);
  }

 private:
  agentmem_embed_fn fn_;
  void* ctx_;
  void (*destroy_)(void*);
  int dim_;
  bool armed_ = false;
};

const char* MetricName(int metric) {
  switch (metric) {
    case AGENTMEM_METRIC_COSINE: return "cosine";
    case AGENTMEM_METRIC_IP: return "ip";
    case AGENTMEM_METRIC_L2: return "l2";
  }
  return nullptr;
}

}  // namespace

extern "C" int agentmem_create_embedder(agentmem_db* db, const char* name, int dim, int metric,
                                        agentmem_embed_fn fn, void* ctx,
                                        void (*destroy)(void*)) {
  return Guard(db, [&](eng::Database& d) -> Status {
    AGENTMEM_RETURN_IF_ERROR(agentmem::capi::Need(name, "name"));
    const char* metric_name = MetricName(metric);
    if (!metric_name) {
      return Status(agentmem::kMisuse,
                    "metric must be AGENTMEM_METRIC_COSINE, AGENTMEM_METRIC_IP or "
                    "AGENTMEM_METRIC_L2");
    }
    if (dim < 1) return Status(agentmem::kRange, "embedder dimension must be at least 1");
    eng::VectorSpace space{name, static_cast<uint32_t>(dim), metric_name};
    std::unique_ptr<eng::Embedder> e;
    CallbackEmbedder* callback = nullptr;
    if (fn) {
      auto owned = std::make_unique<CallbackEmbedder>(fn, ctx, destroy, dim);
      callback = owned.get();
      e = std::move(owned);
    }
    AGENTMEM_RETURN_IF_ERROR(d.SetEmbedder(space, &e));
    if (callback) callback->Arm();  // the Database owns it now
    return Status::OK();
  });
}
