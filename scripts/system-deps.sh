#!/usr/bin/env bash
# System packages the browser test, the classroom view and the static site need from Debian:
#   chromium        the browser Playwright drives (/usr/bin/chromium; Playwright never downloads one)
#   fonts-noto-cjk  a CJK font, so 人工智能 renders in the browser (matplotlib uses the font in assets/)
# Installs only what is missing: as root directly, otherwise through sudo when it is available.
# KVLAB_CHROMIUM names another Chromium to drive instead (then only the font is installed here).
set -euo pipefail

missing=()
CHROMIUM="${KVLAB_CHROMIUM:-/usr/bin/chromium}"  # the browser the tests drive (tests/browser/kvlab_browser.py)
[ -x "$CHROMIUM" ] || [ -n "${KVLAB_CHROMIUM:-}" ] || missing+=(chromium)
if ! fc-list 2>/dev/null | grep -qi "noto.*cjk"; then
    dpkg -s fonts-noto-cjk >/dev/null 2>&1 || missing+=(fonts-noto-cjk)
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "system-deps: chromium and fonts-noto-cjk are installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)  # may ask for your password
else
    echo "system-deps: missing Debian packages: ${missing[*]}" >&2
    echo "system-deps: run as root (or with sudo): apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "system-deps: installing ${missing[*]}"
if ! "${SUDO[@]}" apt-get install -y "${missing[@]}"; then
    # A fresh machine has no package lists yet: fetch them, then try once more.
    "${SUDO[@]}" apt-get update
    "${SUDO[@]}" apt-get install -y "${missing[@]}"
fi
[ -x "$CHROMIUM" ] || { echo "system-deps: $CHROMIUM is still missing after the install" >&2; exit 1; }
