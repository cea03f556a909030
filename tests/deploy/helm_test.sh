#!/usr/bin/env bash
# The Helm chart rendered and validated offline (tests/deploy/helm/render_test.go), with Debian's
# Go, Sprig, yaml.v3 and gojsonschema: Helm itself is not packaged for the build machines.
#   helm_test.sh COORDINATOR_BINARY AGENT_BINARY BUILD_DIR
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOPATH_DEBIAN=/usr/share/gocode
command -v go >/dev/null || { echo "FAIL: go is missing: install Debian's golang-go (scripts/test.sh does)" >&2; exit 1; }
for dir in github.com/Masterminds/sprig gopkg.in/yaml.v3 github.com/xeipuuv/gojsonschema; do
  [ -d "$GOPATH_DEBIAN/src/$dir" ] || {
    echo "FAIL: $GOPATH_DEBIAN/src/$dir is missing: install golang-github-masterminds-sprig-dev," \
      "golang-gopkg-yaml.v3-dev and golang-github-xeipuuv-gojsonschema-dev (scripts/test.sh does)" >&2
    exit 1
  }
done
# The chart's appVersion is podscope's: the one in the project() line of CMakeLists.txt, which the
# binaries' --version print (the binaries must say it too).
version="$(sed -n 's/^project(podscope VERSION \([0-9.]*\).*/\1/p' "$HERE/../../CMakeLists.txt")"
chart="$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' "$HERE/../../helm/podscope/Chart.yaml")"
[ -n "$version" ] && [ "$chart" = "$version" ] || {
  echo "FAIL: helm/podscope/Chart.yaml appVersion \"$chart\" is not CMakeLists.txt's version \"$version\"" >&2
  exit 1
}
for binary in "$1" "$2"; do
  said="$("$binary" --version)"
  [ "${said##* }" = "$version" ] || { echo "FAIL: $binary --version says \"$said\", not $version" >&2; exit 1; }
done
cd "$HERE/helm"
# GOPATH mode: Debian installs Go libraries as sources under /usr/share/gocode, not as modules;
# nothing is downloaded.
export GO111MODULE=off GOPATH="$GOPATH_DEBIAN" GOCACHE="$3/go-cache" GOFLAGS=-count=1
export PODSCOPE_COORDINATOR_BIN="$1" PODSCOPE_AGENT_BIN="$2"
go vet .
exec go test -v .
