// Escaping for the XML and HTML reports: every string that came from a trace, a log or the
// user's source passes through here before it reaches markup.
#pragma once

#include <string>
#include <string_view>

namespace streamrace::report {

// Escapes & < > " ' and replaces characters XML 1.0 forbids (C0 controls other than tab,
// newline and carriage return) with U+FFFD. Safe in element text and quoted attributes.
std::string escape_markup(std::string_view s);

// For text inside an inline <script type="application/json">: escapes "<" as \u003c so that
// no "</script>" or "<!--" can close the element early.
std::string escape_script_json(std::string_view json);

}  // namespace streamrace::report
