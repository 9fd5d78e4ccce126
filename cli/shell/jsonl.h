// cli/shell/jsonl.h -- the JSONL record format shared by .import and .export
// (docs/shell.md, "JSONL records"). One JSON object per line:
//
//   {"kind":"episode","id":1,"user_id":"u","session_id":"s","role":"user",
//    "text":"...","ts":1671274860000000,"metadata":{...},"vector":[...]}
//   {"kind":"block","user_id":"u","name":"profile","value":"...","limit":500,
//    "pinned_order":0}
//   {"kind":"fact","id":1,"user_id":"u","subject":"u","predicate":"lives_in",
//    "object":"Lisbon","confidence":0.9,"source_episode_ids":[1],
//    "valid_from":1671274860000000,"valid_to":null}
//
// Times are unix microseconds (import also takes ISO-8601 text).
#pragma once

#include <nlohmann/json.hpp>

namespace agentmem::shell {

using Json = nlohmann::ordered_json;

}  // namespace agentmem::shell
