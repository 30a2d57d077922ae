#!/usr/bin/env bash
# Renders the HTML report of the bundled DeepSpeed 0.14.2 recording in headless Chromium at
# 1000 and 1600 px and writes docs/images/html-report-{1000,1600}.png (look at them: nothing
# may be clipped), then checks in the browser that no element is wider than the page. Skips
# (exit 0, says so) when chromium is not installed (Debian: apt-get install -y chromium).
#
#   scripts/html_screenshots.sh [--build DIR] [--check-only]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
shots=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift ;;
    --check-only) shots=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "html_screenshots: chromium not installed, skipped"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$root"
"$build/bin/streamrace" analyze samples/traces/deepspeed-0.14.2 -f html="$work/report.html" >/dev/null 2>&1 || true
run() { timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars "$@" 2>/dev/null; }
status=0
for width in 1000 1600; do
  if [ "$shots" = 1 ]; then
    mkdir -p docs/images
    png="$root/docs/images/html-report-$width.png"
    run --window-size="$width,1800" --screenshot="$png" "file://$work/report.html" >/dev/null
    # Keep the committed images small: 64 colours are plenty for this page.
    if command -v pngquant >/dev/null; then pngquant --force --speed 1 --output "$png" 64 -- "$png"; fi
  fi
  # The page's widest element against the viewport, read back from the DOM: a copy of the
  # page with a script that writes the overflow into the title (the report itself has none).
  sed 's|</body>|<script>let w=0,n="";for(const e of document.querySelectorAll("main *")){const r=e.getBoundingClientRect();if(r.right>w){w=r.right;n=e.tagName+"."+e.className}}document.title="right="+Math.ceil(w)+" page="+document.documentElement.clientWidth+" widest="+n;</script></body>|; s|default-src .none.;|script-src '"'"'unsafe-inline'"'"';|' \
    "$work/report.html" >"$work/probe.html"
  title="$(run --window-size="$width,2400" --dump-dom "file://$work/probe.html" | grep -o '<title>right=[^<]*</title>' | sed 's|</*title>||g')"
  right="$(sed -n 's/right=\([0-9]*\).*/\1/p' <<<"$title")"
  page="$(sed -n 's/.*page=\([0-9]*\).*/\1/p' <<<"$title")"
  if [ -z "$right" ] || [ "$right" -gt "$page" ]; then
    echo "html_screenshots: at $width px an element overflows the page: $title" >&2
    status=1
  else
    echo "html_screenshots: $width px: nothing wider than the page ($title)"
  fi
done
exit $status
