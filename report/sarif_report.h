// SARIF 2.1.0 for GitHub code scanning: one rule per finding class, one result per finding
// with both stacks (codeFlows and stacks), partialFingerprints from Finding::fingerprint.
#pragma once

#include <ostream>

#include "analyzer/finding.h"
#include "report/formats.h"

namespace streamrace::report {

// The key under partialFingerprints; bump the suffix if the fingerprint recipe changes.
inline constexpr const char* kSarifFingerprintKey = "streamraceFingerprint/v1";

void write_sarif(std::ostream& out, const analysis::AnalysisResult& result, const ReportOptions& opts);

}  // namespace streamrace::report
