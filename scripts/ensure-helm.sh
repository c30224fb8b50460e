#!/usr/bin/env bash
# Make sure Helm v3.22.0 is installed in the tools cache and print its path.
#
# Helm comes from the Go module proxy (`go install`), the only channel CI reaches; the binary is
# cached under ${STREAMCRAWL_TOOLS:-$HOME/.cache/streamcrawl/tools}/bin, so only the first run
# pays for the build (about 4 minutes on 2 cores, plus ~400 MB of module downloads).
# Everything but the final path goes to stderr, so `HELM=$(scripts/ensure-helm.sh)` works.
set -euo pipefail

HELM_VERSION=v3.22.0
TOOLS=${STREAMCRAWL_TOOLS:-$HOME/.cache/streamcrawl/tools}
HELM=$TOOLS/bin/helm

# `go install` leaves no version in `helm version` (no ldflags): read the module's build info.
installed_version() {
  go version -m "$HELM" 2>/dev/null | awk '$1 == "mod" && $2 == "helm.sh/helm/v3" { print $3 }'
}

if [[ -x $HELM && $(installed_version) == "$HELM_VERSION" ]]; then
  echo "$HELM"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "ensure-helm: 'go' is not on PATH; Helm $HELM_VERSION is built with 'go install'" >&2
  exit 1
fi

mkdir -p "$TOOLS/bin"
echo "ensure-helm: installing helm $HELM_VERSION into $TOOLS/bin (first time takes minutes)" >&2
start=$SECONDS
GOBIN="$TOOLS/bin" GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
  go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
echo "ensure-helm: built in $((SECONDS - start)) s" >&2

if [[ $(installed_version) != "$HELM_VERSION" ]]; then
  echo "ensure-helm: $HELM is not helm $HELM_VERSION after go install" >&2
  exit 1
fi
echo "$HELM"
