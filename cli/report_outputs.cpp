// Report outputs shared by `analyze` and `merge` (see report_outputs.h).
#include "cli/report_outputs.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "report/closing_summary.h"
#include "report/output_file.h"
#include "report/text_report.h"

namespace streamrace::cli {

bool parse_report_outputs(const std::string& command, const ReportOutputArgs& args, std::vector<ReportOutput>& outs) {
  outs.clear();
  for (const auto& spec : args.formats.empty() ? std::vector<std::string>{"text"} : args.formats) {
    // "json=out.json" -> ("json", "out.json"); "text" -> ("text", "").
    const auto eq = spec.find('=');
    ReportOutput o{spec.substr(0, eq), eq == std::string::npos ? "" : spec.substr(eq + 1)};
    if (!report::is_format(o.format)) {
      std::cerr << "streamrace " << command << ": unknown format '" << o.format << "' (choose from:";
      for (const auto& n : report::format_names()) std::cerr << " " << n;
      std::cerr << ")\n";
      return false;
    }
    outs.push_back(std::move(o));
  }
  if (!args.output.empty()) {
    if (outs.size() != 1 || !outs[0].file.empty()) {
      std::cerr << "streamrace " << command << ": -o goes with a single --format; use --format NAME=FILE for several\n";
      return false;
    }
    outs[0].file = args.output;
  }
  return true;
}

bool write_report_outputs(const std::string& command, const std::vector<ReportOutput>& outs,
                          const ReportOutputArgs& args, const analysis::AnalysisResult& result,
                          report::ReportOptions ro) {
  bool any_stdout = false;
  for (const auto& [name, file] : outs) {
    if (file.empty() || file == "-") {
      any_stdout = true;
      ro.color = name == "text" && !args.no_color && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR");
      report::write_format(name, std::cout, result, ro);
      if (name == "text") std::cout << report::closing_summary(result) << "\n";
      continue;
    }
    ro.color = false;
    std::ostringstream text;
    report::write_format(name, text, result, ro);
    if (name == "text") text << report::closing_summary(result) << "\n";
    try {
      report::OutputOptions oo;
      oo.follow_symlink = args.force_output;
      report::write_output_file(file, text.str(), oo);
    } catch (const report::OutputError& e) {
      std::cerr << "streamrace " << command << ": error: " << e.what() << "\n";
      return false;
    }
  }
  // When the report went to files only, still say the verdict on the terminal.
  if (!any_stdout) std::cerr << report::summary_line(result) << "\n";
  return true;
}

}  // namespace streamrace::cli
