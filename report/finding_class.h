// Finding classes (race kind × confidence) and their stable rule ids, shared by SARIF rules,
// JUnit test cases and the HTML report. Ids never change meaning once released.
#pragma once

#include <string>
#include <vector>

#include "analyzer/finding.h"

namespace streamrace::report {

struct FindingClass {
  const char* rule_id;  // "SR1001"
  const char* name;     // "CrossStreamWriteAfterRead" (SARIF reportingDescriptor.name)
  analysis::RaceKind kind;
  analysis::Confidence confidence;
  const char* title;        // one line
  const char* description;  // a paragraph
};

// All classes: SR1001..SR1003 certain WAR/WAW/RAW, SR2001..SR2003 possible, then the host-access
// classes SR1004 (host write during a copy), SR1005 (host read of a pending destination) and their
// possible twins SR2004, SR2005.
const std::vector<FindingClass>& finding_classes();
const FindingClass& finding_class(const analysis::Finding& f);
size_t finding_class_index(const analysis::Finding& f);

// One line for a finding: "write-after-read race: cudaMemcpyAsync on stream 0x1000
// (non-blocking) writes 4096 bytes that ncclAllReduce on stream 0x2000 (non-blocking) reads".
std::string headline(const analysis::Finding& f);
// "reads", "writes", "reads or writes".
std::string verb(const std::string& direction);

// `path` relative to `root` when it lies under it (lexically, after normalising), else empty.
std::string relative_source_path(const std::string& path, const std::string& root);

// The path a report writes for a frame's file relative to `root`: relative_source_path for
// an absolute path, the path itself for a relative one (taken as relative to the root, where
// the traced job ran), empty when the file is outside the root or no root is given.
std::string source_uri_path(const std::string& path, const std::string& root);

// The frame a report points at for an access: the innermost frame under `root` that is not
// in an installed package, else the innermost Python frame, else the innermost frame.
// Null for an empty stack.
const analysis::Frame* primary_frame(const analysis::Access& a, const std::string& root);

}  // namespace streamrace::report
