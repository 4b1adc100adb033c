#!/usr/bin/env bash
# Builds helm from the Go module proxy (the tools module hack/tools/helm, never the project's own
# go.mod), caches it outside the work tree and links it to bin/helm. Prints the path of the binary
# on stdout; progress goes to stderr. A second run (or a fresh clone on the same machine) reuses
# the cached binary; a version bump in hack/tools/helm rebuilds.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${DBFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dbfleet}/tools"
dir="$root/hack/tools/helm"
mkdir -p "$cache" "$root/bin"

ticker=""
trap '[[ -n "$ticker" ]] && kill "$ticker" 2>/dev/null; true' EXIT

log() { printf '[helm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

version="$(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v3)"
# The Kubernetes version helm template and helm lint assume (.Capabilities.KubeVersion), from the
# client-go helm builds with, as helm's Makefile sets it; without it they assume v1.20.
k8s_minor="$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)"
# helm reports its version from ldflags, as its release build sets them.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
key="$( (cat "$dir/go.mod" "$dir/go.sum"; echo "$ldflags") | sha256sum | cut -c1-16)"
target="$cache/helm-$version-$key"

# Test packages that run in parallel (go test ./...) may all ask for helm on a cold cache: one
# builds, the others wait for it here.
exec 9>"$cache/helm.lock"
if ! flock -n 9; then
	log "waiting for another build of helm to finish"
	flock 9
fi

if [[ -x "$target" ]]; then
	log "cached ($target)"
else
	log "building helm.sh/helm/v3/cmd/helm $version (cold: a few minutes of CPU on 2 cores)"
	start=$SECONDS
	# The ticker must not hold the lock (fd 9): its sleep would outlive the build.
	( exec 9>&-; while sleep 30; do log "still building ($((SECONDS - start))s)"; done ) &
	ticker=$!
	# Build into a temporary name first so an interrupted build never looks cached.
	if ! (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$target.tmp" helm.sh/helm/v3/cmd/helm); then
		kill "$ticker" 2>/dev/null || true
		log "build failed"
		exit 1
	fi
	kill "$ticker" 2>/dev/null || true
	ticker=""
	mv "$target.tmp" "$target"
	log "built in $((SECONDS - start))s ($target)"
	# Keep the build before this one: another work tree of this machine may still use it.
	find "$cache" -maxdepth 1 -name 'helm-*' ! -name '*.tmp' -printf '%T@ %p\n' | sort -rn | tail -n +3 | cut -d' ' -f2- | xargs -r rm -f
fi
ln -sfn "$target" "$root/bin/helm"
echo "$target"
