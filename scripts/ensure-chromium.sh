#!/usr/bin/env bash
# Install Debian's chromium for the browser tests when it is missing (quiet; nothing when present).
# Run by ./test. Without root or apt-get it only says so; the browser tests then skip.
set -uo pipefail
if [[ -x /usr/bin/chromium ]]; then
    exit 0
fi
if [[ "$(id -u)" -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "parvox: /usr/bin/chromium missing and cannot be installed here; browser tests will skip" >&2
    exit 0
fi
echo "parvox: installing Debian's chromium for the browser tests" >&2
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; then
    echo "parvox: could not install chromium; browser tests will skip" >&2
fi
exit 0
