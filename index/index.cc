// index/index.cc -- anchor translation unit so the index library is never empty
// while its modules land one by one (issue #3).
namespace agentmem::index {
int IndexLayerVersion() { return 1; }
}  // namespace agentmem::index
