#!/usr/bin/env bash
# Prints the Debian archive this machine's apt is set up with (the first main archive URI of its
# sources, deb822 or one-line), without a trailing slash: builds fetch from the mirror or proxy
# apt uses, and no host name is written in the tree. PODSCOPE_DEBIAN_MIRROR overrides it. Exits 1,
# saying why, when apt names none.
set -euo pipefail
if [ -n "${PODSCOPE_DEBIAN_MIRROR:-}" ]; then
  echo "${PODSCOPE_DEBIAN_MIRROR%/}"
  exit 0
fi
uris=()
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  while read -r key rest; do
    [ "$key" = "URIs:" ] && for u in $rest; do uris+=("$u"); done
  done <"$f"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  while read -r type first second _; do
    [ "$type" = "deb" ] || continue
    # An options block ([arch=amd64 ...]) may come before the URI.
    if [[ "$first" == \[* ]]; then first="$second"; fi
    uris+=("$first")
  done <"$f"
done
for u in "${uris[@]}"; do
  u="${u%/}"
  # The main archive: not the security one, not another project's.
  case "$u" in
    *-security | *-security/*) continue ;;
    */debian) echo "$u"; exit 0 ;;
  esac
done
echo "debian_mirror.sh: apt's sources name no Debian archive (set PODSCOPE_DEBIAN_MIRROR)" >&2
exit 1
